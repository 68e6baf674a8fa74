// The refit coordinator's state machine (drawn in refit_coordinator.hpp): one function per state
// (idle, handshaking, ready, refitting), the stages of a refit as helpers of refitting: stream then
// commit (dedicated) or bump (colocated).
#include "actors/refit_coordinator/refit_coordinator.hpp"

#include <optional>
#include <set>
#include <string>
#include <utility>

#include <caf/typed_event_based_actor.hpp>

#include "actors/api/error_context.hpp"

namespace tandem {
namespace {

std::string v(weight_version x) { return "v" + std::to_string(x); }

using behavior = refit_coordinator_actor::behavior_type;

/// One refit stage: a request to every rollout worker, an ack awaited from each (and for a stream
/// stage, policy rank 0's stream_report).
struct stage_state {
  std::uint64_t serial = 0;             // deadlines and late replies name the stage they belong to
  refit_stage kind = refit_stage::stream;
  bool aborting = false;                // the abort round after a failure (answers are versions)
  std::vector<bool> pending;            // by rollout worker
  bool policy_pending = false;          // stream: policy rank 0 has not answered yet
  std::size_t left = 0;                 // rollout workers pending, plus 1 while policy_pending
};

/// The refit in progress.
struct refit_state {
  weight_version version = 0;
  caf::typed_response_promise<refit_report> promise;
  refit_report report;
  std::optional<caf::error> failure;    // the first failure; the refit aborts when its stage ends
  std::vector<std::string> after_abort; // rollout workers whose abort answer was not the old version
};

struct refit_coordinator_state {
  static inline const char* name = "refit_coordinator";

  refit_coordinator_actor::stateful_pointer<refit_coordinator_state> self = nullptr;
  refit_coordinator_config config;
  std::vector<std::string> names;  // rollout worker names, from the handshake
  weight_version live = 0;
  std::size_t bucket_count = 0;
  std::int64_t total_bytes = 0;
  std::uint64_t next_serial = 1;
  stage_state stage;
  refit_state refit;
  bool refitting_now = false;

  caf::error refuse(const std::string& what) const {
    return tandem_error(tandem_errc::wrong_state, "refit coordinator: " + what);
  }

  std::string worker(std::size_t i) const {
    return i < names.size() ? names[i] : "rollout worker " + std::to_string(i);
  }

  // ---- idle -------------------------------------------------------------------------------------

  behavior idle() {
    return {
        [this](handshake_atom) -> caf::result<handshake_report> { return start_handshake(); },
        [this](refit_atom, weight_version) -> caf::result<refit_report> {
          return refuse("refit refused: no handshake yet");
        },
        [this](const refit_ack& a) { drop(a); },
        [](deadline_atom, std::uint64_t) {},
    };
  }

  // ---- handshaking ------------------------------------------------------------------------------

  behavior handshaking() {
    return {
        [this](handshake_atom) -> caf::result<handshake_report> { return refuse("handshake refused: one is in progress"); },
        [this](refit_atom, weight_version) -> caf::result<refit_report> {
          return refuse("refit refused: the handshake is in progress");
        },
        [this](const refit_ack& a) { drop(a); },
        [](deadline_atom, std::uint64_t) {},
    };
  }

  caf::result<handshake_report> start_handshake() {
    if (config.bucket_bytes <= 0)
      return tandem_error(tandem_errc::invalid_config,
                          "refit coordinator: bucket_bytes must be > 0, got " + std::to_string(config.bucket_bytes));
    auto rp = self->make_response_promise<handshake_report>();
    self->become(handshaking());
    self->request(config.policy, config.timeout, manifest_atom_v)
        .then([this, rp](manifest_reply& m) mutable { check_manifest(std::move(m), rp); },
              [this, rp](caf::error& e) mutable { fail_handshake(rp, relay_error(e, "refit handshake: manifest from policy rank 0")); });
    return rp;
  }

  /// Sends the policy's manifest to every rollout worker and gathers their answers.
  void check_manifest(manifest_reply m, caf::typed_response_promise<handshake_report> rp) {
    struct gather {
      std::vector<std::optional<manifest_accepted>> answers;
      std::size_t left = 0;
      std::optional<caf::error> failure;
    };
    auto g = std::make_shared<gather>();
    g->answers.resize(config.rollout.size());
    g->left = config.rollout.size();
    const weight_version policy_version = m.version;
    auto finish = [this, g, rp, policy_version]() mutable {
      if (g->failure) return fail_handshake(rp, *g->failure);
      names.clear();
      std::set<std::string> unique;
      std::string versions;
      bool same = true;
      for (auto& a : g->answers) {
        names.push_back(a->worker);
        unique.insert(a->worker);
        versions += (versions.empty() ? "" : ", ") + a->worker + " " + v(a->version);
        same = same && a->version == policy_version;
        if (a->bucket_count != bucket_count || a->total_bytes != total_bytes)
          return fail_handshake(rp, tandem_error(tandem_errc::invalid_config,
                                                 "refit handshake: " + a->worker + " cuts " + std::to_string(a->bucket_count) +
                                                     " buckets of " + std::to_string(a->total_bytes) + " bytes, the policy " +
                                                     std::to_string(bucket_count) + " of " + std::to_string(total_bytes)));
      }
      if (unique.size() != names.size())
        return fail_handshake(rp, tandem_error(tandem_errc::invalid_config, "refit handshake: duplicate rollout worker names"));
      if (!same)
        return fail_handshake(rp, tandem_error(tandem_errc::invalid_config,
                                               "refit handshake: rollout workers (" + versions +
                                                   ") are not on the policy's " + v(policy_version)));
      live = policy_version;
      self->become(ready());
      rp.deliver(handshake_report{config.mode, live, names, bucket_count, config.bucket_bytes, total_bytes});
    };
    const gpu::bucket_plan plan(m.manifest, config.bucket_bytes);
    bucket_count = plan.bucket_count();
    total_bytes = plan.total_bytes();
    if (config.rollout.empty()) return finish();
    const manifest_check job{std::move(m.manifest), config.bucket_bytes};
    for (std::size_t i = 0; i < config.rollout.size(); ++i) {
      self->request(config.rollout[i], config.timeout, check_atom_v, job)
          .then(
              [g, i, finish](manifest_accepted& a) mutable {
                g->answers[i] = std::move(a);
                if (--g->left == 0) finish();
              },
              [g, i, finish](caf::error& e) mutable {
                if (!g->failure) g->failure = relay_error(e, "refit handshake: rollout worker " + std::to_string(i));
                if (--g->left == 0) finish();
              });
    }
  }

  void fail_handshake(caf::typed_response_promise<handshake_report>& rp, const caf::error& e) {
    self->become(idle());
    rp.deliver(e);
  }

  // ---- ready ------------------------------------------------------------------------------------

  behavior ready() {
    return {
        [this](handshake_atom) -> caf::result<handshake_report> { return refuse("handshake refused: already done"); },
        [this](refit_atom, weight_version version) -> caf::result<refit_report> { return start_refit(version); },
        [this](const refit_ack& a) { drop(a); },
        [](deadline_atom, std::uint64_t) {},
    };
  }

  caf::result<refit_report> start_refit(weight_version version) {
    if (version <= live)
      return tandem_error(tandem_errc::stale_version,
                          "refit coordinator: refit to " + v(version) + " refused: " + v(live) + " is live");
    refit = refit_state{};
    refit.version = version;
    refit.promise = self->make_response_promise<refit_report>();
    refit.report.mode = config.mode;
    refit.report.version = version;
    refit.report.rollout_workers = config.rollout.size();
    refitting_now = true;
    self->become(refitting());
    send_stage(config.mode == refit_mode::colocated ? refit_stage::bump : refit_stage::stream);
    return refit.promise;
  }

  // ---- refitting --------------------------------------------------------------------------------

  behavior refitting() {
    return {
        [this](handshake_atom) -> caf::result<handshake_report> { return refuse("handshake refused: already done"); },
        [this](refit_atom, weight_version version) -> caf::result<refit_report> {
          return refuse("refit to " + v(version) + " refused: the refit to " + v(refit.version) + " is in progress");
        },
        [this](const refit_ack& a) { on_message_ack(a); },
        [this](deadline_atom, std::uint64_t serial) { on_deadline(serial); },
    };
  }

  /// Starts a stage: its request goes to every rollout worker, and for a stream stage to policy
  /// rank 0 too.
  void send_stage(refit_stage kind) {
    stage = stage_state{};
    stage.serial = next_serial++;
    stage.kind = kind;
    stage.pending.assign(config.rollout.size(), true);
    stage.left = config.rollout.size();
    stage.policy_pending = kind == refit_stage::stream;
    if (stage.policy_pending) ++stage.left;
    if (stage.left == 0) return stage_done();
    const std::uint64_t serial = stage.serial;
    const stream_job job{refit.version, bucket_count, config.bucket_bytes, config.checksums};
    for (std::size_t i = 0; i < config.rollout.size(); ++i) {
      auto on_ack = [this, i, serial](refit_ack& a) { on_reply_ack(i, serial, a); };
      auto on_error = [this, i, serial](caf::error& e) { on_reply_error(i, serial, e); };
      auto& w = config.rollout[i];
      switch (kind) {
        case refit_stage::commit: self->request(w, config.timeout, commit_atom_v, refit.version).then(on_ack, on_error); break;
        case refit_stage::bump: self->request(w, config.timeout, bump_atom_v, refit.version).then(on_ack, on_error); break;
        case refit_stage::stream: self->request(w, config.timeout, stream_atom_v, job).then(on_ack, on_error); break;
      }
    }
    if (stage.policy_pending) stream_from_policy(serial, job);
    self->delayed_send(self, config.timeout, deadline_atom_v, serial);
  }

  /// Has policy rank 0 broadcast every bucket to the rollout workers over the refit group.
  void stream_from_policy(std::uint64_t serial, const stream_job& job) {
    auto awaited = [this, serial] { return serial == stage.serial && !stage.aborting && stage.policy_pending; };
    self->request(config.policy, config.timeout, stream_atom_v, job)
        .then(
            [this, awaited](stream_report& r) {
              if (!awaited()) return;
              if (r.version != refit.version) {
                fail(tandem_error(tandem_errc::stale_version, "policy rank 0 answered the stream of " + v(refit.version) +
                                                                  " with a stream of " + v(r.version)));
              }
              refit.report.buckets = bucket_count;
              refit.report.bytes = r.bytes;
              settle_policy();
            },
            [this, awaited](caf::error& e) {
              if (!awaited()) return;
              // the root's reason is the stream's: it replaces a receiver's "the root aborted the stream"
              refit.failure = relay_error(e, "policy rank 0 at stream");
              settle_policy();
            });
  }

  /// An ack that arrived as a message (through the bridge): its worker is found by name.
  void on_message_ack(const refit_ack& a) {
    for (std::size_t i = 0; i < names.size(); ++i) {
      if (names[i] == a.worker) return on_ack(i, a);
    }
    drop(a);
  }

  void on_reply_ack(std::size_t i, std::uint64_t serial, const refit_ack& a) {
    if (serial != stage.serial || stage.aborting) return drop(a);
    on_ack(i, a);
  }

  /// Counts `i`'s ack if it is the one the stage awaits; drops it otherwise. A stream ack carries
  /// the stream's outcome: an aborted stream, or checksums not matched on every bucket, fail the
  /// refit.
  void on_ack(std::size_t i, const refit_ack& a) {
    const bool awaited = !stage.aborting && i < stage.pending.size() && stage.pending[i] && a.version == refit.version &&
                         a.stage == stage.kind;
    if (!awaited) return drop(a);
    if (a.stage == refit_stage::stream) {
      check_stream(i, a);
    } else if (!a.error.empty()) {
      fail(tandem_error(tandem_errc::engine_failure, worker(i) + " at " + to_string(a.stage) + ": " + a.error));
    }
    settle(i);
  }

  void check_stream(std::size_t i, const refit_ack& a) {
    const stream_result& r = a.stream;
    const std::string at = worker(i) + " at stream: ";
    if (r.aborted || !a.error.empty()) {
      const auto code = r.checksum_mismatch ? tandem_errc::invalid_config : tandem_errc::engine_failure;
      fail(tandem_error(code, at + (a.error.empty() ? "the stream was aborted (no reason given)" : a.error)));
      return;
    }
    if (!config.checksums) return;
    if (!r.checksums || r.checksums_matched != bucket_count) {
      fail(tandem_error(tandem_errc::invalid_config,
                        at + "staged " + v(refit.version) + " with " + std::to_string(r.checksums ? r.checksums_matched : 0) +
                            " of " + std::to_string(bucket_count) + " bucket checksums matched" +
                            (r.checksums ? std::string() : " (it compared none)")));
    }
  }

  void on_reply_error(std::size_t i, std::uint64_t serial, const caf::error& e) {
    if (serial != stage.serial || stage.aborting || i >= stage.pending.size() || !stage.pending[i]) return;
    fail(relay_error(e, worker(i) + " at " + to_string(stage.kind)));
    settle(i);
  }

  void on_deadline(std::uint64_t serial) {
    if (serial != stage.serial || stage.aborting || stage.left == 0) return;
    std::string missing;
    for (std::size_t i = 0; i < stage.pending.size(); ++i) {
      if (stage.pending[i]) missing += (missing.empty() ? "" : ", ") + worker(i);
    }
    if (stage.policy_pending) missing += std::string(missing.empty() ? "" : ", ") + "policy rank 0";
    fail(tandem_error(tandem_errc::timeout, "no " + to_string(stage.kind) + " ack from " + missing + " within " +
                                                std::to_string(config.timeout.count()) + " ms"));
    stage.pending.assign(stage.pending.size(), false);
    stage.policy_pending = false;
    stage.left = 0;
    stage_done();
  }

  void settle(std::size_t i) {
    stage.pending[i] = false;
    if (--stage.left == 0) stage_done();
  }

  void settle_policy() {
    stage.policy_pending = false;
    if (--stage.left == 0) stage_done();
  }

  /// Every rollout worker answered the stage: next stage, done, or abort.
  void stage_done() {
    if (refit.failure) return abort_everywhere();
    switch (stage.kind) {
      case refit_stage::stream:
        return send_stage(refit_stage::commit);
      case refit_stage::commit:
      case refit_stage::bump:
        return finish();
    }
  }

  void fail(caf::error e) {
    if (!refit.failure) refit.failure = std::move(e);
  }

  /// An ack nobody awaits: ignored, and counted when a refit is in progress.
  void drop(const refit_ack&) {
    if (refitting_now) ++refit.report.dropped_acks;
  }

  // ---- aborting (part of refitting) --------------------------------------------------------------

  /// abort(v) to every rollout worker; once all answered, back to ready with the error.
  void abort_everywhere() {
    stage = stage_state{};
    stage.serial = next_serial++;
    stage.aborting = true;
    stage.pending.assign(config.rollout.size(), true);
    stage.left = config.rollout.size();
    if (stage.left == 0) return finish();
    const std::uint64_t serial = stage.serial;
    const weight_version old = live;
    for (std::size_t i = 0; i < config.rollout.size(); ++i) {
      auto answered = [this, i, serial](std::optional<std::string> odd) {
        if (serial != stage.serial || !stage.pending[i]) return;
        if (odd) refit.after_abort.push_back(worker(i) + " " + *odd);
        stage.pending[i] = false;
        if (--stage.left == 0) finish();
      };
      self->request(config.rollout[i], config.timeout, abort_atom_v, refit.version)
          .then(
              [answered, old](weight_version now) mutable {
                answered(now == old ? std::nullopt : std::optional<std::string>("is on " + v(now)));
              },
              [answered](caf::error& e) mutable { answered("did not answer the abort: " + error_text(e)); });
    }
  }

  /// The refit ends: success (the new version is live) or the first failure.
  void finish() {
    refitting_now = false;
    self->become(ready());
    if (!refit.failure) {
      live = refit.version;
      refit.report.checksums = config.mode == refit_mode::dedicated && config.checksums;  // every ack matched them all
      refit.promise.deliver(refit.report);
      return;
    }
    const caf::error& e = *refit.failure;
    std::string text = "refit to " + v(refit.version) + " failed: " + error_text(e) + "; ";
    if (config.mode == refit_mode::dedicated && config.in_place) {
      text += "the rollout workers received it in place: none generates until a complete refit (" + v(live) +
              " was the last whole version)";
    } else if (refit.after_abort.empty()) {
      text += v(live) + " stays live on every rollout worker";
    } else {
      text += v(live) + " stays live except: ";
      for (std::size_t i = 0; i < refit.after_abort.size(); ++i) text += (i ? "; " : "") + refit.after_abort[i];
    }
    const auto code = e.category() == caf::atom("tandem") ? static_cast<tandem_errc>(e.code()) : tandem_errc::engine_failure;
    refit.promise.deliver(tandem_error(code, std::move(text)));
  }
};

behavior refit_coordinator(refit_coordinator_actor::stateful_pointer<refit_coordinator_state> self,
                           refit_coordinator_config config) {
  self->state.self = self;
  self->state.config = std::move(config);
  return self->state.idle();
}

}  // namespace

refit_coordinator_actor spawn_refit_coordinator(caf::actor_system& sys, refit_coordinator_config config) {
  return sys.spawn(refit_coordinator, std::move(config));
}

}  // namespace tandem
