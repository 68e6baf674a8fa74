// The member's host: after the welcome it builds this member's data plane, engines and actors
// (policy_worker and/or rollout_worker), then serves the controller's requests with them: a
// request carries the actor's own job (plain/'s structs) and the answer goes back as it came, so
// nothing is translated (the controller's remote proxies are the other end).
//
//   binding --endpoints bound--> data_endpoint sent --peer_table--> joining (blocks: every peer of
//   every group connects) --engines built, actors spawned, manifest sent (policy rank 0)--> serving
//   any failure on the way --> error to the controller, (hst_fail, reason) to the member actor
//
//   serving:
//     generate_request  --> rollout generate  --> generate_result   | error(generate_request)
//     manifest_check    --> rollout check     --> manifest_result (ok or the first difference)
//     logprob_request   --> policy logprobs   --> logprob_result    | error(logprob_request)
//     train_request     --> policy train      --> train_result (with the weights digest) | error(train_request)
//     save_request      --> policy save       --> save_result (the directory, complete) | error(save_request)
//     load_request      --> policy load       --> load_result (the version, the weights digest) | error(load_request)
//     refit_begin       --> colocated: rollout bump -> refit_ack(bumped)
//                           policy root: policy stream -> refit_ack(sent)
//                           rollout worker: rollout stream -> refit_ack(staged)
//     refit_commit      --> rollout commit    --> refit_ack(committed)
//     refit_abort       --> rollout abort     --> refit_ack(aborted, live version)
//   A failed refit stage answers refit_ack with ok = false, the reason and its error code.
//
// The host is a detached actor: joining the groups blocks, and nothing else may wait behind it
// (the member actor answers heartbeats meanwhile). Engine calls run on the local actors'
// executors, never here.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include <caf/actor.hpp>
#include <caf/actor_system.hpp>
#include <caf/atom.hpp>

#include "actors/bridge/bridge.hpp"
#include "actors/runtime/run_keys.hpp"
#include "orchestration/control/messages.hpp"

namespace tandem {

/// (hst_in, message): a control message for the host, from the member actor.
using hst_in_atom = caf::atom_constant<caf::atom("hst_in")>;
/// (hst_fail, reason): the host could not set up; the member exits with the reason.
using hst_fail_atom = caf::atom_constant<caf::atom("hst_fail")>;

struct host_settings {
  control::welcome welcome;
  std::int32_t rank = 0;
  std::string controller;  ///< the controller's address (picks the data-plane host)
  std::string log_name;    ///< "tandem member 3"
  bridge_actor bridge;
  caf::actor parent;       ///< the member actor: receives hst_fail
  std::optional<run_keys> keys;  ///< CurveZMQ on the data plane; absent: an insecure run
};

/// Spawns the host (detached), which binds the data plane and sends data_endpoint at once.
caf::actor spawn_host(caf::actor_system& sys, host_settings settings);

/// True for the kinds the host serves (the member actor forwards them).
bool served_by_host(control::message_kind kind);

}  // namespace tandem
