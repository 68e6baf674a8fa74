// How large a frame the controller accepts from a member, for one recipe. ZeroMQ allocates a
// frame as soon as its header arrives, before the CURVE handshake has proven anything, so the
// controller's ZMQ_MAXMSGSIZE is what a stranger can make it hold per connection: it is sized
// from what the run's members can legitimately send, not from the codec's ceiling.
#pragma once

#include <cstddef>

#include "orchestration/config/recipe.h"

namespace tandem::control {

/// The largest member -> controller frame of a run of `recipe`: a generate_result holding every
/// sequence of a generation round (dynamic sampling's rounds hold batch_multiplier steps' prompts)
/// or of a validation round (grpo.val_batch_size) at max_new_tokens (a logprob_result, one count per sequence, is smaller),
/// twice over for headroom; at least 16 MiB (a manifest, metrics, error texts) and at most
/// max_frame_bytes.
std::size_t controller_frame_limit(const config::recipe_config& recipe);

}  // namespace tandem::control
