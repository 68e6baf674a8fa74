// The refit coordinator's interface: the manifest handshake once, then one versioned refit per
// step from the policy workers to every rollout worker (DESIGN.md section 4).
#pragma once

#include <caf/replies_to.hpp>
#include <caf/typed_actor.hpp>

#include "actors/api/messages.hpp"
#include "actors/api/type_ids.hpp"

namespace tandem {

using refit_coordinator_actor = caf::typed_actor<
    /// Fetches the manifest from policy rank 0, has every rollout worker check it, derives the
    /// bucket plan. Once: a second handshake is refused (wrong_state). Errors: invalid_config (a
    /// worker refused the manifest, duplicate worker names, workers on different versions),
    /// timeout, peer_lost.
    caf::replies_to<handshake_atom>::with<handshake_report>,
    /// Makes `version` live on every rollout worker. On failure the previous version stays live
    /// everywhere and the error names the worker and the reason. Errors: wrong_state (no handshake,
    /// a refit in progress), stale_version (not newer than the live version), engine_failure,
    /// timeout, peer_lost.
    caf::replies_to<refit_atom, weight_version>::with<refit_report>,
    /// An ack from a rollout worker that arrives as a message (remote workers, through the
    /// bridge) rather than as a reply. Dropped and counted unless it is one the refit awaits.
    caf::reacts_to<refit_ack>,
    /// A refit stage's deadline on CAF's clock; sent by the coordinator to itself. Stages are
    /// numbered; the deadline of a stage already done is ignored.
    caf::reacts_to<deadline_atom, std::uint64_t>>;

}  // namespace tandem
