// The policy worker (policy_worker.hpp): a train_engine behind the policy_actor interface.
#include "actors/policy_worker/policy_worker.hpp"

#include <map>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include <caf/typed_event_based_actor.hpp>

#include "actors/api/error_context.hpp"
#include "actors/api/refit_stream.hpp"

namespace tandem {
namespace {

constexpr const char* inline_refusal =
    "engine calls run inline, and a stream's broadcasts wait for every rank of the refit group "
    "(streams need engine_execution::off_scheduler)";

struct policy_worker_state {
  static inline const char* name = "policy_worker";

  policy_actor::stateful_pointer<policy_worker_state> self = nullptr;
  policy_worker_config config;
  gpu::weight_manifest manifest;  // cached at spawn: the engine's manifest never changes
  weight_version version = 0;
  const char* busy_with = nullptr;  // the engine call in flight, if any
  engine_runner runner;
  std::map<std::int64_t, std::shared_ptr<const gpu::bucket_plan>> plans;  // by bucket bytes

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

  caf::result<logprobs_result> logprobs(logprobs_job& job) {
    if (busy_with) return busy("logprobs");
    auto rp = self->make_response_promise<logprobs_result>();
    busy_with = "logprobs";
    auto engine = config.engine;
    runner.run(
        self, [engine, job = std::move(job)] { return engine->logprobs(job.sequences, job.sampling); },
        [this, rp](gpu::result<std::vector<float>> r) mutable {
          busy_with = nullptr;
          if (!r) {
            rp.deliver(engine_error(where("logprobs"), r.error()));
            return;
          }
          rp.deliver(logprobs_result{config.name, version, std::move(r.value())});
        });
    return rp;
  }

  caf::result<train_report> train(train_job& job) {
    if (busy_with) return busy("train");
    if (job.version != version) return stale("train", job.version);
    auto rp = self->make_response_promise<train_report>();
    busy_with = "train";
    const std::size_t micro_batches = job.micro_batches.size();
    auto engine = config.engine;
    // The digest of the new weights, taken on the engine thread right after the step: the driver
    // compares the data-parallel ranks' digests to catch a rank that drifted.
    auto digest = std::make_shared<std::uint64_t>(0);
    auto work = [engine, digest, job = std::move(job)]() -> gpu::result<gpu::train_step_result> {
      auto r = engine->train_step(job.micro_batches, job.loss, job.counts, job.sampling);
      if (r) *digest = engine->weights_digest();
      return r;
    };
    runner.run(self, std::move(work), [this, rp, micro_batches, digest](gpu::result<gpu::train_step_result> r) mutable {
      busy_with = nullptr;
      if (!r) {
        rp.deliver(engine_error(where("train from v" + std::to_string(version)), r.error()));
        return;
      }
      ++version;
      train_report report{config.name, version, micro_batches, r.value().metrics, r.value().optimizer};
      report.weights_digest = *digest;
      rp.deliver(std::move(report));
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
      [self](version_atom) { return self->state.version; },
  };
}

}  // namespace

policy_actor spawn_policy_worker(caf::actor_system& sys, policy_worker_config config) {
  return sys.spawn(policy_worker, std::move(config));
}

}  // namespace tandem
