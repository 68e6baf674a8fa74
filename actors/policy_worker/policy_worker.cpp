// The policy worker (policy_worker.hpp): a train_engine behind the policy_actor interface.
#include "actors/policy_worker/policy_worker.hpp"

#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include <caf/typed_event_based_actor.hpp>

#include "actors/api/error_context.hpp"
#include "actors/api/fault_points.hpp"
#include "actors/api/refit_stream.hpp"
#include "actors/policy_worker/step_batch.hpp"
#include "orchestration/records/whole_file.h"

namespace tandem {
namespace {

constexpr const char* inline_refusal =
    "engine calls run inline, and a stream's broadcasts wait for every rank of the refit group "
    "(streams need engine_execution::off_scheduler)";

/// The device's training turn on a colocated member (device_turns.hpp); nothing to take otherwise.
gpu::status training_turn(const std::shared_ptr<device_turns>& turns) {
  return turns ? turns->for_training() : gpu::status::ok();
}

struct policy_worker_state {
  static inline const char* name = "policy_worker";

  policy_actor::stateful_pointer<policy_worker_state> self = nullptr;
  policy_worker_config config;
  gpu::weight_manifest manifest;  // cached at spawn: the engine's manifest never changes
  weight_version version = 0;
  const char* busy_with = nullptr;  // the engine call in flight, if any
  engine_runner runner;
  std::map<std::int64_t, std::shared_ptr<const gpu::bucket_plan>> plans;  // by bucket bytes
  std::optional<step_batch> batch;  // the last logprobs job's sequences and logprobs, until its train job
  std::string damaged;  // why the weights match no version (a train step failed after moving them), or ""

  /// "<name>: <what>"
  std::string where(const std::string& what) const { return config.name + ": " + what; }

  caf::error busy(const char* request) const {
    return tandem_error(tandem_errc::wrong_state,
                        where(std::string(request) + " refused: busy with " + busy_with));
  }

  caf::error stale(const char* request, weight_version asked) const {
    return tandem_error(tandem_errc::stale_version, where(std::string(request) + " for v" + std::to_string(asked) +
                                                          " refused: the current version is v" +
                                                          std::to_string(version)));
  }

  /// The bucket plan of `bucket_bytes` (> 0), cut once.
  std::shared_ptr<const gpu::bucket_plan> plan_for(std::int64_t bucket_bytes) {
    auto& plan = plans[bucket_bytes];
    if (!plan) plan = std::make_shared<const gpu::bucket_plan>(manifest, bucket_bytes);
    return plan;
  }

  /// A refusal while the weights no longer match any version (damaged), else nothing.
  std::optional<caf::error> refused_if_damaged(const char* request) const {
    if (damaged.empty()) return std::nullopt;
    return tandem_error(tandem_errc::engine_failure, where(std::string(request) + " refused: " + damaged));
  }

  caf::result<logprobs_result> logprobs(logprobs_job& job) {
    if (busy_with) return busy("logprobs");
    if (auto e = refused_if_damaged("logprobs")) return *e;
    if (job.version != version) return stale("logprobs", job.version);
    if (auto bad = check_logprobs_job(job))
      return tandem_error(tandem_errc::invalid_config, where("logprobs of step " + std::to_string(job.step) + ": " + *bad));
    if (job.reference && !config.reference)
      return tandem_error(tandem_errc::invalid_config,
                          where("logprobs of step " + std::to_string(job.step) +
                                ": the reference policy's logprobs were asked, but this rank holds no reference policy"));
    auto rp = self->make_response_promise<logprobs_result>();
    busy_with = "logprobs";
    batch.reset();  // a new step's logprobs replace whatever an unfinished step kept
    auto kept = std::make_shared<step_batch>();
    kept->step = job.step;
    kept->version = version;
    kept->sequences = std::move(job.sequences);
    kept->prompt_tokens = std::move(job.prompt_tokens);
    kept->lp_gen = std::move(job.lp_gen);
    auto work = [engine = config.engine, reference = job.reference ? config.reference : nullptr, kept,
                 sampling = job.sampling, turns = config.turns]() -> gpu::status {
      if (gpu::status s = training_turn(turns); !s) return s;
      auto prev = engine->logprobs(kept->sequences, sampling);
      if (!prev) return prev.error();
      kept->lp_prev = std::move(prev.value());
      if (reference) {
        auto ref = reference->logprobs(kept->sequences, sampling);
        if (!ref) return gpu::status{ref.error().code(), "the reference policy: " + ref.error().message()};
        kept->lp_ref = std::move(ref.value());
      }
      kept->excluded = excluded_tokens(kept->sequences, kept->prompt_tokens, kept->lp_prev);
      return gpu::status::ok();
    };
    runner.run(self, std::move(work), [this, rp, kept](gpu::status s) mutable {
      busy_with = nullptr;
      if (!s) {
        rp.deliver(engine_error(where("logprobs of step " + std::to_string(kept->step)), s));
        return;
      }
      logprobs_result r{config.name, version, kept->excluded, static_cast<std::int64_t>(kept->sequences.tokens.size())};
      batch = std::move(*kept);
      rp.deliver(std::move(r));
    });
    return rp;
  }

  /// What one train job did on the engine thread.
  struct train_outcome {
    train_outcome() = default;
    train_outcome(gpu::status s) : status(std::move(s)) {}  // NOLINT: a failure of the executor itself
    gpu::status status = gpu::status::ok();
    std::size_t optimizer_steps_done = 0;  // before a failure: the weights moved this many times
    std::size_t micro_batches = 0;
    gpu::ops::pg_loss_metrics metrics;
    bool any_metrics = false;
    double loss = 0;
    double grad_norm_sum = 0;
    gpu::optimizer_result optimizer;
    std::uint64_t digest = 0;
    plain::device_turn_figures turns;  // a colocated member's, since the last train job
  };

  caf::result<train_report> train(train_job& job) {
    if (busy_with) return busy("train");
    if (auto e = refused_if_damaged("train")) return *e;
    if (job.version != version) return stale("train", job.version);
    if (!batch)
      return tandem_error(tandem_errc::wrong_state,
                          where("train of step " + std::to_string(job.step) + " refused: no logprobs were computed for it"));
    if (auto bad = check_train_job(job, *batch))
      return tandem_error(tandem_errc::invalid_config, where("train of step " + std::to_string(job.step) + " refused: " + *bad));
    reach(fault_point::train, std::uint64_t{job.step} + 1);
    auto rp = self->make_response_promise<train_report>();
    busy_with = "train";
    auto kept = std::make_shared<const step_batch>(std::move(*batch));
    batch.reset();
    auto work = [engine = config.engine, loss = config.loss, lr = config.lr, kept, job = std::move(job),
                 turns = config.turns]() -> train_outcome {
      train_outcome out;
      if (gpu::status s = training_turn(turns); !s) {
        out.status = s;
        return out;
      }
      if (lr) {
        const bool supervised = job.objective == train_objective::cross_entropy;
        if (auto s = engine->set_learning_rate(supervised ? lr->cross_entropy : lr->policy_gradient); !s) {
          out.status = s;
          return out;
        }
      }
      std::size_t first = 0;
      for (std::size_t i = 0; i < job.optimizer_steps.size(); ++i) {
        const auto& o = job.optimizer_steps[i];
        const auto mbs = make_micro_batches(*kept, first, first + o.sequences, job.advantages, job.loss_multipliers,
                                            job.micro_batch_tokens);
        first += o.sequences;
        const std::string which = job.optimizer_steps.size() > 1 ? "optimizer step " + std::to_string(i + 1) + " of " +
                                                                       std::to_string(job.optimizer_steps.size()) + ": "
                                                                 : "";
        if (job.objective == train_objective::cross_entropy) {
          // The warm-up: each sequence's target (its generated part) under next-token
          // cross-entropy, normalised by the global batch's target tokens.
          std::vector<gpu::train_engine::supervised_micro_batch> sft;
          for (const auto& mb : mbs) sft.push_back({mb.sequences, mb.mask});
          auto r = engine->train_supervised_step(sft, o.counts.tokens);
          if (!r) {
            out.status = gpu::status{r.error().code(), which + r.error().message()};
            return out;
          }
          ++out.optimizer_steps_done;
          out.micro_batches += mbs.size();
          out.loss += r.value().loss;
          out.grad_norm_sum += r.value().optimizer.grad_norm;
          out.optimizer = r.value().optimizer;
          continue;
        }
        auto r = engine->train_step(mbs, loss, o.counts, job.sampling);
        if (!r) {
          out.status = gpu::status{r.error().code(), which + r.error().message()};
          return out;
        }
        ++out.optimizer_steps_done;
        out.micro_batches += mbs.size();
        if (!mbs.empty()) {
          if (out.any_metrics) out.metrics.merge(r.value().metrics);
          else out.metrics = r.value().metrics;
          out.any_metrics = true;
        }
        out.loss += r.value().metrics.pg_loss + loss.kl_beta * r.value().metrics.kl_penalty;
        out.grad_norm_sum += r.value().optimizer.grad_norm;
        out.optimizer = r.value().optimizer;
      }
      // The digest of the new weights, taken on the engine thread right after the step: the
      // driver compares the data-parallel ranks' digests to catch a rank that drifted.
      out.digest = engine->weights_digest();
      if (turns) out.turns = turns->take_figures();
      return out;
    };
    runner.run(self, std::move(work), [this, rp, step = kept->step](train_outcome r) mutable {
      busy_with = nullptr;
      if (!r.status) {
        if (r.optimizer_steps_done > 0)  // the weights moved, and match no version any more
          damaged = "step " + std::to_string(step) + " failed after " + std::to_string(r.optimizer_steps_done) +
                    " of its optimizer steps had changed the weights of v" + std::to_string(version) +
                    "; resume the run from its last checkpoint";
        rp.deliver(engine_error(where("train from v" + std::to_string(version)), r.status));
        return;
      }
      ++version;
      train_report report;
      report.worker = config.name;
      report.version = version;
      report.micro_batches = r.micro_batches;
      report.optimizer_steps = r.optimizer_steps_done;
      report.metrics = r.metrics;
      report.loss = r.loss;
      report.optimizer = r.optimizer;
      report.grad_norm_sum = r.grad_norm_sum;
      report.weights_digest = r.digest;
      report.turns = r.turns;
      rp.deliver(std::move(report));
    });
    return rp;
  }

  caf::result<save_report> save(const save_job& job) {
    if (busy_with) return busy("save");
    if (auto e = refused_if_damaged("save")) return *e;
    if (job.version != version) return stale("save", job.version);
    if (job.directory.empty())
      return tandem_error(tandem_errc::invalid_config, where("save of v" + std::to_string(version) + ": no directory given"));
    auto rp = self->make_response_promise<save_report>();
    busy_with = "save";
    auto engine = config.engine;
    const std::filesystem::path path(job.directory);
    const bool attestation = job.part == save_part::attestation;
    // The answer carries the digest of the weights saved (the controller compares the ranks').
    auto work = [engine, path, attestation, name = config.name, v = job.version,
                 turns = config.turns]() -> gpu::result<std::uint64_t> {
      const std::uint64_t digest = engine->weights_digest();
      if (attestation) {
        if (gpu::status s = write_attestation(path, name, v, digest); !s) return s;
        return digest;
      }
      reach(fault_point::save_weights_before, v);
      if (gpu::status s = training_turn(turns); !s) return s;  // a save reads the optimizer state
      if (gpu::status s = engine->save(path); !s) return s;
      reach(fault_point::save_weights_after, v);
      return digest;
    };
    runner.run(self, std::move(work), [this, rp, job](gpu::result<std::uint64_t> r) mutable {
      busy_with = nullptr;
      if (!r) {
        rp.deliver(engine_error(where("save of v" + std::to_string(job.version) + " into " + job.directory), r.error()));
        return;
      }
      rp.deliver(save_report{config.name, job.version, job.directory, *r});
    });
    return rp;
  }

  /// A rank's part of a step checkpoint (plain::save_part::attestation): {"worker", "version",
  /// "weights_digest"} at `path`, through PATH.tmp, synced, then renamed into place.
  static gpu::status write_attestation(const std::filesystem::path& path, const std::string& name, std::uint64_t v,
                                       std::uint64_t digest) {
    reach(fault_point::rank_part_before, v);
    const std::string text = "{\"worker\": \"" + name + "\", \"version\": " + std::to_string(v) +
                             ", \"weights_digest\": " + std::to_string(digest) + "}\n";
    if (auto e = records::write_whole_file(path, text, [v] { reach(fault_point::rank_part_during, v); }))
      return gpu::status(gpu::status_code::io_error, e->message);
    reach(fault_point::rank_part_after, v);
    return gpu::status::ok();
  }

  caf::result<load_report> load(const load_job& job) {
    if (busy_with) return busy("load");
    if (job.directory.empty())
      return tandem_error(tandem_errc::invalid_config, where("load of v" + std::to_string(job.version) + ": no directory given"));
    auto rp = self->make_response_promise<load_report>();
    busy_with = "load";
    batch.reset();  // a step's batch belongs to the weights it was computed with
    auto work = [engine = config.engine, dir = std::filesystem::path(job.directory),
                 turns = config.turns]() -> gpu::result<std::uint64_t> {
      if (gpu::status s = training_turn(turns); !s) return s;
      if (gpu::status s = engine->load(dir); !s) return s;
      return engine->weights_digest();
    };
    runner.run(self, std::move(work), [this, rp, job](gpu::result<std::uint64_t> r) mutable {
      busy_with = nullptr;
      if (!r) {
        rp.deliver(engine_error(where("load of v" + std::to_string(job.version) + " from " + job.directory), r.error()));
        return;
      }
      version = job.version;
      damaged.clear();  // the loaded weights are that version's, whatever happened before
      rp.deliver(load_report{config.name, job.version, *r});
    });
    return rp;
  }

  caf::result<stream_report> stream(const stream_job& job) {
    if (busy_with) return busy("stream");
    const std::string what = "stream of v" + std::to_string(job.version);
    if (!config.refit_group) return tandem_error(tandem_errc::invalid_config, where(what + " refused: no refit group"));
    if (runner.inline_calls()) return tandem_error(tandem_errc::invalid_config, where(what + " refused: " + inline_refusal));
    if (job.bucket_bytes <= 0)
      return tandem_error(tandem_errc::invalid_config,
                          where(what + " refused: bucket_bytes must be > 0, got " + std::to_string(job.bucket_bytes)));
    auto plan = plan_for(job.bucket_bytes);
    std::optional<caf::error> refusal;
    if (job.version != version) {
      refusal = stale("stream", job.version);
    } else if (job.bucket_count != plan->bucket_count()) {
      refusal = tandem_error(tandem_errc::invalid_config,
                             where(what + " refused: " + std::to_string(job.bucket_count) + " buckets asked, the plan of " +
                                   std::to_string(job.bucket_bytes) + "-byte buckets has " +
                                   std::to_string(plan->bucket_count())));
    }
    auto rp = self->make_response_promise<stream_report>();
    busy_with = "stream";
    auto group = config.refit_group;
    if (refusal) {  // the receivers are waiting for the opening: tell them to stop
      runner.run(
          self, [group] { return refuse_stream(*group); },
          [this, rp, e = *refusal](gpu::status) mutable {
            busy_with = nullptr;
            rp.deliver(e);
          });
      return rp;
    }
    auto engine = config.engine;
    auto work = [engine, group, plan, checksums = job.checksums]() -> gpu::result<stream_outcome> {
      return send_stream(*group, *engine, *plan, checksums);
    };
    runner.run(self, std::move(work), [this, rp, plan, what, version = job.version](gpu::result<stream_outcome> r) mutable {
      busy_with = nullptr;
      if (!r) {
        rp.deliver(engine_error(where(what), r.error()));
        return;
      }
      const stream_outcome& out = r.value();
      if (!out.ok()) {
        const char* after = out.failure == stream_failure::engine ? "; the stream's closing told the receivers" : "";
        const std::string at = out.bucket ? ": bucket " + std::to_string(*out.bucket) : std::string();
        rp.deliver(tandem_error(tandem_errc::engine_failure, where(what + at + ": " + out.reason + after)));
        return;
      }
      rp.deliver(stream_report{config.name, version, plan->bucket_count(), out.bytes});
    });
    return rp;
  }
};

policy_actor::behavior_type policy_worker(policy_actor::stateful_pointer<policy_worker_state> self,
                                          policy_worker_config config) {
  auto& st = self->state;
  st.self = self;
  st.version = config.initial_version;
  if (config.engine) {
    st.manifest = config.engine->manifest();
    st.runner.init(self, config.execution, config.name + " engine");
  } else {
    self->quit(tandem_error(tandem_errc::invalid_config, config.name + ": no train engine given"));
  }
  st.config = std::move(config);
  return {
      [self](logprobs_atom, logprobs_job& job) { return self->state.logprobs(job); },
      [self](train_atom, train_job& job) { return self->state.train(job); },
      [self](manifest_atom) {
        return manifest_reply{self->state.config.name, self->state.version, self->state.manifest};
      },
      [self](stream_atom, const stream_job& job) { return self->state.stream(job); },
      [self](save_atom, const save_job& job) { return self->state.save(job); },
      [self](load_atom, const load_job& job) { return self->state.load(job); },
      [self](version_atom) { return self->state.version; },
  };
}

}  // namespace

policy_actor spawn_policy_worker(caf::actor_system& sys, policy_worker_config config) {
  return sys.spawn(policy_worker, std::move(config));
}

}  // namespace tandem
