// The paged KV cache of one model: K and V of every non-shared layer in blocks of B positions,
// one pool of blocks per attention type (sliding, full), and per sequence one block table per type
// mapping its logical block i (positions [i·B, (i+1)·B)) to a physical block of that type's pool.
// KV-shared layers have no cache: they read their store layer's. Blocks are reference-counted, so
// the n generations of a GRPO group share their prompt's blocks (fork); a sliding-type table frees
// the blocks that fell out of the window (trim_window), a full-type table keeps every block.
//
// A sequence's life:
//
//   add_sequence() --> empty --reserve(n)--> positions [length, length + n) mapped, length += n
//        ^                 \--fork()--> a child sharing every full block, with its own copy of
//        |                              the last partial one
//        +-- release(): every block's reference dropped; a block with none returns to its pool
//
// Each pool has one spare block beyond its blocks, never handed out: rows that only pad a batch to
// a fixed size (a captured decode step's) write their keys and values there.
//
// reserve() takes every block it needs or none (out_of_memory when a pool runs dry, so the caller
// preempts a sequence and tries again); nothing else allocates. The bookkeeping (pools, tables,
// reference counts) lives on the host; the K and V storage on the device of the context the cache
// was created with, where fork's copy of a partial block runs ordered on that context's stream.
// Not thread-safe.
#pragma once

#include <cstdint>
#include <map>
#include <span>
#include <vector>

#include "gpu/core/device_buffer.h"
#include "gpu/core/exec_context.h"
#include "gpu/core/host_buffer.h"
#include "gpu/core/status.h"
#include "gpu/model/config.h"

namespace tandem::gpu {

struct kv_cache_options {
  std::int64_t block_size = 16;      ///< positions per block, > 0
  std::int64_t full_blocks = 0;      ///< blocks in the full-attention pool (>= 1 when the model has full layers)
  std::int64_t sliding_blocks = 0;   ///< blocks in the sliding pool (>= 1 when it has sliding layers)
};

/// Pools sized to `bytes` in total: both pools get the same share of positions (a sequence needs
/// as many full blocks as positions / B, and at most window / B + 2 sliding ones), so the split
/// follows the bytes per block of each type. The storage holds one spare block more per pool.
kv_cache_options kv_cache_options_for(const model_config& c, dtype type, std::int64_t block_size, std::int64_t bytes);

/// Bytes of one block of each pool together (K and V of every non-shared layer for `block_size`
/// positions): the unit kv_cache_options_for divides `bytes` by. 0 for a model without layers.
std::int64_t kv_block_bytes(const model_config& c, dtype type, std::int64_t block_size);

class kv_cache {
 public:
  using sequence_id = std::int64_t;

  /// Storage for every non-shared layer of `c` in `type` on ctx.dev (the model's compute dtype:
  /// float32, bfloat16 on CUDA, float64 for references), zero-filled. invalid_argument naming the
  /// option that does not fit the model; out_of_memory naming the bytes and the device.
  static result<kv_cache> create(const exec_context& ctx, const model_config& c, dtype type, const kv_cache_options& options);

  sequence_id add_sequence();
  /// A new sequence holding `parent`'s positions: full blocks shared, the last partial block of
  /// each type copied into a block of its own (so both may append). out_of_memory leaves nothing;
  /// so does a failed copy on the device (its status returned: the device needs checking).
  result<sequence_id> fork(sequence_id parent);
  /// Maps positions [length, length + n) and advances the length; all or nothing.
  status reserve(sequence_id s, std::int64_t n);
  /// Blocks of type t that reserve(s, n) would take now (a sequence not in the cache counts from
  /// length 0), and that fork(s) would take (1 per type when the last block is partial).
  std::int64_t blocks_to_reserve(sequence_id s, std::int64_t n, layer_type t) const;
  std::int64_t blocks_to_fork(sequence_id s, layer_type t) const;
  /// The most blocks of type t one sequence of `length` positions ever holds at once when it is
  /// computed in chunks of at most `chunk` rows and trimmed after each (all of them for full
  /// layers; the window, the chunk and two partial blocks for sliding ones).
  std::int64_t peak_blocks(layer_type t, std::int64_t length, std::int64_t chunk) const;
  std::int64_t pool_blocks(layer_type t) const { return pool_of(t).blocks; }

  /// Frees the sliding blocks no later row can see (every position < length - window + 1).
  void trim_window(sequence_id s);
  /// Drops the sequence and its references.
  void release(sequence_id s);

  std::int64_t length(sequence_id s) const;
  bool has(sequence_id s) const { return sequences_.count(s) != 0; }
  std::int64_t block_size() const { return options_.block_size; }
  /// Free blocks of a pool, and blocks held (by any sequence) from it.
  std::int64_t free_blocks(layer_type t) const;
  std::int64_t used_blocks(layer_type t) const;
  /// Blocks of type t mapped in s's table (trimmed ones excluded).
  std::int64_t mapped_blocks(sequence_id s, layer_type t) const;

  /// The spare block of type t (the pool's block count: the last row of k() and v()), -1 when the
  /// model has no layers of type t.
  std::int32_t spare_block(layer_type t) const;

  /// The cache of non-shared layer l: [blocks of its type + 1 spare, B, g_l, d_l] in the cache's
  /// dtype, on its device.
  tensor k(int layer) const;
  tensor v(int layer) const;

  /// The block tables of `sequences` for type t: I32 [S, M] with M the longest table, -1 where
  /// nothing is mapped.
  host_buffer block_table(layer_type t, const std::vector<sequence_id>& sequences) const;
  /// The same into `out` [sequences.size(), width] (-1 past each table): invalid_argument when a
  /// sequence is unknown or maps more than `width` blocks, or `out` has another size.
  status write_block_table(layer_type t, std::span<const sequence_id> sequences, std::int64_t width,
                           std::span<std::int32_t> out) const;

 private:
  struct pool {
    std::int64_t blocks = 0;
    std::vector<std::int32_t> free;    // a stack of free block ids
    std::vector<std::int32_t> refs;    // per block
  };
  struct sequence {
    std::int64_t length = 0;
    std::vector<std::int32_t> table[2];  // by layer_type; -1 once trimmed
  };

  pool& pool_of(layer_type t) { return pools_[static_cast<int>(t)]; }
  const pool& pool_of(layer_type t) const { return pools_[static_cast<int>(t)]; }
  bool has_type(layer_type t) const { return pool_of(t).blocks > 0; }
  void drop(layer_type t, std::int32_t block);
  status copy_block(layer_type t, std::int32_t from, std::int32_t to);

  exec_context ctx_;  // the device and stream of the storage (no workspace)
  model_config config_;
  kv_cache_options options_;
  pool pools_[2];
  std::map<int, device_buffer> k_, v_;  // by non-shared layer
  std::map<sequence_id, sequence> sequences_;
  sequence_id next_ = 0;
};

}  // namespace tandem::gpu
