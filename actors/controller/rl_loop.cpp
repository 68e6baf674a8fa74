// The controller's RL loop (state machine in rl_loop.hpp).
#include "actors/controller/rl_loop.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <optional>

#include <caf/all.hpp>
#include <nlohmann/json.hpp>

#include "actors/api/error_context.hpp"
#include "actors/api/fault_points.hpp"
#include "actors/controller/checkpoint_state.hpp"
#include "actors/controller/step_line.hpp"
#include "actors/controller/step_metrics.hpp"
#include "actors/driver/driver.hpp"
#include "actors/driver/fan_out.hpp"
#include "actors/driver/validation.hpp"
#include "actors/environment/environment.hpp"
#include "actors/refit_coordinator/refit_coordinator.hpp"
#include "actors/runtime/engine_factory.hpp"
#include "actors/runtime/recipe_settings.hpp"
#include "actors/runtime/run_task.hpp"
#include "orchestration/records/checkpoint_directory.h"
#include "orchestration/records/checkpoint_retention.h"
#include "orchestration/records/whole_file.h"
#include "orchestration/rl/step_settings.h"

namespace tandem {
namespace {

using json = nlohmann::json;

struct rl_loop_state {
  static inline const char* name = "rl_loop";

  rl_loop_settings s;
  refit_coordinator_actor coordinator;
  environment_actor environment;
  driver_actor driver;
  validation_actor validation;  // null when the recipe does not validate
  std::int64_t sft_steps = 0;  // the warm-up's (sft.max_num_steps), before the RL steps
  std::int64_t steps = 0;      // the RL phase's
  std::int64_t done = 0;       // steps of both phases done
  bool stop_requested = false;  // rl_stop: no step starts after the one in flight
  std::chrono::steady_clock::time_point started;
  bool finished = false;
  step_metric_settings metric_settings;
  std::chrono::milliseconds timeout{0};  // runtime.request_timeout_s: each checkpoint part and load
  std::int64_t checkpointed = -1;  // the step of the newest checkpoint saved or resumed from
  nlohmann::json last_record;      // the newest step's metrics record (the retention metric's source)
};

using loop_ptr = caf::stateful_actor<rl_loop_state>*;

void say(loop_ptr self, const std::string& line) {
  if (self->state.s.report) self->state.s.report(line);
}

/// A step's line: to step_lines in both forms, else its full form to report.
void say(loop_ptr self, const step_line& line) {
  if (self->state.s.step_lines) self->state.s.step_lines(line);
  else say(self, line.full);
}

void finish(loop_ptr self, bool ok, const std::string& message) {
  auto& st = self->state;
  if (st.finished) return;
  st.finished = true;
  self->send(st.s.listener, rl_done_atom::value, ok, message);
}

json trajectory_record(const step_report& r, std::size_t i, std::uint64_t seed) {
  const trajectory& t = r.trajectories[i];
  return json{{"step", r.step + 1},
              {"id", t.id},
              {"rng", {{"seed", seed}, {"step", r.step}, {"round", t.round}, {"prompt", t.prompt_index}, {"sample", t.sample_index}}},
              {"prompt_index", t.prompt_index},
              {"sample_index", t.sample_index},
              {"record", t.record},
              {"prompt", t.prompt},
              {"tokens", t.tokens},
              {"finish", t.reason == gpu::finish_reason::stop_token ? "stop" : "length"},
              {"version", t.weight_version},
              {"rollout_worker", t.worker},
              {"raw_reward", i < r.raw_rewards.size() ? r.raw_rewards[i] : 0.0},
              {"reward", i < r.rewards.size() ? r.rewards[i] : 0.0},
              {"advantage", i < r.advantages.size() ? r.advantages[i] : 0.0}};
}

socket_thread::traffic_counts minus(const socket_thread::traffic_counts& a, const socket_thread::traffic_counts& b) {
  return {a.sent_bytes - b.sent_bytes, a.received_bytes - b.received_bytes, a.heartbeat_bytes - b.heartbeat_bytes};
}

/// The step's trajectories, then its metrics record (with the metrics of `validation`, the pass
/// run after the step, if any); the first record that cannot be written (or an earlier failure of
/// controller.log) ends the run.
std::optional<records::file_error> write_records(rl_loop_state& st, const step_report& r,
                                                 const socket_thread::traffic_counts& traffic, double seconds,
                                                 const validation_report* validation = nullptr) {
  const auto& files = st.s.records;
  if (files.generations && !r.supervised)
    for (std::size_t i = 0; i < r.trajectories.size(); ++i)
      if (auto e = files.generations->append(trajectory_record(r, i, static_cast<std::uint64_t>(st.s.recipe.grpo.seed)).dump()))
        return e;
  json record = r.supervised ? sft_step_record(r, traffic, seconds, st.metric_settings)
                             : step_record(r, traffic, seconds, st.metric_settings);
  if (validation) add_validation_metrics(record, *validation);
  st.last_record = record;
  if (files.metrics)
    if (auto e = files.metrics->append(record.dump())) return e;
  if (files.tensorboard)
    if (auto e = files.tensorboard->add_scalars(static_cast<std::int64_t>(r.step) + 1, scalars_of(record))) return e;
  return files.failure();
}

// ---- validation (grpo.val_period, val_at_start, val_at_end) -------------------------------------
//
// A pass runs between steps, while the driver is idle and the rollout workers hold the newest
// version: before step 1 with val_at_start (its record is step 0's, validation metrics only),
// after step n when n % val_period == 0, and after the last step with val_at_end (once, when the
// last step is also a multiple of val_period). A step's records wait for the pass after it, whose
// metrics join the step's record; a failed pass writes the step's records without them and ends
// the run. After rl_stop no pass starts, unless the run checkpoints: then the pass due after the
// step in flight runs, so the checkpoint saved on the stop holds the records an uninterrupted run
// has there.

void next_step(loop_ptr self);

/// With a warm-up, a pass also runs right after its last step (the figure RL starts from), and
/// val_period counts RL steps.
bool validates_after(const rl_loop_state& st, std::int64_t done) {
  const auto& g = st.s.recipe.grpo;
  if (!st.validation || (st.stop_requested && st.s.checkpoints.directory.empty())) return false;
  if (done <= st.sft_steps) return done == st.sft_steps && st.sft_steps > 0;
  const std::int64_t rl = done - st.sft_steps;
  return (g.val_period > 0 && rl % g.val_period == 0) || (g.val_at_end && rl == st.steps);
}

/// "validation after step 5: accuracy 0.562 over 32 prompts in 1 round, avg length 7.5, 0.41 s"
/// ("validation before step 1: ..." for grpo.val_at_start's pass).
std::string validation_line(const validation_report& v) {
  char text[256];
  std::snprintf(text, sizeof text, "%s %u: accuracy %.3f over %zu prompts in %zu round%s, avg length %.1f, %.2f s",
                v.step == 0 ? "validation before step" : "validation after step", v.step == 0 ? 1u : v.step,
                v.accuracy, v.prompts, v.rounds, v.rounds == 1 ? "" : "s", v.avg_length, v.seconds);
  return text;
}

std::string tokens_text(const std::vector<std::int32_t>& tokens) {
  std::string out = "[";
  for (std::size_t i = 0; i < tokens.size(); ++i) {
    if (i > 0) out += ' ';
    out += std::to_string(tokens[i]);
  }
  return out + "]";
}

/// The first logger.num_val_samples_to_print samples of the pass, one line each.
void print_samples(loop_ptr self, const validation_report& v) {
  const auto wanted = static_cast<std::size_t>(self->state.s.recipe.logger.num_val_samples_to_print);
  for (std::size_t i = 0; i < std::min(wanted, v.samples.size()); ++i) {
    const validation_sample& x = v.samples[i];
    char reward[32];
    std::snprintf(reward, sizeof reward, "%g", x.reward);
    say(self, "validation sample " + std::to_string(x.prompt_index) + ": prompt " + tokens_text(x.prompt) + " -> " +
                  tokens_text(x.tokens) + (x.reason == gpu::finish_reason::stop_token ? " (stop)" : " (length)") +
                  ", reward " + reward + ", " + x.worker);
  }
}

/// A pass after `step` steps with `version` live; `record` writes what the pass belongs to (with
/// the pass, or nullptr once it failed), then the next step starts.
void validate(loop_ptr self, weight_version version, std::uint32_t step,
              std::function<std::optional<records::file_error>(const validation_report*)> record) {
  self->request(self->state.validation, caf::infinite, validate_atom_v, version, step)
      .then(
          [self, record](validation_report& v) {
            say(self, validation_line(v));
            print_samples(self, v);
            if (auto failed = record(&v)) return finish(self, false, failed->message);
            next_step(self);
          },
          [self, record](caf::error& e) {
            if (auto failed = record(nullptr)) return finish(self, false, failed->message);
            finish(self, false, error_text(e));
          });
}

/// The step's records, after the pass due after it if one is; then the next step.
void record_step(loop_ptr self, step_report r, const socket_thread::traffic_counts& traffic, double seconds) {
  auto& st = self->state;
  if (!validates_after(st, st.done)) {
    if (auto failed = write_records(st, r, traffic, seconds)) return finish(self, false, failed->message);
    return next_step(self);
  }
  const weight_version live = r.trained_to;
  auto kept = std::make_shared<step_report>(std::move(r));
  validate(self, live, static_cast<std::uint32_t>(st.done), [self, kept, traffic, seconds](const validation_report* v) {
    return write_records(self->state, *kept, traffic, seconds, v);
  });
}

/// Before step 1 (grpo.val_at_start): the pass's own record, step 0.
void validate_first(loop_ptr self, weight_version live) {
  validate(self, live, 0, [self](const validation_report* v) -> std::optional<records::file_error> {
    const auto& files = self->state.s.records;
    if (!v) return files.failure();
    const json record = validation_record(*v);
    if (files.metrics)
      if (auto e = files.metrics->append(record.dump())) return e;
    if (files.tensorboard)
      if (auto e = files.tensorboard->add_scalars(0, scalars_of(record))) return e;
    return files.failure();
  });
}

// ---- stepping -----------------------------------------------------------------------------------

/// After the last step: policy rank 0 saves its weights (its engine's save(): a Hugging Face
/// checkpoint directory for the Gemma 4 engines) into RUN_DIR/final_weights, then the loop ends
/// with `summary` and where they are; a failed save fails the run, naming the reason.
void save_final_weights(loop_ptr self, const std::string& summary) {
  auto& st = self->state;
  std::error_code ec;
  const auto dir = std::filesystem::absolute(std::filesystem::path(st.s.recipe.logger.log_dir) / "final_weights", ec);
  if (ec) return finish(self, false, "saving the final weights: " + st.s.recipe.logger.log_dir + ": " + ec.message());
  const policy_actor rank = st.s.policy.front();
  auto failed = [self](caf::error& e) { finish(self, false, "saving the final weights: " + error_text(e)); };
  self->request(rank, caf::infinite, version_atom_v)
      .then(
          [self, rank, dir, summary, failed](weight_version v) {
            self->request(rank, caf::infinite, save_atom_v, save_job{v, dir.string()})
                .then([self, summary](save_report& r) { finish(self, true, summary + "; final weights (v" + std::to_string(r.version) +
                                                                                ") in " + r.directory); },
                      failed);
          },
          failed);
}

// ---- step checkpoints (checkpointing.*; checkpoint_state.hpp) ---------------------------------
//
//   due after step n (n % save_period == 0, or the run's last step) --> snapshot (the driver's)
//   --> begin: CHECKPOINT_DIR/step_n.partial --> rank 0 writes its engine state into weights/
//   --> every rank writes its attestation into ranks/ (the two phases' first: each part synced)
//   --> every digest equal --> state.json and metrics.jsonl --> commit: manifest.json last, the
//   rename (the second phase) --> retention prunes --> the next step
//   any failure --> the run fails naming the rank or the path; the previous checkpoint is intact

/// A fan-out's current(): the loop has not ended (it ends at the first failure).
auto still_running(loop_ptr self) {
  return [self] { return !self->state.finished; };
}

std::string checkpoint_failure(std::int64_t step, const std::string& why) {
  return "checkpoint after step " + std::to_string(step) + ": " + why + " (the previous checkpoint is intact)";
}

/// Steps 3 to 5 of the save, once every rank's part is written.
void commit_checkpoint_of(loop_ptr self, const driver_snapshot& snap, const std::filesystem::path& partial,
                          const std::vector<save_report>& parts, std::chrono::steady_clock::time_point t0) {
  auto& st = self->state;
  const auto& plan = st.s.checkpoints;
  const std::int64_t step = st.done;
  for (const auto& p : parts)
    if (p.weights_digest != parts.front().weights_digest)
      return finish(self, false, checkpoint_failure(step, p.worker + " vouched for other weights than " + parts.front().worker +
                                                          " (data-parallel ranks diverged)"));
  controller_state cs;
  cs.step = step;
  cs.version = snap.live;
  cs.driver = snap;
  cs.records = records::sizes_of(st.s.records);
  cs.recipe = plan.recipe;
  cs.fingerprint = plan.fingerprint;
  if (auto e = records::write_whole_file(partial / "state.json", to_json(cs).dump(1) + "\n"))
    return finish(self, false, checkpoint_failure(step, e->message));
  // The metrics so far: RUN_DIR/metrics.jsonl's whole records, copied.
  if (st.s.records.metrics) {
    std::string text;
    if (auto e = records::read_prefix(st.s.records.metrics->path(), cs.records.metrics, text))
      return finish(self, false, checkpoint_failure(step, e->message));
    if (auto e = records::write_whole_file(partial / "metrics.jsonl", text))
      return finish(self, false, checkpoint_failure(step, e->message));
  }
  const std::optional<double> metric =
      plan.metric_name.empty() ? std::nullopt : retention_metric(st.last_record, plan.metric_name);
  json ranks = json::array();
  for (const auto& p : parts) ranks.push_back(json{{"policy_worker", p.worker}, {"weights_digest", p.weights_digest}});
  json manifest{{"version", snap.live},
                {"weights", "weights"},
                {"weights_digest", parts.front().weights_digest},
                {"ranks", ranks},
                {"fingerprint", plan.fingerprint},
                {"metric_name", plan.metric_name},
                {"metric", metric ? json(*metric) : json(nullptr)}};
  reach(fault_point::commit_before, static_cast<std::uint64_t>(step));
  auto committed = records::commit_checkpoint(partial, step, std::move(manifest));
  if (!committed) return finish(self, false, checkpoint_failure(step, committed.error().message));
  reach(fault_point::commit_after, static_cast<std::uint64_t>(step));
  st.checkpointed = step;
  // Retention: the newest and the best keep_top_k (checkpoint_retention.h).
  const auto listing = records::list_checkpoints(plan.directory);
  std::vector<records::saved_checkpoint> saved;
  for (const auto& c : listing.complete) {
    std::optional<double> v;
    if (const auto it = c.manifest.find("metric"); it != c.manifest.end() && it->is_number()) v = it->get<double>();
    saved.push_back({c.step, v});
  }
  const records::retention_rule rule{plan.keep_top_k, !plan.metric_name.empty(), plan.higher_is_better};
  std::string removed;
  for (const std::int64_t gone : records::checkpoints_to_remove(saved, rule)) {
    if (auto e = records::remove_checkpoint(plan.directory, gone))
      return finish(self, false, "checkpoint retention: " + e->message);
    removed += (removed.empty() ? "; removed " : ", ") + records::checkpoint_name(gone);
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  char took[32];
  std::snprintf(took, sizeof took, "%.2f s", seconds);
  say(self, "checkpoint " + records::checkpoint_name(step) + " (v" + std::to_string(snap.live) + ") saved in " +
                committed->string() + ", " + took + removed);
  next_step(self);
}

/// The save (the diagram above), then the next step.
void save_checkpoint(loop_ptr self) {
  auto& st = self->state;
  const std::int64_t step = st.done;
  const auto t0 = std::chrono::steady_clock::now();
  auto failed = [self, step](caf::error& e) { finish(self, false, checkpoint_failure(step, error_text(e))); };
  self->request(st.driver, caf::infinite, snapshot_atom_v)
      .then(
          [self, step, t0, failed](driver_snapshot& snap) {
            auto& st = self->state;
            auto partial = records::begin_checkpoint(st.s.checkpoints.directory, step);
            if (!partial) return finish(self, false, checkpoint_failure(step, partial.error().message));
            std::error_code ec;
            std::filesystem::create_directory(*partial / "ranks", ec);
            if (ec)
              return finish(self, false, checkpoint_failure(step, "cannot create " + (*partial / "ranks").string() + ": " +
                                                                      ec.message()));
            const policy_actor root = st.s.policy.front();
            const save_job state{snap.live, (*partial / "weights").string(), save_part::engine_state};
            self->request(root, caf::infinite, save_atom_v, state)
                .then(
                    [self, snap, dir = *partial, t0, failed](save_report&) {
                      auto& st = self->state;
                      std::vector<save_job> parts;
                      for (std::size_t r = 0; r < st.s.policy.size(); ++r)
                        parts.push_back({snap.live, (dir / "ranks" / ("policy-" + std::to_string(r) + ".json")).string(),
                                         save_part::attestation});
                      fan_out<save_report>(
                          self, st.s.policy, std::move(parts), st.timeout, save_atom_v, still_running(self), no_progress{},
                          [self, snap, dir, t0](std::vector<save_report>& all) { commit_checkpoint_of(self, snap, dir, all, t0); },
                          [failed](std::size_t, caf::error& e) mutable { failed(e); });
                    },
                    failed);
          },
          failed);
}

/// Whether a checkpoint is due now, after st.done steps: every save_period steps, after the last
/// step, and after the step in flight when the run was stopped on request (SIGINT or SIGTERM;
/// Slurm's time-limit signal reaches the controller as SIGTERM through tools/launch/slurm/run.sh),
/// so that the same command resumes where it stopped.
bool checkpoint_due(const rl_loop_state& st) {
  const auto& plan = st.s.checkpoints;
  if (plan.directory.empty() || st.done == 0 || st.done == st.checkpointed) return false;
  return st.done % plan.save_period == 0 || st.done == st.sft_steps + st.steps || st.stop_requested;
}

// ---- resuming -----------------------------------------------------------------------------------
//
//   handshake done --resume--> every policy rank loads CHECKPOINT/weights at its version
//   --every digest equal (and the checkpoint's)--> refit: the version live on every rollout worker
//   --> "resumed from step_N ..." --> stepping(N + 1)

void resume(loop_ptr self) {
  auto& st = self->state;
  const auto& point = *st.s.checkpoints.resume;
  const weight_version version = point.state.version;
  const std::string from = point.directory.string();
  auto failed = [self, from](caf::error& e) { finish(self, false, "resuming from " + from + ": " + error_text(e)); };
  std::vector<load_job> jobs(st.s.policy.size(), load_job{version, (point.directory / "weights").string()});
  fan_out<load_report>(
      self, st.s.policy, std::move(jobs), st.timeout, load_atom_v, still_running(self), no_progress{},
      [self, version, from, failed](std::vector<load_report>& reports) {
        for (const auto& y : reports)
          if (y.weights_digest != reports.front().weights_digest)
            return finish(self, false, "resuming from " + from + ": " + y.worker + " loaded other weights than " +
                                           reports.front().worker);
        self->request(self->state.coordinator, caf::infinite, refit_atom_v, version)
            .then(
                [self, version, from](refit_report&) {
                  auto& st = self->state;
                  st.done = st.s.checkpoints.resume->state.step;
                  st.checkpointed = st.done;
                  say(self, "resumed from " + from + ": " + std::to_string(st.done) + " of " +
                                std::to_string(st.sft_steps + st.steps) + " steps done, v" + std::to_string(version) +
                                " live on every policy and rollout worker");
                  next_step(self);
                },
                failed);
      },
      [failed](std::size_t, caf::error& e) mutable { failed(e); });
}

void next_step(loop_ptr self) {
  auto& st = self->state;
  const std::int64_t total = st.sft_steps + st.steps;
  if (checkpoint_due(st)) return save_checkpoint(self);
  if (st.stop_requested)  // the weights of the last step done are kept too
    return save_final_weights(self, std::to_string(st.done) + " of " + std::to_string(total) + " steps done; stopped on request");
  if (st.done == total) {
    const auto seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - st.started).count();
    char text[160];
    if (st.sft_steps > 0)
      std::snprintf(text, sizeof text, "%lld warm-up and %lld RL steps done in %.1f s", static_cast<long long>(st.sft_steps),
                    static_cast<long long>(st.steps), seconds);
    else
      std::snprintf(text, sizeof text, "%lld steps done in %.1f s", static_cast<long long>(st.done), seconds);
    return save_final_weights(self, text);
  }
  const bool warm_up = st.done < st.sft_steps;
  const auto before = st.s.socket ? st.s.socket->traffic() : socket_thread::traffic_counts{};
  const auto t0 = std::chrono::steady_clock::now();
  auto answered = [self, before, t0](step_report& r) {
    auto& st = self->state;
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const auto traffic = st.s.socket ? minus(st.s.socket->traffic(), before) : socket_thread::traffic_counts{};
    ++st.done;
    // Lines count each phase's own steps; records number every step of the run.
    const bool sft = st.done <= st.sft_steps;
    say(self, format_step_line(r, {sft ? st.done : st.done - st.sft_steps, sft ? st.sft_steps : st.steps, traffic, seconds,
                                   st.metric_settings.plan}));
    record_step(self, std::move(r), traffic, seconds);
  };
  auto failed = [self, warm_up](caf::error& e) {
    auto& st = self->state;
    finish(self, false, warm_up ? "warm-up step " + std::to_string(st.done + 1) + ": " + error_text(e)
                                : "step " + std::to_string(st.done - st.sft_steps + 1) + ": " + error_text(e));
  };
  if (warm_up) self->request(st.driver, caf::infinite, sft_step_atom_v).then(answered, failed);
  else self->request(st.driver, caf::infinite, step_atom_v).then(answered, failed);
}

caf::behavior rl_loop(loop_ptr self, rl_loop_settings s) {
  auto& st = self->state;
  st.s = std::move(s);
  const auto& recipe = st.s.recipe;
  st.steps = st.s.steps > 0 ? st.s.steps : recipe.grpo.max_num_steps;
  st.sft_steps = recipe.sft.max_num_steps;
  const auto timeout = std::chrono::milliseconds(recipe.runtime.request_timeout_s * 1000);
  st.timeout = timeout;
  // What the run trains on and how it is scored, from the recipe (run_task.hpp; `tandem run`
  // refuses what is not built and bad datasets before any process starts: this is the second line).
  auto task = load_run_task(recipe);
  auto rl_settings = rl::make_step_settings(recipe);
  if (!task || !rl_settings) {
    finish(self, false, !task ? task.error().message() : "the recipe's GRPO settings: " + rl_settings.error().message);
    return {[](member_lost_atom, const std::string&, const std::string&) {}, [](rl_stop_atom) {}};
  }
  for (const auto& note : skipped_prompt_notes(*task, recipe)) say(self, note);
  // grpo.max_num_epochs: the RL phase ends when its steps have drawn that many passes over the
  // training prompts (dynamic sampling draws extra rounds: the driver refuses a round past them).
  const auto training_size = static_cast<std::int64_t>(task->training.tokens.size());
  if (!rl_settings->use_dynamic_sampling) {
    const std::int64_t per_step = recipe.grpo.num_prompts_per_step;
    const std::int64_t by_epochs = std::max<std::int64_t>(1, recipe.grpo.max_num_epochs * training_size / per_step);
    if (by_epochs < st.steps) {
      say(self, "the RL phase ends after step " + std::to_string(by_epochs) + ": grpo.max_num_epochs " +
                    std::to_string(recipe.grpo.max_num_epochs) + " over " + std::to_string(training_size) +
                    " training prompts at " + std::to_string(per_step) + " per step");
      st.steps = by_epochs;
    }
  }

  refit_coordinator_config rc;
  rc.mode = recipe.policy.generation.colocated ? refit_mode::colocated : refit_mode::dedicated;
  rc.policy = st.s.policy.front();
  rc.rollout = st.s.rollout;
  rc.bucket_bytes = refit_bucket_bytes(recipe);
  rc.checksums = recipe.policy.refit.checksums;
  rc.in_place = recipe.policy.refit.receive == config::refit_receive_mode::in_place;
  rc.timeout = timeout;
  st.coordinator = spawn_refit_coordinator(self->system(), std::move(rc));

  environment_config ec;
  ec.workers = static_cast<std::size_t>(recipe.env.num_workers);
  ec.score = std::move(task->score);
  ec.timeout = timeout;
  st.environment = spawn_environment(self->system(), std::move(ec));

  driver_config dc;
  dc.policy = st.s.policy;
  dc.rollout = st.s.rollout;
  dc.refit = st.coordinator;
  dc.environment = st.environment;
  dc.prompts = std::move(task->training.tokens);
  dc.answers = std::move(task->training.answers);
  dc.shuffle = recipe.data.shuffle;
  dc.max_prompts = rl_settings->use_dynamic_sampling
                       ? static_cast<std::uint64_t>(recipe.grpo.max_num_epochs) * static_cast<std::uint64_t>(training_size)
                       : 0;
  dc.sft_examples = std::move(task->sft);
  dc.sft_batch = static_cast<std::size_t>(recipe.sft.batch_size);
  dc.prompts_per_step = static_cast<std::size_t>(recipe.grpo.num_prompts_per_step);
  dc.samples_per_prompt = static_cast<std::size_t>(recipe.grpo.num_generations_per_prompt);
  dc.max_new_tokens = static_cast<std::int32_t>(recipe.policy.generation.max_new_tokens);
  if (recipe.policy.generation.stop_token_ids)
    for (const auto t : *recipe.policy.generation.stop_token_ids) dc.stop_tokens.push_back(static_cast<std::int32_t>(t));
  dc.sampling = sampling_settings(recipe);
  dc.loss = loss_settings(recipe);
  dc.rewards.scaling = rl_settings->scaling;
  dc.rewards.shaping = rl_settings->shaping;
  dc.rewards.baseline = rl_settings->baseline;
  dc.rewards.advantages = rl_settings->advantages;
  dc.rewards.overlong_filtering = rl_settings->overlong_filtering;
  st.metric_settings.importance = dc.loss.importance;
  st.metric_settings.plan = st.s.memory_plan;
  dc.micro_batch_tokens = micro_batch_token_budget(recipe);
  dc.train_global_batch_size = rl_settings->train_global_batch_size;
  dc.max_trajectory_age_steps = static_cast<std::uint32_t>(recipe.grpo.max_trajectory_age_steps);
  if (st.steps > 0) dc.last_step = static_cast<std::uint32_t>(st.sft_steps + st.steps - 1);  // no batch generated ahead past the run
  dc.dynamic_sampling = rl_settings->use_dynamic_sampling;
  dc.prompts_per_round = static_cast<std::size_t>(rl_settings->prompts_per_round);
  dc.dynamic_sampling_settings = rl_settings->dynamic_sampling;
  dc.seed = static_cast<std::uint64_t>(recipe.grpo.seed);
  if (st.s.checkpoints.resume) dc.resume = st.s.checkpoints.resume->state.driver;
  dc.timeout = timeout;
  dc.on_generation_progress = st.s.progress;
  st.driver = spawn_driver(self->system(), std::move(dc));
  for (auto& a : {caf::actor_cast<caf::actor>(st.coordinator), caf::actor_cast<caf::actor>(st.environment),
                  caf::actor_cast<caf::actor>(st.driver)})
    self->link_to(a);
  if (task->validation) {
    validation_config vc;
    vc.rollout = st.s.rollout;
    vc.environment = st.environment;
    vc.prompts = std::move(task->validation->tokens);
    vc.answers = std::move(task->validation->answers);
    // The controller's frame limit holds a whole validation round from one rollout worker
    // (orchestration/control/frame_limits.hpp); the responses do not depend on the round size.
    vc.batch_size = static_cast<std::size_t>(recipe.grpo.val_batch_size);
    vc.max_new_tokens = static_cast<std::int32_t>(recipe.policy.generation.max_new_tokens);
    if (recipe.policy.generation.stop_token_ids)
      for (const auto t : *recipe.policy.generation.stop_token_ids) vc.stop_tokens.push_back(static_cast<std::int32_t>(t));
    vc.seed = static_cast<std::uint64_t>(recipe.grpo.seed);
    vc.timeout = timeout;
    st.validation = spawn_validation(self->system(), std::move(vc));
    self->link_to(st.validation);
  }

  st.started = std::chrono::steady_clock::now();
  self->request(st.coordinator, caf::infinite, handshake_atom_v)
      .then(
          [self](handshake_report& h) {
            say(self, "refit handshake: " + std::to_string(h.bucket_count) + " buckets of up to " +
                          std::to_string(h.bucket_bytes) + " bytes (" + std::to_string(h.total_bytes) + " in all), " +
                          to_string(h.mode) + ", v" + std::to_string(h.version) + " live on " +
                          std::to_string(h.rollout_workers.size()) + " rollout workers");
            if (self->state.s.checkpoints.resume) return resume(self);
            if (self->state.validation && self->state.s.recipe.grpo.val_at_start) return validate_first(self, h.version);
            next_step(self);
          },
          [self](caf::error& e) { finish(self, false, "refit handshake: " + error_text(e)); });
  return {
      [self](member_lost_atom, const std::string& name, const std::string& reason) {
        self->send(self->state.driver, member_lost_atom_v, name, reason);
        if (self->state.validation) self->send(self->state.validation, member_lost_atom_v, name, reason);
      },
      [self](rl_stop_atom) { self->state.stop_requested = true; },
  };
}

}  // namespace

caf::actor spawn_rl_loop(caf::actor_system& sys, rl_loop_settings settings) { return sys.spawn(rl_loop, std::move(settings)); }

}  // namespace tandem
