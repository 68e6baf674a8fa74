// The external environment (external_environment.hpp).
#include "actors/environment/external_environment.hpp"

#include <cmath>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <vector>

#include <nlohmann/json.hpp>

#include "actors/api/error_context.hpp"
#include "actors/environment/line_process.hpp"

namespace tandem {
namespace {

/// The processes of one external environment; a call borrows a free one.
class process_pool {
 public:
  explicit process_pool(const external_environment_settings& s) : settings_(s) {
    for (std::size_t i = 0; i < std::max<std::size_t>(1, s.processes); ++i) {
      processes_.push_back(std::make_unique<line_process>(s.command));
      free_.push_back(processes_.back().get());
    }
  }

  caf::expected<env_feedback> score(const trajectory& t) {
    line_process* p = nullptr;
    {
      std::unique_lock lock(mutex_);
      available_.wait(lock, [&] { return !free_.empty(); });
      p = free_.back();
      free_.pop_back();
    }
    auto out = ask(*p, t);
    {
      std::lock_guard lock(mutex_);
      free_.push_back(p);
    }
    available_.notify_one();
    return out;
  }

 private:
  caf::expected<env_feedback> ask(line_process& p, const trajectory& t) {
    nlohmann::json request = {{"id", t.id},
                              {"prompt_index", t.prompt_index},
                              {"sample_index", t.sample_index},
                              {"record", t.record},
                              {"prompt_tokens", t.prompt},
                              {"response_tokens", t.tokens},
                              {"finish", t.reason == gpu::finish_reason::stop_token ? "stop" : "length"}};
    if (!t.answer.empty()) request["answer"] = t.answer;
    const std::string where = "external environment `" + settings_.command + "`: trajectory " + std::to_string(t.id) +
                              " (prompt " + std::to_string(t.prompt_index) + ", sample " + std::to_string(t.sample_index) +
                              ")";
    std::string answer, problem;
    if (!p.exchange(request.dump(), settings_.timeout, answer, problem))
      return tandem_error(tandem_errc::engine_failure, where + ": " + problem);
    const auto bad = [&](const std::string& why) {
      std::string shown = answer.size() > 80 ? answer.substr(0, 77) + "..." : answer;
      return tandem_error(tandem_errc::engine_failure, where + ": " + why + "; it answered: " + shown);
    };
    nlohmann::json j;
    try {
      j = nlohmann::json::parse(answer);
    } catch (const nlohmann::json::out_of_range&) {  // a number beyond double's range
      return bad("the reward is not finite");
    } catch (const nlohmann::json::exception&) {
      return bad("the answer is not a JSON object");
    }
    if (!j.is_object()) return bad("the answer is not a JSON object");
    const auto reward = j.find("reward");
    if (reward == j.end() || !reward->is_number()) return bad("the answer has no number \"reward\"");
    env_feedback f;
    f.reward = reward->get<double>();
    if (!std::isfinite(f.reward)) return bad("the reward is not finite");
    if (const auto done = j.find("done"); done != j.end()) {
      if (!done->is_boolean()) return bad("\"done\" must be true or false");
      f.done = done->get<bool>();
    }
    if (const auto next = j.find("next_observation"); next != j.end()) {
      if (f.done) return bad("\"next_observation\" needs \"done\": false");
      if (!next->is_array()) return bad("\"next_observation\" must be a list of token ids");
      std::vector<std::int32_t> ids;
      for (const auto& x : *next) {
        if (!x.is_number_integer() || x.get<std::int64_t>() < 0 || x.get<std::int64_t>() > INT32_MAX)
          return bad("\"next_observation\" must be a list of token ids");
        ids.push_back(x.get<std::int32_t>());
      }
      f.next_observation = std::move(ids);
    }
    return f;
  }

  external_environment_settings settings_;
  std::vector<std::unique_ptr<line_process>> processes_;
  std::vector<line_process*> free_;
  std::mutex mutex_;
  std::condition_variable available_;
};

}  // namespace

scoring_function external_scoring(external_environment_settings settings) {
  auto pool = std::make_shared<process_pool>(settings);
  return [pool](const trajectory& t) { return pool->score(t); };
}

}  // namespace tandem
