// A decode step captured per batch bucket (decode_capture.h): the inputs' layout and fill, the
// step's work, and the capture-or-replay of run().
#include "gpu/engine/decode_capture.h"

#include <algorithm>
#include <cstring>
#include <string>

#include "gpu/core/memory.h"
#include "gpu/model/forward.h"
#include "gpu/ops/op_check.h"
#include "gpu/ops/sampling.h"

namespace tandem::gpu {
namespace {

constexpr int coordinate_words = 8;  // an rng_coordinates as I32 (ops::sampling_forward)

/// n rounded up to a multiple of 4 int32 (16 bytes), so every array starts aligned.
std::int64_t aligned4(std::int64_t n) { return (n + 3) / 4 * 4; }

status bad(const std::string& what) { return {status_code::invalid_argument, "decode_capture: " + what}; }

}  // namespace

std::int64_t decode_capture::bucket_of(std::int64_t rows) {
  std::int64_t b = 1;
  while (b < rows) b <<= 1;
  return b;
}

decode_capture::decode_capture(std::int64_t max_rows, std::int64_t table_width, std::int64_t head_rows)
    : max_bucket_(bucket_of(std::max<std::int64_t>(max_rows, 1))),
      table_width_(std::max<std::int64_t>(table_width, 1)),
      head_rows_(std::clamp<std::int64_t>(head_rows, 1, max_bucket_)) {}

decode_capture::~decode_capture() { clear(); }

void decode_capture::clear() {
  // A step that failed may have left a replay or its inputs' copy running: let it finish before
  // its graph and buffers go (a wait that fails leaves nothing more to do than to free them).
  if (in_flight_) (void)wait_for_device(ctx_);
  captured_.clear();
  scratch_.reset();
  inputs_ = {};
  hidden_ = {};
  logits_ = {};
  drawn_ = {};
  if (staging_) host_staging_free(ctx_.dev, staging_);
  staging_ = nullptr;
  in_flight_ = false;
}

decode_capture::layout decode_capture::layout_of(std::int64_t bucket) const {
  layout l{};
  l.tokens = 0;
  l.positions = l.tokens + aligned4(bucket);
  l.cu = l.positions + aligned4(bucket);
  l.tables[0] = l.cu + aligned4(bucket + 1);
  l.tables[1] = l.tables[0] + aligned4(bucket * table_width_);
  l.coordinates = l.tables[1] + aligned4(bucket * table_width_);
  l.total = l.coordinates + bucket * coordinate_words;
  return l;
}

status decode_capture::ensure_buffers(const exec_context& ctx, const model_config& c, dtype type) {
  if (staging_) return status::ok();
  const std::int64_t total = layout_of(max_bucket_).total;
  auto staging = host_staging_allocate(ctx.dev, total * 4);
  if (!staging) return staging.error();
  staging_ = static_cast<std::int32_t*>(*staging);
  ctx_ = ctx;
  scratch_ = std::make_unique<workspace>(ctx.dev);
  const status made = [&]() -> status {
    TANDEM_RETURN_IF_ERROR(allocate_buffers(ctx, dtype::int32, {{&inputs_, {total}}, {&drawn_, {2 * max_bucket_}}}));
    return allocate_buffers(ctx, type, {{&hidden_, {max_bucket_, c.hidden_size}}, {&logits_, {head_rows_, c.vocab_size}}});
  }();
  if (!made) clear();
  return made;
}

status decode_capture::fill(const kv_cache& cache, std::span<const decode_row> rows, std::int64_t bucket) {
  const layout l = layout_of(bucket);
  const auto n = static_cast<std::int64_t>(rows.size());
  sequences_.clear();
  for (const decode_row& r : rows) sequences_.push_back(r.sequence);
  for (std::int64_t i = 0; i < bucket; ++i) {
    const bool real = i < n;
    const decode_row* r = real ? &rows[static_cast<std::size_t>(i)] : nullptr;
    staging_[l.tokens + i] = real ? r->token : 0;
    staging_[l.positions + i] = real ? r->position : 0;
    rng_coordinates at{};
    if (real) at = r->rng;
    std::memcpy(staging_ + l.coordinates + i * coordinate_words, &at, sizeof(at));
  }
  for (std::int64_t i = 0; i <= bucket; ++i) staging_[l.cu + i] = static_cast<std::int32_t>(i);
  for (const layer_type t : {layer_type::sliding, layer_type::full}) {
    std::int32_t* table = staging_ + l.tables[static_cast<int>(t)];
    const std::span<std::int32_t> real_part(table, static_cast<std::size_t>(n * table_width_));
    TANDEM_RETURN_IF_ERROR(cache.write_block_table(t, sequences_, table_width_, real_part));
    std::fill(table + n * table_width_, table + bucket * table_width_, -1);
    for (std::int64_t i = n; i < bucket; ++i) table[i * table_width_] = cache.spare_block(t);
  }
  return status::ok();
}

status decode_capture::step_work(const exec_context& ctx, const model_config& c, const model_weights& w, kv_cache& cache,
                                 std::int64_t bucket, const ops::sampling_params& params) const {
  const layout l = layout_of(bucket);
  std::int32_t* on_device = inputs_.data<std::int32_t>();
  const auto dev = [&](std::int64_t at, std::vector<std::int64_t> shape) {
    return tensor::contiguous(on_device + at, dtype::int32, shape, inputs_.view().dev());
  };
  const auto host = [&](std::int64_t at, std::vector<std::int64_t> shape) {
    return tensor::contiguous(staging_ + at, dtype::int32, shape, device::cpu());
  };
  cached_batch batch;
  batch.sequences = sequences_;
  batch.padding = bucket - static_cast<std::int64_t>(sequences_.size());
  batch.tokens = dev(l.tokens, {bucket});
  batch.positions = dev(l.positions, {bucket});
  batch.cu_rows = dev(l.cu, {bucket + 1});
  batch.host_tokens = host(l.tokens, {bucket});
  batch.host_positions = host(l.positions, {bucket});
  batch.host_cu_rows = host(l.cu, {bucket + 1});
  for (int t = 0; t < 2; ++t) {
    batch.block_tables[t] = dev(l.tables[t], {bucket, table_width_});
    batch.host_block_tables[t] = host(l.tables[t], {bucket, table_width_});
  }
  const tensor hidden = hidden_.view().rows(0, bucket);
  TANDEM_RETURN_IF_ERROR(forward_cached(ctx, c, w, cache, batch, hidden));
  const tensor tokens = tensor::contiguous(drawn_.data<std::int32_t>(), dtype::int32, std::vector<std::int64_t>{bucket},
                                           drawn_.view().dev());
  const tensor logprobs = tensor::contiguous(drawn_.data<std::int32_t>() + max_bucket_, dtype::float32,
                                             std::vector<std::int64_t>{bucket}, drawn_.view().dev());
  const tensor coordinates = dev(l.coordinates, {bucket, coordinate_words});
  for (std::int64_t begin = 0; begin < bucket; begin += head_rows_) {
    const std::int64_t end = std::min(bucket, begin + head_rows_);
    const tensor logits = logits_.view().rows(0, end - begin);
    TANDEM_RETURN_IF_ERROR(head_logits(ctx, c, w, hidden.rows(begin, end), logits));
    TANDEM_RETURN_IF_ERROR(ops::sampling_forward(ctx, logits, params, coordinates.rows(begin, end), tokens.rows(begin, end),
                                                 logprobs.rows(begin, end)));
  }
  return status::ok();
}

result<decode_draws> decode_capture::run(const exec_context& ctx, const model_config& c, const model_weights& w, kv_cache& cache,
                                         std::span<const decode_row> rows, const ops::sampling_params& params) {
  const auto n = static_cast<std::int64_t>(rows.size());
  if (n < 1 || n > max_bucket_)
    return bad(std::to_string(n) + " rows; a captured step takes 1 to " + std::to_string(max_bucket_));
  const dtype type = w.embed_tokens.type();
  TANDEM_RETURN_IF_ERROR(ensure_buffers(ctx, c, type));
  if (in_flight_) {  // a failed step left its inputs' copy unwaited: the staging is not ours yet
    TANDEM_RETURN_IF_ERROR(wait_for_device(ctx));
    in_flight_ = false;
  }
  const std::int64_t bucket = bucket_of(n);
  TANDEM_RETURN_IF_ERROR(fill(cache, rows, bucket));
  TANDEM_RETURN_IF_ERROR(enqueue_copy_to_device(ctx, inputs_.data<std::int32_t>(), staging_, layout_of(bucket).total * 4));
  in_flight_ = true;

  exec_context own = ctx;
  own.scratch = scratch_.get();
  const key k{bucket, params.temperature, params.top_k, params.top_p};
  if (auto it = captured_.find(k); it != captured_.end()) {
    TANDEM_RETURN_IF_ERROR(it->second.replay(own));
    ++replays_;
  } else {
    // Op by op first: every plan, scratch span and library probe the capture will use is made
    // here, and this step's draws come from it.
    const std::size_t held = scratch_->capacity();
    TANDEM_RETURN_IF_ERROR(step_work(own, c, w, cache, bucket, params));
    if (scratch_->capacity() != held) captured_.clear();  // the workspace moved: earlier captures read the old one
    auto made = captured_work::capture(own, [this, &c, &w, &cache, bucket, params](const exec_context& x) {
      return step_work(x, c, w, cache, bucket, params);
    });
    if (!made) return status(made.error().code(), "decode_capture: capturing the step at " + std::to_string(bucket) +
                                                      " rows: " + made.error().message());
    captured_.emplace(k, std::move(*made));
    ++captures_;
  }
  // Tokens [n] and logprobs [n] (after max_bucket_ words): one read-back, the step's one wait.
  std::vector<std::int32_t> back(static_cast<std::size_t>(max_bucket_ + n));
  TANDEM_RETURN_IF_ERROR(copy_to_host(ctx, back.data(), drawn_.data<std::int32_t>(), (max_bucket_ + n) * 4));
  in_flight_ = false;
  decode_draws out;
  out.tokens.assign(back.begin(), back.begin() + n);
  out.logprobs.resize(static_cast<std::size_t>(n));
  std::memcpy(out.logprobs.data(), back.data() + max_bucket_, static_cast<std::size_t>(n) * 4);
  return out;
}

}  // namespace tandem::gpu
