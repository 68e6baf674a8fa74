// state.json of a step checkpoint (checkpoint_state.hpp).
#include "actors/controller/checkpoint_state.hpp"

#include <bit>
#include <cmath>
#include <utility>
#include <vector>

namespace tandem {
namespace {

using json = nlohmann::json;

json trajectory_json(const trajectory& t) {
  std::vector<std::uint32_t> bits;
  bits.reserve(t.logprobs.size());
  for (const float x : t.logprobs) bits.push_back(std::bit_cast<std::uint32_t>(x));
  return json{{"id", t.id},
              {"tokens", t.tokens},
              {"logprob_bits", bits},
              {"finish", t.reason == gpu::finish_reason::stop_token ? "stop" : "length"},
              {"weight_version", t.weight_version},
              {"prompt_index", t.prompt_index},
              {"sample_index", t.sample_index},
              {"round", t.round},
              {"prompt", t.prompt},
              {"rollout_worker", t.worker},
              {"record", t.record},
              {"answer", t.answer}};
}

/// Reads fields of one object, remembering the first problem with its path.
class reader {
 public:
  reader(const json& j, std::string path, std::string& error) : j_(j), path_(std::move(path)), error_(error) {
    if (!j_.is_object()) problem("", "expected an object");
  }

  template <class T>
  bool get(const char* key, T& out) {
    if (!error_.empty()) return false;
    const auto it = j_.find(key);
    if (it == j_.end()) return problem(key, "missing");
    try {
      out = it->template get<T>();
      return true;
    } catch (const json::exception&) {
      return problem(key, "has the wrong type");
    }
  }

  const json* child(const char* key) {
    if (!error_.empty()) return nullptr;
    const auto it = j_.find(key);
    if (it == j_.end()) {
      problem(key, "missing");
      return nullptr;
    }
    return &*it;
  }

  std::string path(const std::string& key) const { return path_.empty() ? key : path_ + "." + key; }

  bool problem(const std::string& key, const std::string& what) {
    if (error_.empty()) error_ = (key.empty() ? (path_.empty() ? std::string("state.json") : path_) : path(key)) + ": " + what;
    return false;
  }

 private:
  const json& j_;
  std::string path_;
  std::string& error_;
};

bool read_trajectory(const json& j, const std::string& path, trajectory& t, std::string& error) {
  reader r(j, path, error);
  std::vector<std::uint32_t> bits;
  std::string finish;
  r.get("id", t.id);
  r.get("tokens", t.tokens);
  r.get("logprob_bits", bits);
  r.get("finish", finish);
  r.get("weight_version", t.weight_version);
  r.get("prompt_index", t.prompt_index);
  r.get("sample_index", t.sample_index);
  r.get("round", t.round);
  r.get("prompt", t.prompt);
  r.get("rollout_worker", t.worker);
  r.get("record", t.record);
  r.get("answer", t.answer);
  if (!error.empty()) return false;
  if (finish != "stop" && finish != "length") return r.problem("finish", "is \"" + finish + "\", expected stop or length");
  if (bits.size() != t.tokens.size()) return r.problem("logprob_bits", "does not have one entry per token");
  t.reason = finish == "stop" ? gpu::finish_reason::stop_token : gpu::finish_reason::length;
  t.logprobs.clear();
  for (const auto b : bits) t.logprobs.push_back(std::bit_cast<float>(b));
  return true;
}

}  // namespace

json to_json(const controller_state& s) {
  const driver_snapshot& d = s.driver;
  json driver{{"live", d.live},
              {"next_step", d.next_step},
              {"next_prompt", d.next_prompt},
              {"next_example", d.next_example},
              {"next_event", d.next_event},
              {"ahead", nullptr}};
  if (d.ahead) {
    json trajectories = json::array();
    for (const auto& t : d.ahead->trajectories) trajectories.push_back(trajectory_json(t));
    driver["ahead"] = json{{"for_step", d.ahead->for_step},
                           {"version", d.ahead->version},
                           {"records", d.ahead->records},
                           {"trajectories", std::move(trajectories)},
                           {"seconds", d.ahead->seconds}};
  }
  return json{{"format", "tandem-controller-state"},
              {"format_version", 1},
              {"step", s.step},
              {"version", s.version},
              {"driver", std::move(driver)},
              {"records",
               {{"metrics", s.records.metrics},
                {"generations", s.records.generations},
                {"tensorboard_file", s.records.tensorboard_file},
                {"tensorboard", s.records.tensorboard}}},
              {"recipe", s.recipe},
              {"fingerprint", s.fingerprint}};
}

std::optional<controller_state> controller_state_from_json(const json& j, std::string& error) {
  error.clear();
  controller_state s;
  reader top(j, "", error);
  std::string format;
  int format_version = 0;
  top.get("format", format);
  top.get("format_version", format_version);
  if (!error.empty()) return std::nullopt;
  if (format != "tandem-controller-state" || format_version != 1) {
    top.problem("format", "is " + format + " version " + std::to_string(format_version) +
                              ", expected tandem-controller-state version 1");
    return std::nullopt;
  }
  top.get("step", s.step);
  top.get("version", s.version);
  top.get("recipe", s.recipe);
  top.get("fingerprint", s.fingerprint);
  if (const json* rec = top.child("records")) {
    reader r(*rec, "records", error);
    r.get("metrics", s.records.metrics);
    r.get("generations", s.records.generations);
    r.get("tensorboard_file", s.records.tensorboard_file);
    r.get("tensorboard", s.records.tensorboard);
  }
  if (const json* dj = top.child("driver")) {
    reader r(*dj, "driver", error);
    driver_snapshot& d = s.driver;
    r.get("live", d.live);
    r.get("next_step", d.next_step);
    r.get("next_prompt", d.next_prompt);
    r.get("next_example", d.next_example);
    r.get("next_event", d.next_event);
    if (const json* aj = r.child("ahead"); aj && !aj->is_null()) {
      reader a(*aj, "driver.ahead", error);
      driver_snapshot::batch_ahead b;
      a.get("for_step", b.for_step);
      a.get("version", b.version);
      a.get("records", b.records);
      a.get("seconds", b.seconds);
      if (const json* tj = a.child("trajectories")) {
        if (!tj->is_array()) a.problem("trajectories", "expected an array");
        for (std::size_t i = 0; error.empty() && tj->is_array() && i < tj->size(); ++i) {
          trajectory t;
          if (read_trajectory((*tj)[i], "driver.ahead.trajectories[" + std::to_string(i) + "]", t, error))
            b.trajectories.push_back(std::move(t));
        }
      }
      d.ahead = std::move(b);
    }
  }
  if (!error.empty()) return std::nullopt;
  if (s.step < 0) {
    error = "step: is negative";
    return std::nullopt;
  }
  return s;
}

std::optional<double> retention_metric(const json& record, const std::string& metric_name) {
  std::string key = metric_name;
  if (key.starts_with("val:")) key = "validation/" + key.substr(4);
  else if (key.starts_with("train:")) key = "train/" + key.substr(6);
  for (const std::string& k : {metric_name, key}) {
    const auto it = record.find(k);
    if (it != record.end() && it->is_number()) {
      const double v = it->get<double>();
      if (std::isfinite(v)) return v;
    }
  }
  return std::nullopt;
}

}  // namespace tandem
