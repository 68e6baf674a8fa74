// Conversions between the actors' message structs (actors/api/messages.hpp, process-local) and the
// control-plane messages (orchestration/control/messages.hpp, the wire). The controller's remote
// proxies and the worker's host use the same pair of functions for each request and reply, so
// the two ends cannot drift apart.
//
//   controller: driver/coordinator --job--> remote proxy --to_wire--> frame --> worker host
//   worker:     host --from_wire--> job --> local policy/rollout worker --reply--> host
//               --to_wire--> frame --> remote proxy --from_wire (with the pending job)--> reply
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <caf/error.hpp>

#include "actors/api/messages.hpp"
#include "orchestration/control/messages.hpp"

namespace tandem::wire {

// ---- generation ---------------------------------------------------------------------------------

/// The request of `job`: every request must share one sampling, length and stop-token setting
/// (the driver's always do); else `problem` names the first that differs and the result is empty.
control::generate_request to_wire(const generate_job& job, std::string& problem);
generate_job from_wire(const control::generate_request& m);
control::generate_result to_wire(const generate_result& r, std::uint64_t step, std::uint32_t round);
/// The trajectories of `m` for `job` (prompt tokens and indices come from the job); `problem`
/// names a sequence the job did not ask for.
generate_result from_wire(const control::generate_result& m, const generate_job& job, const std::string& worker,
                          std::string& problem);

// ---- logprobs and training ----------------------------------------------------------------------

control::logprob_request to_wire(const logprobs_job& job, std::uint64_t step);
logprobs_job from_wire(const control::logprob_request& m);
control::logprob_result to_wire(const logprobs_result& r, std::uint64_t step);
logprobs_result from_wire(const control::logprob_result& m, const std::string& worker);

/// The loss settings are not sent: both ends derive them from the recipe (runtime/recipe_settings).
control::train_request to_wire(const train_job& job, std::uint64_t step);
train_job from_wire(const control::train_request& m, const gpu::ops::pg_loss_settings& loss);
control::train_result to_wire(const train_report& r, std::uint64_t step);
train_report from_wire(const control::train_result& m, const std::string& worker);

// ---- refit --------------------------------------------------------------------------------------

std::vector<control::manifest_entry> to_wire(const gpu::weight_manifest& manifest);
/// `problem` names the first entry with a dtype this build does not know.
gpu::weight_manifest from_wire(const std::vector<control::manifest_entry>& entries, std::string& problem);

// ---- errors -------------------------------------------------------------------------------------

/// The error frame of a failed request of kind `request` on worker `rank`.
control::error to_wire(const caf::error& e, std::int32_t rank, control::message_kind request);
/// The tandem error of an error frame (unknown codes become engine_failure).
caf::error from_wire(const control::error& m);

}  // namespace tandem::wire
