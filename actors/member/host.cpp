// The member's host (state machine in host.hpp).
#include "actors/member/host.hpp"

#include <cstdio>
#include <memory>
#include <utility>
#include <variant>

#include <caf/all.hpp>

#include "actors/api/error_context.hpp"
#include "actors/bridge/log_line.hpp"
#include "actors/policy_worker/policy_worker.hpp"
#include "actors/remote/error_frame.hpp"
#include "actors/rollout_worker/rollout_worker.hpp"
#include "actors/runtime/engine_factory.hpp"
#include "actors/runtime/recipe_settings.hpp"
#include "actors/member/data_plane.hpp"
#include "actors/member/fault_injection.hpp"
#include "orchestration/config/resolve.h"
#include "orchestration/topology/placement.h"

namespace tandem {
namespace {

using K = control::message_kind;
using S = control::refit_stage;

struct host_state {
  static inline const char* name = "member_host";

  host_settings s;
  config::recipe_config recipe;
  std::unique_ptr<member_data_plane> plane;
  member_engines engines;
  policy_actor policy;
  rollout_actor rollout;
  bool policy_root = false;       // the refit group's root (data-parallel rank 0 of a dedicated run)
  weight_version rollout_live = 0;
  bool failed = false;
};

using host_ptr = caf::stateful_actor<host_state>*;

void send(host_ptr self, control::message m) {
  self->send(self->state.s.bridge, ctl_send_atom::value, std::string(), std::move(m));
}

void fail(host_ptr self, const std::string& why) {
  auto& st = self->state;
  if (st.failed) return;
  st.failed = true;
  send(self, control::error{static_cast<std::uint16_t>(tandem_errc::invalid_config), why, st.s.rank, 0});
  self->send(st.s.parent, hst_fail_atom::value, why);
}

void reply_error(host_ptr self, const caf::error& e, K request) {
  send(self, error_frame(e, self->state.s.rank, request));
}

control::refit_ack ack(host_ptr self, weight_version v, S stage) {
  control::refit_ack a;
  a.rank = self->state.s.rank;
  a.weight_version = v;
  a.stage = stage;
  a.ok = true;
  a.live_version = self->state.rollout_live;
  return a;
}

control::refit_ack failed_ack(host_ptr self, weight_version v, S stage, const caf::error& e) {
  control::refit_ack a = ack(self, v, stage);
  a.ok = false;
  a.error = error_text(e);
  a.error_code = e.category() == caf::atom("tandem") ? e.code() : static_cast<std::uint16_t>(tandem_errc::engine_failure);
  return a;
}

/// The staged ack of a stream that ran: its outcome (aborted or staged, the failing bucket, the
/// checksum results) on the wire.
control::refit_ack staged_ack(host_ptr self, weight_version v, const refit_ack& a) {
  control::refit_ack out = ack(self, v, S::staged);
  const stream_result& r = a.stream;
  out.aborted = r.aborted;
  out.failed_bucket = r.failed_bucket ? static_cast<std::int64_t>(*r.failed_bucket) : -1;
  out.checksums = r.checksums;
  out.checksums_matched = r.checksums_matched;
  out.checksum_mismatch = r.checksum_mismatch ? static_cast<std::int64_t>(*r.checksum_mismatch) : -1;
  if (r.aborted) {
    out.ok = false;
    out.error = a.error;
    out.error_code = static_cast<std::uint16_t>(r.checksum_mismatch ? tandem_errc::invalid_config : tandem_errc::engine_failure);
  }
  return out;
}

// ---- binding and joining ------------------------------------------------------------------------

void bind(host_ptr self) {
  auto& st = self->state;
  auto r = config::resolve_resolved_text(st.s.welcome.recipe_yaml, "the controller's recipe");
  if (!r.recipe) return fail(self, "the recipe in the welcome does not resolve: " + config::to_string(r.errors));
  st.recipe = r.recipe->config;
  const auto& w = st.s.welcome;
  const data_plane_membership m = membership_of(w, st.recipe.policy.generation.colocated);
  st.policy_root = m.refit && w.assigned.policy;
  const auto timeout = std::chrono::seconds(st.recipe.runtime.request_timeout_s);
  if (st.s.keys.has_value() != st.recipe.cluster.secure)
    return fail(self, std::string("the recipe says cluster.secure: ") + (st.recipe.cluster.secure ? "true" : "false") +
                          ", but this member " + (st.s.keys ? "holds" : "has no") + " run keys");
  const std::string host = data_plane_host(st.s.controller);
  if (!st.s.keys && !loopback_address(host))
    return fail(self, "data plane: cluster.secure is false, but the data plane would bind " + host +
                          ", which is not loopback (unset TANDEM_DATA_HOST or turn cluster.secure on)");
  auto plane = member_data_plane::bind(st.s.rank, host, m, timeout, st.s.keys, st.s.log_name);
  if (!plane) return fail(self, "data plane: " + plane.error().message());
  st.plane = std::move(plane.value());
  log_line(st.s.log_name + ": data plane bound to " + st.plane->describe() +
           (st.s.keys ? " (CurveZMQ, peers authenticated by key)" : " (no authentication: loopback only)"));
  send(self, st.plane->endpoint_message());
}

void join(host_ptr self, const control::peer_table& table) {
  auto& st = self->state;
  if (st.failed || !st.plane || st.policy || st.rollout) return;
  if (gpu::status s = st.plane->join(table); !s) return fail(self, "data plane: " + s.message());
  const auto& w = st.s.welcome;
  // The device of this member's node it owns: the placement plan's, which the controller's matches.
  const topology::placement_plan placement = topology::plan_placement(st.recipe);
  if (st.s.rank < 0 || static_cast<std::size_t>(st.s.rank) >= placement.members.size())
    return fail(self, "member rank " + std::to_string(st.s.rank) + " is outside the recipe's placement plan of " +
                          std::to_string(placement.members.size()) + " members");
  const std::int64_t device = placement.members[static_cast<std::size_t>(st.s.rank)].device;
  auto engines = make_engines(st.recipe, w.assigned.policy, w.assigned.rollout, st.plane->data_parallel(), device);
  if (!engines) return fail(self, engines.error().message());
  st.engines = std::move(engines.value());
  auto& sys = self->system();
  if (w.assigned.policy) {
    policy_worker_config c;
    c.name = "policy-" + std::to_string(w.data_parallel_rank);
    c.engine = st.engines.train;
    c.reference = st.engines.reference;
    c.loss = loss_settings(st.recipe);
    c.lr = policy_worker_config::learning_rates{st.recipe.policy.optimizer.lr, st.recipe.sft.lr};
    if (st.policy_root) c.refit_group = with_injected_faults(st.plane->refit());
    c.turns = st.engines.turns;
    st.policy = spawn_policy_worker(sys, std::move(c));
    self->link_to(st.policy);
  }
  if (w.assigned.rollout) {
    rollout_worker_config c;
    c.name = "rollout-" + std::to_string(w.rollout_rank);
    c.engine = st.engines.generate;
    c.manifest = st.engines.rollout_layout;
    c.refit_group = st.plane->refit();
    c.refit_root = 0;
    c.turns = st.engines.turns;
    st.rollout_live = st.engines.generate->weight_version();
    st.rollout = spawn_rollout_worker(sys, std::move(c));
    self->link_to(st.rollout);
  }
  log_line(st.s.log_name + ": data plane joined, engines ready (" +
           (st.recipe.runtime.engine == config::engine_kind::fake
                ? std::string("fake")
                : (st.recipe.cluster.backend == config::compute_backend::cuda ? "gemma4 on cuda:" + std::to_string(device)
                                                                              : std::string("gemma4 on the cpu")) +
                      (config::compute_dtype(st.recipe) == config::state_dtype::bfloat16 ? ", bfloat16" : ", float32")) +
           ")");
  if (st.engines.turns && st.engines.turns->startup_figures().offloads > 0) {
    const plain::device_turn_figures& f = st.engines.turns->startup_figures();
    char text[256];
    std::snprintf(text, sizeof text,
                  ": optimizer state %.3g GiB moved to pinned host memory for the first generation turn in %.3g s "
                  "(%.3g GB/s, its pinned buffers allocated then; later steps reuse them), host link %.3g GB/s",
                  static_cast<double>(f.offloaded_bytes) / (1024.0 * 1024.0 * 1024.0), f.offload_seconds, f.offload_gb_per_s(),
                  f.host_link_gb_per_s);
    log_line(st.s.log_name + text);
  }
  if (w.assigned.policy && w.data_parallel_rank == 0)
    send(self, control::manifest{0, st.engines.train->manifest()});
}

// ---- serving ------------------------------------------------------------------------------------

bool refuse_without(host_ptr self, bool present, const char* actor, K request) {
  if (present) return false;
  reply_error(self,
              tandem_error(tandem_errc::wrong_state, self->state.s.log_name + " hosts no " + actor + " (or is not set up)"),
              request);
  return true;
}

void on_generate(host_ptr self, const control::generate_request& m) {
  auto& st = self->state;
  if (refuse_without(self, static_cast<bool>(st.rollout), "rollout worker", K::generate_request)) return;
  self->request(st.rollout, caf::infinite, generate_atom_v, m.job)
      .then(
          [self](generate_result& r) {  // the sequences only: the controller kept the job
            control::generate_result out{r.version, {}};
            out.sequences.reserve(r.trajectories.size());
            for (auto& t : r.trajectories) out.sequences.push_back(std::move(static_cast<gpu::finished_sequence&>(t)));
            send(self, std::move(out));
          },
          [self](caf::error& e) { reply_error(self, e, K::generate_request); });
}

void on_check(host_ptr self, const control::manifest_check& m) {
  auto& st = self->state;
  if (refuse_without(self, static_cast<bool>(st.rollout), "rollout worker", K::manifest_check)) return;
  manifest_check job{m.entries, static_cast<std::int64_t>(m.bucket_bytes)};
  self->request(st.rollout, caf::infinite, check_atom_v, std::move(job))
      .then(
          [self](manifest_accepted& a) {
            send(self, control::manifest_result{self->state.s.rank, true, "", a.version, a.bucket_count,
                                                static_cast<std::uint64_t>(a.total_bytes)});
          },
          [self](caf::error& e) {
            send(self, control::manifest_result{self->state.s.rank, false, error_text(e), self->state.rollout_live, 0, 0});
          });
}

void on_logprobs(host_ptr self, const control::logprob_request& m) {
  auto& st = self->state;
  if (refuse_without(self, static_cast<bool>(st.policy), "policy rank", K::logprob_request)) return;
  self->request(st.policy, caf::infinite, logprobs_atom_v, m.job)
      .then([self, step = m.step](logprobs_result& r) { send(self, control::logprob_result{step, std::move(r)}); },
            [self](caf::error& e) { reply_error(self, e, K::logprob_request); });
}

void on_train(host_ptr self, const control::train_request& m) {
  auto& st = self->state;
  if (refuse_without(self, static_cast<bool>(st.policy), "policy rank", K::train_request)) return;
  self->request(st.policy, caf::infinite, train_atom_v, m.job)
      .then(
          [self, step = m.step](train_report& r) {  // the policy worker took the weights digest
            send(self, control::train_result{step, std::move(r)});
          },
          [self](caf::error& e) { reply_error(self, e, K::train_request); });
}

void on_save(host_ptr self, const control::save_request& m) {
  auto& st = self->state;
  if (refuse_without(self, static_cast<bool>(st.policy), "policy rank", K::save_request)) return;
  self->request(st.policy, caf::infinite, save_atom_v, m.job)
      .then([self, step = m.step](save_report& r) { send(self, control::save_result{step, std::move(r)}); },
            [self](caf::error& e) { reply_error(self, e, K::save_request); });
}

void on_load(host_ptr self, const control::load_request& m) {
  auto& st = self->state;
  if (refuse_without(self, static_cast<bool>(st.policy), "policy rank", K::load_request)) return;
  self->request(st.policy, caf::infinite, load_atom_v, m.job)
      .then([self, step = m.step](load_report& r) { send(self, control::load_result{step, std::move(r)}); },
            [self](caf::error& e) { reply_error(self, e, K::load_request); });
}

void on_refit_begin(host_ptr self, const control::refit_begin& m) {
  auto& st = self->state;
  const weight_version v = m.weight_version;
  if (m.transport == control::refit_transport::colocated_bump) {
    if (refuse_without(self, static_cast<bool>(st.rollout), "rollout worker", K::refit_begin)) return;
    self->request(st.rollout, caf::infinite, bump_atom_v, v)
        .then(
            [self, v](refit_ack&) {
              self->state.rollout_live = v;
              send(self, ack(self, v, S::bumped));
            },
            [self, v](caf::error& e) { send(self, failed_ack(self, v, S::bumped, e)); });
    return;
  }
  const stream_job job{v, m.bucket_count, static_cast<std::int64_t>(m.bucket_bytes), m.checksums};
  if (st.policy_root) {
    self->request(st.policy, caf::infinite, stream_atom_v, job)
        .then([self, v](stream_report&) { send(self, ack(self, v, S::sent)); },
              [self, v](caf::error& e) { send(self, failed_ack(self, v, S::sent, e)); });
    return;
  }
  if (refuse_without(self, static_cast<bool>(st.rollout), "rollout worker", K::refit_begin)) return;
  self->request(st.rollout, caf::infinite, stream_atom_v, job)
      .then([self, v](refit_ack& a) { send(self, staged_ack(self, v, a)); },
            [self, v](caf::error& e) { send(self, failed_ack(self, v, S::staged, e)); });
}

void on_refit_commit(host_ptr self, const control::refit_commit& m) {
  auto& st = self->state;
  if (refuse_without(self, static_cast<bool>(st.rollout), "rollout worker", K::refit_commit)) return;
  const weight_version v = m.weight_version;
  self->request(st.rollout, caf::infinite, commit_atom_v, v)
      .then(
          [self, v](refit_ack&) {
            self->state.rollout_live = v;
            send(self, ack(self, v, S::committed));
          },
          [self, v](caf::error& e) { send(self, failed_ack(self, v, S::committed, e)); });
}

void on_refit_abort(host_ptr self, const control::refit_abort& m) {
  auto& st = self->state;
  if (refuse_without(self, static_cast<bool>(st.rollout), "rollout worker", K::refit_abort)) return;
  const weight_version v = m.weight_version;
  self->request(st.rollout, caf::infinite, abort_atom_v, v)
      .then(
          [self, v](weight_version live) {
            self->state.rollout_live = live;
            const bool in_place = self->state.engines.generate->receive() == gpu::refit_receive::in_place &&
                                  !self->state.engines.generate->shares_weights();  // immutable once made
            log_line(self->state.s.log_name + ": refit to v" + std::to_string(v) + " aborted; " +
                     (in_place ? "received in place: no weights are live until a complete refit (v" + std::to_string(live) +
                                     " was the last whole version)"
                               : "v" + std::to_string(live) + " stays live"));
            send(self, ack(self, v, S::aborted));
          },
          [self, v](caf::error& e) { send(self, failed_ack(self, v, S::aborted, e)); });
}

void on_control(host_ptr self, const control::message& m) {
  if (self->state.failed) return;
  std::visit(
      [self](const auto& x) {
        using T = std::decay_t<decltype(x)>;
        if constexpr (std::is_same_v<T, control::peer_table>) join(self, x);
        else if constexpr (std::is_same_v<T, control::generate_request>) on_generate(self, x);
        else if constexpr (std::is_same_v<T, control::manifest_check>) on_check(self, x);
        else if constexpr (std::is_same_v<T, control::logprob_request>) on_logprobs(self, x);
        else if constexpr (std::is_same_v<T, control::train_request>) on_train(self, x);
        else if constexpr (std::is_same_v<T, control::save_request>) on_save(self, x);
        else if constexpr (std::is_same_v<T, control::load_request>) on_load(self, x);
        else if constexpr (std::is_same_v<T, control::refit_begin>) on_refit_begin(self, x);
        else if constexpr (std::is_same_v<T, control::refit_commit>) on_refit_commit(self, x);
        else if constexpr (std::is_same_v<T, control::refit_abort>) on_refit_abort(self, x);
        else log_line(self->state.s.log_name + ": the host ignored a " + std::string(control::to_string(T::kind)));
      },
      m);
}

caf::behavior host(host_ptr self, host_settings s) {
  self->state.s = std::move(s);
  bind(self);
  return {
      [self](hst_in_atom, const control::message& m) { on_control(self, m); },
  };
}

}  // namespace

bool served_by_host(control::message_kind kind) {
  switch (kind) {
    case K::peer_table:
    case K::generate_request:
    case K::manifest_check:
    case K::logprob_request:
    case K::train_request:
    case K::save_request:
    case K::load_request:
    case K::refit_begin:
    case K::refit_commit:
    case K::refit_abort:
      return true;
    default:
      return false;
  }
}

caf::actor spawn_host(caf::actor_system& sys, host_settings settings) {
  return sys.spawn<caf::detached>(host, std::move(settings));
}

}  // namespace tandem
