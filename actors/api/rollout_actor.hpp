// The rollout worker's interface: generation over a generate_engine, and the receiving end of a
// refit (DESIGN.md section 4).
#pragma once

#include <caf/replies_to.hpp>
#include <caf/typed_actor.hpp>

#include "actors/api/messages.hpp"
#include "actors/api/type_ids.hpp"

namespace tandem {

/// A rollout (generation) worker. Every sequence it returns was generated with exactly one weight
/// version, the live one. Refit: stream(v) (every bucket over the refit group), then commit(v); a
/// failure anywhere, or abort(v), leaves the previous version live. Colocated workers get bump(v)
/// instead.
/// While an engine call is in flight, everything but version and abort is refused (wrong_state).
using rollout_actor = caf::typed_actor<
    /// Generates every request of the job with the live weights. Errors: stale_version
    /// (job.version is not live), wrong_state (busy or a refit in progress), engine_failure.
    caf::replies_to<generate_atom, generate_job>::with<generate_result>,
    /// Checks the policy's manifest against this worker's layout and derives the bucket plan.
    /// Errors: invalid_config (the first difference), wrong_state (a refit in progress).
    caf::replies_to<check_atom, manifest_check>::with<manifest_accepted>,
    /// begin_weight_update(job.version) (dropping an unfinished older update), then receives every
    /// bucket from the refit group's root and imports it, comparing the checksums after the last
    /// when job.checksums (refit_stream.hpp). The ack carries the outcome (stream_result): staged,
    /// with the checksums matched, or aborted (begin, an import, the transport or a checksum
    /// failed, or the root aborted), the first failing bucket named, the update dropped and the
    /// previous version live. A stream refused for its content (stale version, no manifest, a plan
    /// other than the checked one) is still taken part in, discarding every bucket, so the group
    /// stays in step. Errors (refusals): stale_version (job.version not newer than the live one),
    /// wrong_state (no manifest checked, busy), invalid_config (no refit group; engine calls
    /// inline; bucket size or count not the checked plan's).
    caf::replies_to<stream_atom, stream_job>::with<refit_ack>,
    /// Makes the updated version live. Errors: stale_version, wrong_state, engine_failure (the
    /// update is dropped, the old version stays live).
    caf::replies_to<commit_atom, weight_version>::with<refit_ack>,
    /// Drops the update to this version, if one is in progress; answers the live version once
    /// the engine has dropped it (after the engine call in flight, if any).
    caf::replies_to<abort_atom, weight_version>::with<weight_version>,
    /// Colocated refit: the engine reads the trainer's weights in place, so the new version only
    /// needs announcing (begin + commit with no buckets). Errors as begin and commit.
    caf::replies_to<bump_atom, weight_version>::with<refit_ack>,
    /// The live weight version.
    caf::replies_to<version_atom>::with<weight_version>>;

}  // namespace tandem
