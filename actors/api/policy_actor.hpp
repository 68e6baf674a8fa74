// The policy worker's interface: one data-parallel training rank over a train_engine.
#pragma once

#include <caf/replies_to.hpp>
#include <caf/typed_actor.hpp>

#include "actors/api/messages.hpp"
#include "actors/api/type_ids.hpp"

namespace tandem {

/// A policy (training) rank. While an engine call is in flight, logprobs, train and stream are
/// refused with wrong_state; manifest and version are always answered.
using policy_actor = caf::typed_actor<
    /// Per-token logprobs of the job's sequences under the current weights (lp_prev).
    /// Errors: wrong_state (busy), engine_failure.
    caf::replies_to<logprobs_atom, logprobs_job>::with<logprobs_result>,
    /// Every micro-batch's loss and backward, then the optimizer step; the weight version becomes
    /// job.version + 1. Errors: stale_version (job.version is not current), wrong_state (busy),
    /// engine_failure (gradients dropped, weights and version unchanged).
    caf::replies_to<train_atom, train_job>::with<train_report>,
    /// The refit manifest (Hugging Face names in slab order) and the current version.
    caf::replies_to<manifest_atom>::with<manifest_reply>,
    /// Broadcasts every bucket of the current weights to the refit group as its root
    /// (refit_stream.hpp), the only way weight bytes leave a policy rank. A stream refused for its
    /// content (stale version, bucket count) still sends the refused opening, so the receivers
    /// stop. Errors: stale_version (job.version is not current), wrong_state (busy),
    /// invalid_config (no refit group; engine calls inline; bucket_bytes <= 0; bucket_count
    /// differs from the plan's), engine_failure (an export or the transport failed; after a failed
    /// export the closing told the receivers).
    caf::replies_to<stream_atom, stream_job>::with<stream_report>,
    /// Saves the current weights (and optimizer state) into job.directory through the engine's
    /// save() (plain/saving.h), replacing what is there; the answer names it, complete.
    /// Errors: stale_version (job.version is not current), wrong_state (busy), engine_failure
    /// (the save failed, naming the file and the reason; nothing partial is left at the name).
    caf::replies_to<save_atom, save_job>::with<save_report>,
    /// Loads a checkpoint an engine_state save wrote (a resumed run) through the engine's load(),
    /// and makes job.version the rank's version; the step batch held is dropped, and a damaged
    /// rank is whole again. Errors: wrong_state (busy), engine_failure (the load failed, naming
    /// the file and the reason; the engine is unchanged).
    caf::replies_to<load_atom, load_job>::with<load_report>,
    /// The current weight version.
    caf::replies_to<version_atom>::with<weight_version>>;

}  // namespace tandem
