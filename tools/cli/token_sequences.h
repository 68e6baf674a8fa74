// The token sequences the parity commands (`tandem logprobs`, `tandem loss`) read: a JSON array
// of token-id arrays, checked against the vocabulary, packed end to end into one batch with each
// next token as its target.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "gpu/core/device_buffer.h"
#include "gpu/model/forward.h"

namespace tandem::cli {

/// The sequences of `file`, or nullopt with `problem` naming the file, the sequence and the token.
std::optional<std::vector<std::vector<std::int32_t>>> read_sequences(const std::string& file, std::int64_t vocab,
                                                                     std::string& problem);

/// Sequences packed end to end: positions from 0 in each, targets the next token (0 on a
/// sequence's last token, whose result nobody reads).
struct packed_sequences {
  gpu::packed_tokens packed;          // tokens, positions, offsets, targets
  std::vector<std::int32_t> offsets;  // the sequence offsets as a vector
  std::int64_t predicted = 0;         // tokens with a target: Σ max(n - 1, 0)

  gpu::packed_batch batch() const { return packed.view(); }
  const gpu::device_buffer& targets() const { return packed.targets; }
  std::int64_t size() const { return packed.tokens.numel(); }
};

/// The sequences packed in the memory of ctx's device; fails only when that memory cannot be
/// allocated or written.
gpu::result<packed_sequences> pack(const std::vector<std::vector<std::int32_t>>& sequences,
                                   const gpu::exec_context& ctx = gpu::exec_context::cpu());

}  // namespace tandem::cli
