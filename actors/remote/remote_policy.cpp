// The remote policy proxy (remote_policy.hpp).
#include "actors/remote/remote_policy.hpp"

#include <optional>
#include <utility>

#include <caf/typed_event_based_actor.hpp>

#include "actors/api/error_context.hpp"
#include "actors/bridge/log_line.hpp"
#include "actors/remote/error_frame.hpp"

namespace tandem {
namespace {

struct remote_policy_state {
  static inline const char* name = "remote_policy";

  remote_policy_actor::stateful_pointer<remote_policy_state> self = nullptr;
  remote_target target;
  weight_version version = 0;
  std::optional<manifest_reply> manifest;
  std::int64_t total_bytes = 0;  // of the manifest: every bucket of a stream
  std::vector<caf::typed_response_promise<manifest_reply>> manifest_waiters;
  pending<logprobs_result> logprobs;
  pending<train_report> train;
  pending<stream_report> stream;
  pending<save_report> save;
  pending<load_report> load;
  stream_job streaming;
  std::uint64_t requests = 0;  // numbers the logprob and train requests (their step field)

  void send(control::message m) { self->send(target.bridge, ctl_send_atom::value, target.peer, std::move(m)); }

  caf::error busy(const char* what) const {
    return tandem_error(tandem_errc::wrong_state, target.name + ": " + what + " refused: one is in flight");
  }

  void unexpected(const control::message& m) const { log_unawaited(target.name, m); }

  void on_message(const control::message& m) {
    if (const auto* x = std::get_if<control::manifest>(&m)) {
      version = x->weight_version;
      total_bytes = 0;
      for (const auto& e : x->entries) total_bytes += e.bytes();
      manifest = manifest_reply{target.name, x->weight_version, x->entries};
      for (auto& w : manifest_waiters) w.deliver(*manifest);
      manifest_waiters.clear();
    } else if (const auto* x = std::get_if<control::logprob_result>(&m)) {
      if (!logprobs) return unexpected(m);
      logprobs_result r = x->result;
      r.worker = target.name;  // the name the controller knows the rank by
      take(logprobs).deliver(std::move(r));
    } else if (const auto* x = std::get_if<control::train_result>(&m)) {
      if (!train) return unexpected(m);
      train_report r = x->report;
      r.worker = target.name;
      version = r.version;
      take(train).deliver(std::move(r));
    } else if (const auto* x = std::get_if<control::save_result>(&m)) {
      if (!save) return unexpected(m);
      save_report r = x->report;
      r.worker = target.name;
      take(save).deliver(std::move(r));
    } else if (const auto* x = std::get_if<control::load_result>(&m)) {
      if (!load) return unexpected(m);
      load_report r = x->report;
      r.worker = target.name;
      version = r.version;
      take(load).deliver(std::move(r));
    } else if (const auto* x = std::get_if<control::refit_ack>(&m)) {
      if (!stream || x->weight_version != streaming.version) return unexpected(m);
      if (!x->ok) {
        take(stream).deliver(ack_error(*x));
        return;
      }
      take(stream).deliver(stream_report{target.name, x->weight_version, streaming.bucket_count, total_bytes});
    } else if (const auto* x = std::get_if<control::error>(&m)) {
      const auto request = static_cast<control::message_kind>(x->request);
      const caf::error err = error_of(*x);
      if (request == control::message_kind::logprob_request && logprobs) return void(take(logprobs).deliver(err));
      if (request == control::message_kind::train_request && train) return void(take(train).deliver(err));
      if (request == control::message_kind::refit_begin && stream) return void(take(stream).deliver(err));
      if (request == control::message_kind::save_request && save) return void(take(save).deliver(err));
      if (request == control::message_kind::load_request && load) return void(take(load).deliver(err));
      log_line("tandem controller: " + target.name + " reported an error: " + x->text);
    } else {
      unexpected(m);
    }
  }
};

remote_policy_actor::behavior_type remote_policy(remote_policy_actor::stateful_pointer<remote_policy_state> self,
                                                 remote_target target) {
  self->state.self = self;
  self->state.target = std::move(target);
  return {
      [self](logprobs_atom, logprobs_job& job) -> caf::result<logprobs_result> {
        auto& st = self->state;
        if (st.logprobs) return st.busy("logprobs");
        st.logprobs = self->make_response_promise<logprobs_result>();
        st.send(control::logprob_request{++st.requests, std::move(job)});
        return *st.logprobs;
      },
      [self](train_atom, train_job& job) -> caf::result<train_report> {
        auto& st = self->state;
        if (st.train) return st.busy("train");
        st.train = self->make_response_promise<train_report>();
        st.send(control::train_request{++st.requests, std::move(job)});
        return *st.train;
      },
      [self](manifest_atom) -> caf::result<manifest_reply> {
        auto& st = self->state;
        if (st.manifest) return *st.manifest;
        st.manifest_waiters.push_back(self->make_response_promise<manifest_reply>());
        return st.manifest_waiters.back();
      },
      [self](stream_atom, const stream_job& job) -> caf::result<stream_report> {
        auto& st = self->state;
        if (st.stream) return st.busy("stream");
        st.stream = self->make_response_promise<stream_report>();
        st.streaming = job;
        control::refit_begin m;
        m.weight_version = job.version;
        m.bucket_count = static_cast<std::uint32_t>(job.bucket_count);
        m.bucket_bytes = static_cast<std::uint64_t>(job.bucket_bytes);
        m.transport = control::refit_transport::broadcast;
        m.root_rank = st.target.rank;
        m.checksums = job.checksums;
        st.send(m);
        return *st.stream;
      },
      [self](save_atom, save_job& job) -> caf::result<save_report> {
        auto& st = self->state;
        if (st.save) return st.busy("save");
        st.save = self->make_response_promise<save_report>();
        st.send(control::save_request{++st.requests, std::move(job)});
        return *st.save;
      },
      [self](load_atom, load_job& job) -> caf::result<load_report> {
        auto& st = self->state;
        if (st.load) return st.busy("load");
        st.load = self->make_response_promise<load_report>();
        st.send(control::load_request{++st.requests, std::move(job)});
        return *st.load;
      },
      [self](version_atom) { return self->state.version; },
      [self](rmt_in_atom, const control::message& m) { self->state.on_message(m); },
  };
}

}  // namespace

remote_policy_actor spawn_remote_policy(caf::actor_system& sys, remote_target target) {
  return sys.spawn(remote_policy, std::move(target));
}

}  // namespace tandem
