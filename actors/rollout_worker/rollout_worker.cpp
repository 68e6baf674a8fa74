// The rollout worker (rollout_worker.hpp): a generate_engine behind the rollout_actor interface.
#include "actors/rollout_worker/rollout_worker.hpp"

#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include <caf/typed_event_based_actor.hpp>

#include "actors/api/error_context.hpp"
#include "actors/api/fault_points.hpp"
#include "actors/api/refit_stream.hpp"
#include "actors/rollout_worker/generation.hpp"

namespace tandem {
namespace {

std::string v(weight_version x) { return "v" + std::to_string(x); }

struct rollout_worker_state {
  static inline const char* name = "rollout_worker";

  rollout_actor::stateful_pointer<rollout_worker_state> self = nullptr;
  rollout_worker_config config;
  weight_version live = 0;                  // the engine's live version (cached; the engine is the executor's)
  std::optional<weight_version> updating;   // the version being staged
  bool in_place = false;                    // the engine receives a refit over its live weights
  /// In place: the refit whose update was dropped unfinished (the engine holds no whole version
  /// until a complete refit commits; generate is refused meanwhile).
  std::optional<weight_version> without_weights;
  std::shared_ptr<const gpu::bucket_plan> plan;  // from the manifest check; shared with stream calls
  std::int64_t bucket_bytes = 0;
  const char* busy_with = nullptr;          // the engine call in flight, if any
  bool abort_after_call = false;            // abort(v) arrived while busy
  std::vector<caf::typed_response_promise<weight_version>> abort_waiters;  // answered once the update is dropped
  engine_runner runner;

  std::string where(const std::string& what) const { return config.name + ": " + what; }

  caf::error refuse(tandem_errc code, const std::string& what) const { return tandem_error(code, where(what)); }

  caf::error busy(const char* request) const {
    return refuse(tandem_errc::wrong_state, std::string(request) + " refused: busy with " + busy_with);
  }

  refit_ack ack(weight_version version, refit_stage stage) const { return refit_ack{config.name, version, stage, {}, {}}; }

  /// Ends the engine call in flight; an abort that arrived meanwhile is carried out now. The
  /// aborts waiting are answered (with the live version) once no update is left to drop.
  void call_done() {
    busy_with = nullptr;
    const bool abort_now = abort_after_call && updating;
    abort_after_call = false;
    if (abort_now) return start_abort();
    for (auto& w : abort_waiters) w.deliver(live);
    abort_waiters.clear();
  }

  /// What the engine holds after a dropped update: the live version, or (an in-place update
  /// dropped) no weights.
  std::string left_live() const {
    return without_weights ? "no weights are live until a complete refit (" + v(*without_weights) + " was received in place over " +
                                 v(live) + ")"
                           : v(live) + " stays live";
  }

  /// Records that the update to `version` was dropped on the engine.
  void dropped(weight_version version) {
    if (in_place) without_weights = version;
  }

  /// Drops the update in progress on the engine (staging: the previous version stays live; in
  /// place: the engine is left without weights).
  void start_abort() {
    if (updating) dropped(*updating);
    updating.reset();
    busy_with = "abort";
    auto engine = config.engine;
    runner.run(
        self,
        [engine] {
          engine->abort_weight_update();
          return gpu::status::ok();
        },
        [this](gpu::status) { call_done(); });
  }

  caf::result<generate_result> generate(generate_job& job) {
    if (busy_with) return busy("generate");
    if (updating) return refuse(tandem_errc::wrong_state, "generate refused: a refit to " + v(*updating) + " is in progress");
    if (without_weights)
      return refuse(tandem_errc::wrong_state, "generate refused: no weights are live (the refit to " + v(*without_weights) +
                                                  ", received in place over " + v(live) +
                                                  ", did not complete; a complete refit restores them)");
    if (job.version != live)
      return refuse(tandem_errc::stale_version, "generate for " + v(job.version) + " refused: " + v(live) + " is live");
    if (!job.requests.empty()) reach(fault_point::generate, std::uint64_t{job.requests.front().rng.step} + 1);
    auto rp = self->make_response_promise<generate_result>();
    busy_with = "generate";
    const weight_version version = job.version;
    auto engine = config.engine;
    auto work = [engine, job = std::move(job), name = config.name,
                 turns = config.turns]() -> gpu::result<std::vector<trajectory>> {
      if (turns)  // a colocated member: the trainer hands the device over first
        if (gpu::status s = turns->for_generation(); !s) return s;
      return run_generation(*engine, job, name);
    };
    runner.run(self, std::move(work), [this, rp, version](gpu::result<std::vector<trajectory>> r) mutable {
      call_done();
      if (!r) {
        rp.deliver(engine_error(where("generate with " + v(version)), r.error()));
        return;
      }
      rp.deliver(generate_result{config.name, version, std::move(r.value())});
    });
    return rp;
  }

  caf::result<manifest_accepted> check(const manifest_check& job) {
    if (busy_with) return busy("check");
    if (updating) return refuse(tandem_errc::wrong_state, "check refused: a refit to " + v(*updating) + " is in progress");
    if (job.bucket_bytes <= 0)
      return refuse(tandem_errc::invalid_config, "bucket_bytes must be > 0, got " + std::to_string(job.bucket_bytes));
    if (auto s = gpu::check_manifest(config.manifest, job.manifest); !s)
      return refuse(tandem_errc::invalid_config, "manifest refused: " + s.message());
    plan = std::make_shared<const gpu::bucket_plan>(config.manifest, job.bucket_bytes);
    bucket_bytes = job.bucket_bytes;
    return manifest_accepted{config.name, live, plan->bucket_count(), plan->total_bytes()};
  }

  caf::result<refit_ack> bump(weight_version version) {
    if (busy_with) return busy("bump");
    if (version <= live)
      return refuse(tandem_errc::stale_version, "bump to " + v(version) + " refused: " + v(live) + " is live");
    return start_bump(version);
  }

  /// bump_weight_version (after dropping an unfinished update): the new version is live at once.
  caf::result<refit_ack> start_bump(weight_version version) {
    auto rp = self->make_response_promise<refit_ack>();
    const bool drop_first = updating.has_value();
    updating.reset();
    busy_with = "bump";
    auto engine = config.engine;
    auto work = [engine, version, drop_first]() -> gpu::status {
      if (drop_first) engine->abort_weight_update();
      if (auto s = engine->bump_weight_version(version); !s) return s;
      if (engine->weight_version() != version)
        return {gpu::status_code::device_error, "the engine committed v" + std::to_string(engine->weight_version())};
      return gpu::status::ok();
    };
    runner.run(self, std::move(work), [this, rp, version](gpu::status s) mutable {
      if (!s) {
        call_done();
        rp.deliver(engine_error(where("bump " + v(version)), s));
        return;
      }
      live = version;
      call_done();
      rp.deliver(ack(version, refit_stage::bump));
    });
    return rp;
  }

  /// The ack of a stream that ran: staged, or aborted with the failing bucket and the reason.
  refit_ack stream_ack(weight_version version, const stream_outcome& out, bool checksums) const {
    refit_ack a = ack(version, refit_stage::stream);
    a.stream.checksums = checksums;
    a.stream.checksums_matched = out.checksums_matched;
    a.stream.checksum_mismatch = out.checksum_mismatch;
    if (out.ok()) return a;
    a.stream.aborted = true;
    a.stream.failed_bucket = out.bucket;
    const std::string at = out.bucket ? "bucket " + std::to_string(*out.bucket) + " of " + v(version) : "stream of " + v(version);
    const std::string reason = out.failure == stream_failure::transport ? "transport: " + out.reason : out.reason;
    a.error = where(at + ": " + reason + "; update dropped, " + left_live());
    return a;
  }

  /// begin + every bucket, the bytes from the refit group's root (refit_stream.hpp).
  caf::result<refit_ack> stream(const stream_job& job) {
    if (busy_with) return busy("stream");
    const std::string what = "stream of " + v(job.version);
    if (!config.refit_group) return refuse(tandem_errc::invalid_config, what + " refused: no refit group");
    if (runner.inline_calls())
      return refuse(tandem_errc::invalid_config,
                    what + " refused: engine calls run inline, and a stream's broadcasts wait for every rank of the "
                           "refit group (streams need engine_execution::off_scheduler)");
    if (job.bucket_bytes <= 0)
      return refuse(tandem_errc::invalid_config,
                    what + " refused: bucket_bytes must be > 0, got " + std::to_string(job.bucket_bytes));
    std::optional<caf::error> refusal;
    if (!plan) {
      refusal = refuse(tandem_errc::wrong_state, what + " refused: no manifest checked");
    } else if (job.version <= live) {
      refusal = refuse(tandem_errc::stale_version, what + " refused: " + v(live) + " is live");
    } else if (job.bucket_bytes != bucket_bytes || job.bucket_count != plan->bucket_count()) {
      refusal = refuse(tandem_errc::invalid_config,
                       what + " refused: " + std::to_string(job.bucket_count) + " buckets of " +
                           std::to_string(job.bucket_bytes) + " bytes, the checked plan cuts " +
                           std::to_string(plan->bucket_count()) + " of " + std::to_string(bucket_bytes));
    }
    auto rp = self->make_response_promise<refit_ack>();
    busy_with = "stream";
    auto group = config.refit_group;
    const int root = config.refit_root;
    const bool checksums = job.checksums;
    if (refusal) {  // take part anyway, discarding, so the root and the other receivers are not left waiting
      auto cut = std::make_shared<const gpu::bucket_plan>(config.manifest, job.bucket_bytes);
      auto work = [group, root, cut, checksums]() -> gpu::result<stream_outcome> {
        return receive_stream(*group, root, nullptr, *cut, checksums);
      };
      runner.run(self, std::move(work), [this, rp, e = *refusal](gpu::result<stream_outcome>) mutable {
        call_done();
        rp.deliver(e);
      });
      return rp;
    }
    const bool drop_first = updating.has_value();
    if (drop_first) dropped(*updating);  // in place, the unfinished update took the weights with it
    const weight_version version = job.version;
    updating = version;  // so that an abort(version) arriving meanwhile is carried out afterwards
    auto engine = config.engine;
    auto began = std::make_shared<bool>(false);  // the engine's update began (in place: its weights are being overwritten)
    auto work = [engine, group, root, cut = plan, version, drop_first, checksums, began]() -> gpu::result<stream_outcome> {
      if (drop_first) engine->abort_weight_update();
      if (gpu::status s = engine->begin_weight_update(version); !s) {
        stream_outcome out = receive_stream(*group, root, nullptr, *cut, checksums);  // the group stays in step
        if (out.failure == stream_failure::transport) return out;
        out.failure = stream_failure::engine;
        out.bucket.reset();
        out.reason = "begin: " + std::string(gpu::to_string(s.code())) + ": " + s.message();
        return out;
      }
      *began = true;
      stream_outcome out = receive_stream(*group, root, engine.get(), *cut, checksums);
      if (!out.ok()) engine->abort_weight_update();
      return out;
    };
    runner.run(self, std::move(work), [this, rp, version, checksums, began](gpu::result<stream_outcome> r) mutable {
      if (!r) {  // the engine executor itself failed
        updating.reset();
        if (*began) dropped(version);
        call_done();
        rp.deliver(engine_error(where("stream of " + v(version) + " (update dropped, " + left_live() + ")"), r.error()));
        return;
      }
      if (!r.value().ok()) {  // the update was aborted on the engine
        updating.reset();
        if (*began) dropped(version);
      }
      call_done();
      rp.deliver(stream_ack(version, r.value(), checksums));
    });
    return rp;
  }

  caf::result<refit_ack> commit(weight_version version) {
    if (busy_with) return busy("commit");
    if (!updating) return refuse(tandem_errc::wrong_state, "commit " + v(version) + " refused: no update in progress");
    if (version != *updating)
      return refuse(tandem_errc::stale_version, "commit " + v(version) + " refused: updating to " + v(*updating));
    auto rp = self->make_response_promise<refit_ack>();
    busy_with = "commit";
    auto engine = config.engine;
    auto work = [engine, version]() -> gpu::status {
      if (auto s = engine->commit_weight_update(); !s) {
        engine->abort_weight_update();
        return s;
      }
      if (engine->weight_version() != version)
        return {gpu::status_code::device_error, "the engine committed v" + std::to_string(engine->weight_version())};
      return gpu::status::ok();
    };
    runner.run(self, std::move(work), [this, rp, version](gpu::status s) mutable {
      updating.reset();
      if (!s) {
        dropped(version);
        call_done();
        rp.deliver(engine_error(where("commit " + v(version) + " (update dropped, " + left_live() + ")"), s));
        return;
      }
      live = version;
      without_weights.reset();
      call_done();
      rp.deliver(ack(version, refit_stage::commit));
    });
    return rp;
  }

  caf::result<weight_version> abort(weight_version version) {
    if (!updating || *updating != version) return live;
    auto rp = self->make_response_promise<weight_version>();
    abort_waiters.push_back(rp);
    if (busy_with) {
      abort_after_call = true;
    } else {
      start_abort();
    }
    return rp;
  }
};

rollout_actor::behavior_type rollout_worker(rollout_actor::stateful_pointer<rollout_worker_state> self,
                                            rollout_worker_config config) {
  auto& st = self->state;
  st.self = self;
  if (config.engine) {
    st.live = config.engine->weight_version();
    st.in_place = config.engine->receive() == gpu::refit_receive::in_place && !config.engine->shares_weights();
    st.runner.init(self, config.execution, config.name + " engine");
  } else {
    self->quit(tandem_error(tandem_errc::invalid_config, config.name + ": no generate engine given"));
  }
  st.config = std::move(config);
  return {
      [self](generate_atom, generate_job& job) { return self->state.generate(job); },
      [self](check_atom, const manifest_check& job) { return self->state.check(job); },
      [self](stream_atom, const stream_job& job) { return self->state.stream(job); },
      [self](commit_atom, weight_version version) { return self->state.commit(version); },
      [self](abort_atom, weight_version version) { return self->state.abort(version); },
      [self](bump_atom, weight_version version) { return self->state.bump(version); },
      [self](version_atom) { return self->state.live; },
  };
}

}  // namespace

rollout_actor spawn_rollout_worker(caf::actor_system& sys, rollout_worker_config config) {
  return sys.spawn(rollout_worker, std::move(config));
}

}  // namespace tandem
