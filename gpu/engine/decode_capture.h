// A decode step captured once per batch bucket and replayed (captured_work.h): on CUDA the step's
// hundreds of kernels and library calls become one graph launch, so the host no longer bounds
// the step. Rows are padded to the bucket (a power of two): a padding row is a sequence of one
// token at position 0 whose keys and values go to the cache's spare blocks. Everything a replay
// reads lives at fixed addresses: the rows, block tables of a fixed width and the sampler's
// coordinates in one device buffer sent before each replay, the hidden states and sampled tokens
// in buffers sized for the largest bucket, the logits in one of head_rows rows (the head runs
// and samples that many rows at a time, as the engine's uncaptured steps do).
//
//   bucket B, parameters P not captured --launch()--> the step at B rows run op by op (plans,
//     scratch and library probes made; its results are the step's), then captured --> captured
//   captured --launch()--> inputs sent, replayed, tokens' copy to the host enqueued --> captured
//   any --clear()--> none captured (the weights' or the cache's storage moved)
//
// Steps in flight (launch() enqueues, collect() waits for the oldest):
//
//   idle --launch--> one --launch--> two (the most) --collect--> one --collect--> idle
//
// A step may take its tokens from the one launched before it (`from_last`): row i's token is what
// that step drew for one of its rows, copied on the device, so it can be enqueued before the host
// has read those draws. Inputs and read-backs alternate between two host staging buffers, so the
// host fills one step's while the device still reads the other's.
//
// A step run op by op that grows the shared workspace moves it: the other buckets' captures are
// dropped then (they read the old one) and made again when next used.
//
// What a replay trusts: the rows and tables come from the engine's own cache bookkeeping, so the
// paged ops' checks of them run at capture only. Not thread-safe; one engine's stream.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <span>
#include <tuple>
#include <vector>

#include "gpu/core/captured_work.h"
#include "gpu/core/device_buffer.h"
#include "gpu/core/exec_context.h"
#include "gpu/core/philox.h"
#include "gpu/core/status.h"
#include "gpu/core/stream_marker.h"
#include "gpu/model/config.h"
#include "gpu/model/kv_cache.h"
#include "gpu/model/model_weights.h"
#include "gpu/ops/logprobs.h"

namespace tandem::gpu {

/// One decoding sequence of a step: its last token at `position` (reserved in the cache), and
/// the coordinates of the token it draws.
struct decode_row {
  kv_cache::sequence_id sequence = 0;
  std::int32_t token = 0;
  std::int32_t position = 0;
  rng_coordinates rng;
};

/// Each row's drawn token and its logprob, in row order.
struct decode_draws {
  std::vector<std::int32_t> tokens;
  std::vector<float> logprobs;
};

class decode_capture {
 public:
  /// The smallest power of two >= rows (rows >= 1).
  static std::int64_t bucket_of(std::int64_t rows);

  /// Steps of at most `max_rows` rows whose sequences map at most `table_width` blocks of a type;
  /// the head's logits made and sampled `head_rows` rows at a time (the buffer holds that many).
  decode_capture(std::int64_t max_rows, std::int64_t table_width, std::int64_t head_rows);
  decode_capture(const decode_capture&) = delete;
  decode_capture& operator=(const decode_capture&) = delete;
  ~decode_capture();

  /// Enqueues one decode step of `rows` (1 to max_rows; every sequence's last token reserved in
  /// `cache`), all drawn with `params`: forward_cached, the head and sampling_forward, as the
  /// engine's step runs them; its draws come from collect(), in launch order. At most two steps
  /// are in flight (invalid_argument beyond). from_last, when given (one index a row): row i's
  /// token is the one drawn for row from_last[i] of the step launched last (rows[i].token is not
  /// read); on CUDA such a step must replay a capture (has_capture; invalid_argument otherwise): a
  /// step run op by op checks its tokens on the host. invalid_argument naming the row or sequence
  /// that does not fit; the ops' or the device's error otherwise (the cache's slots of these rows
  /// are then unspecified).
  status launch(const exec_context& ctx, const model_config& c, const model_weights& w, kv_cache& cache,
                std::span<const decode_row> rows, const ops::sampling_params& params,
                std::span<const std::int64_t> from_last = {});
  /// Waits for the oldest step in flight and returns its draws; invalid_argument when none is.
  result<decode_draws> collect();
  std::int64_t in_flight() const { return static_cast<std::int64_t>(pending_.size()); }
  /// Whether a step of `rows` rows drawn with `params` replays a capture (launch() runs it op by op,
  /// then captures it, otherwise).
  bool has_capture(std::int64_t rows, const ops::sampling_params& params) const;

  /// Drops every capture and the buffers, once the steps in flight are done.
  void clear();

  /// Captures made and replays run since creation.
  std::int64_t captures() const { return captures_; }
  std::int64_t replays() const { return replays_; }

 private:
  /// Int32 offsets of a bucket's inputs in the staging and device buffers.
  struct layout {
    std::int64_t tokens, positions, cu, tables[2], coordinates, total;
  };
  layout layout_of(std::int64_t bucket) const;
  status ensure_buffers(const exec_context& ctx, const model_config& c, dtype type);
  /// Fills staging_[slot] with the rows (from_last: tokens left to the device copies, but on the
  /// CPU, whose drawn tokens are host memory, copied there too).
  status fill(const kv_cache& cache, std::span<const decode_row> rows, std::int64_t bucket, int slot,
              std::span<const std::int64_t> from_last);
  /// The step at `bucket` rows over the buffers as fill() left them (the host mirror: mirror_):
  /// what is captured, and what the CPU runs again on each replay (so it reads the rows from the
  /// buffers, never from a call).
  status step_work(const exec_context& ctx, const model_config& c, const model_weights& w, kv_cache& cache, std::int64_t bucket,
                   const ops::sampling_params& params) const;

  using key = std::tuple<std::int64_t, double, std::int32_t, double>;  // bucket, temperature, top_k, top_p
  struct pending {                                  // a launched step, not yet collected
    int slot;                                       // its staging and read-back buffers
    std::int64_t rows;
    stream_marker done;                             // after its read-back's copy
  };
  std::int64_t max_bucket_, table_width_, head_rows_;
  std::map<key, captured_work> captured_;
  std::unique_ptr<workspace> scratch_;
  device_buffer inputs_, hidden_, drawn_;  // for max_bucket_ rows
  device_buffer logits_;                   // for head_rows_ rows
  // Host staging (pinned on CUDA), two of each: a step's inputs (the host mirror step_work reads)
  // and its read-back, tokens [max_bucket_] then logprobs [max_bucket_].
  std::int32_t* staging_[2] = {nullptr, nullptr};
  std::int32_t* back_[2] = {nullptr, nullptr};
  int slot_ = 0;                                    // the next launch's
  std::int32_t* mirror_ = nullptr;                  // staging of the step being enqueued
  exec_context ctx_;                                // the buffers' device and stream
  std::deque<pending> pending_;
  bool unsettled_ = false;                          // a launch failed midway: wait for the device first
  std::int64_t last_rows_ = 0;                      // rows of the step launched last (0: none since clear)
  std::vector<kv_cache::sequence_id> sequences_;    // the step's, for forward_cached's checks
  std::int64_t captures_ = 0, replays_ = 0;
};

}  // namespace tandem::gpu
