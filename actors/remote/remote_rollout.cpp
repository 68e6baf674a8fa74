// The remote rollout proxy (remote_rollout.hpp).
#include "actors/remote/remote_rollout.hpp"

#include <optional>
#include <utility>

#include <caf/typed_event_based_actor.hpp>

#include "actors/api/error_context.hpp"
#include "actors/bridge/log_line.hpp"
#include "actors/api/trajectories.hpp"
#include "actors/remote/error_frame.hpp"

namespace tandem {
namespace {

using K = control::message_kind;
using S = control::refit_stage;

struct remote_rollout_state {
  static inline const char* name = "remote_rollout";

  remote_rollout_actor::stateful_pointer<remote_rollout_state> self = nullptr;
  remote_target target;
  weight_version live = 0;
  pending<generate_result> generate;
  generate_job generating;
  pending<manifest_accepted> check;
  pending<refit_ack> stream, commit, bump;
  pending<weight_version> abort;
  weight_version refit_version = 0;  // of the stream, commit or bump in flight

  void send(control::message m) { self->send(target.bridge, ctl_send_atom::value, target.peer, std::move(m)); }

  caf::error busy(const char* what) const {
    return tandem_error(tandem_errc::wrong_state, target.name + ": " + what + " refused: one is in flight");
  }

  void unexpected(const control::message& m) const { log_unawaited(target.name, m); }

  void on_ack(const control::refit_ack& a) {
    pending<refit_ack>* p = nullptr;
    refit_stage stage = refit_stage::stream;
    switch (a.stage) {
      case S::staged: p = &stream; stage = refit_stage::stream; break;
      case S::committed: p = &commit; stage = refit_stage::commit; break;
      case S::bumped: p = &bump; stage = refit_stage::bump; break;
      case S::aborted:
        live = a.live_version;
        if (abort) take(abort).deliver(a.live_version);
        return;
      case S::sent: break;
    }
    if (p == nullptr || !*p || a.weight_version != refit_version) return unexpected(control::message{a});
    live = a.live_version;
    auto rp = take(*p);
    if (stage == refit_stage::stream && (a.ok || a.aborted)) {  // a stream that ran: its outcome is the ack
      rp.deliver(stream_ack(a));
      return;
    }
    if (!a.ok) { rp.deliver(ack_error(a)); return; }
    rp.deliver(refit_ack{target.name, a.weight_version, stage, {}, {}});
  }

  /// The worker's stream outcome as its rollout worker acked it.
  refit_ack stream_ack(const control::refit_ack& a) const {
    refit_ack out{target.name, a.weight_version, refit_stage::stream, a.aborted ? a.error : std::string(), {}};
    stream_result& r = out.stream;
    r.aborted = a.aborted;
    if (a.failed_bucket >= 0) r.failed_bucket = static_cast<std::size_t>(a.failed_bucket);
    r.checksums = a.checksums;
    r.checksums_matched = static_cast<std::size_t>(a.checksums_matched);
    if (a.checksum_mismatch >= 0) r.checksum_mismatch = static_cast<std::size_t>(a.checksum_mismatch);
    return out;
  }

  void on_error(const control::error& e) {
    const caf::error err = error_of(e);
    switch (static_cast<K>(e.request)) {
      case K::generate_request:
        if (generate) { take(generate).deliver(err); return; }
        break;
      case K::manifest_check:
        if (check) { take(check).deliver(err); return; }
        break;
      case K::refit_begin:
        if (stream) { take(stream).deliver(err); return; }
        if (bump) { take(bump).deliver(err); return; }
        break;
      case K::refit_commit:
        if (commit) { take(commit).deliver(err); return; }
        break;
      case K::refit_abort:
        if (abort) { take(abort).deliver(err); return; }
        break;
      default:
        break;
    }
    log_line("tandem controller: " + target.name + " reported an error: " + e.text);
  }

  void on_message(const control::message& m) {
    if (const auto* x = std::get_if<control::generate_result>(&m)) {
      if (!generate) return unexpected(m);
      generate_result r{target.name, x->weight_version, {}};
      auto problem = assemble_trajectories(generating, x->sequences, target.name, r.trajectories);
      auto rp = take(generate);
      if (problem) { rp.deliver(tandem_error(tandem_errc::engine_failure, target.name + ": " + *problem)); return; }
      rp.deliver(std::move(r));
    } else if (const auto* x = std::get_if<control::manifest_result>(&m)) {
      if (!check) return unexpected(m);
      auto rp = take(check);
      if (!x->ok) { rp.deliver(tandem_error(tandem_errc::invalid_config, target.name + ": " + x->message)); return; }
      live = x->weight_version;
      rp.deliver(manifest_accepted{target.name, x->weight_version, static_cast<std::size_t>(x->bucket_count),
                                   static_cast<std::int64_t>(x->total_bytes)});
    } else if (const auto* x = std::get_if<control::refit_ack>(&m)) {
      on_ack(*x);
    } else if (const auto* x = std::get_if<control::error>(&m)) {
      on_error(*x);
    } else {
      unexpected(m);
    }
  }

  caf::result<refit_ack> refit_request(pending<refit_ack>& p, const char* what, weight_version v, control::message m) {
    if (p) return busy(what);
    p = self->make_response_promise<refit_ack>();
    refit_version = v;
    send(std::move(m));
    return *p;
  }
};

remote_rollout_actor::behavior_type remote_rollout(remote_rollout_actor::stateful_pointer<remote_rollout_state> self,
                                                   remote_target target) {
  self->state.self = self;
  self->state.target = std::move(target);
  return {
      [self](generate_atom, generate_job& job) -> caf::result<generate_result> {
        auto& st = self->state;
        if (st.generate) return st.busy("generate");
        st.generate = self->make_response_promise<generate_result>();
        st.generating = job;
        st.send(control::generate_request{std::move(job)});
        return *st.generate;
      },
      [self](check_atom, const manifest_check& job) -> caf::result<manifest_accepted> {
        auto& st = self->state;
        if (st.check) return st.busy("check");
        st.check = self->make_response_promise<manifest_accepted>();
        st.send(control::manifest_check{static_cast<std::uint64_t>(job.bucket_bytes), job.manifest});
        return *st.check;
      },
      [self](stream_atom, const stream_job& job) -> caf::result<refit_ack> {
        control::refit_begin m;
        m.weight_version = job.version;
        m.bucket_count = static_cast<std::uint32_t>(job.bucket_count);
        m.bucket_bytes = static_cast<std::uint64_t>(job.bucket_bytes);
        m.transport = control::refit_transport::broadcast;
        m.root_rank = -1;  // the worker knows its refit group's root from the peer table
        m.checksums = job.checksums;
        return self->state.refit_request(self->state.stream, "stream", job.version, m);
      },
      [self](commit_atom, weight_version v) -> caf::result<refit_ack> {
        return self->state.refit_request(self->state.commit, "commit", v, control::refit_commit{v});
      },
      [self](abort_atom, weight_version v) -> caf::result<weight_version> {
        auto& st = self->state;
        if (st.abort) return st.busy("abort");
        st.abort = self->make_response_promise<weight_version>();
        st.send(control::refit_abort{v});
        return *st.abort;
      },
      [self](bump_atom, weight_version v) -> caf::result<refit_ack> {
        control::refit_begin m;
        m.weight_version = v;
        m.transport = control::refit_transport::colocated_bump;
        m.root_rank = self->state.target.rank;
        return self->state.refit_request(self->state.bump, "bump", v, m);
      },
      [self](version_atom) { return self->state.live; },
      [self](rmt_in_atom, const control::message& m) { self->state.on_message(m); },
  };
}

}  // namespace

remote_rollout_actor spawn_remote_rollout(caf::actor_system& sys, remote_target target) {
  return sys.spawn(remote_rollout, std::move(target));
}

}  // namespace tandem
