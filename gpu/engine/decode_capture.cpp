// A decode step captured per batch bucket (decode_capture.h): the inputs' layout and fill, the
// step's work, and the capture-or-replay of launch() and collect().
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
  // Steps in flight, or a launch that failed midway, may have left a replay or a copy running: let
  // them finish before their graphs and buffers go (a wait that fails leaves nothing more to do
  // than to free them).
  if (!pending_.empty() || unsettled_) (void)wait_for_device(ctx_);
  pending_.clear();
  captured_.clear();
  scratch_.reset();
  inputs_ = {};
  hidden_ = {};
  logits_ = {};
  drawn_ = {};
  for (std::int32_t*& p : staging_) {
    if (p) host_staging_free(ctx_.dev, p);
    p = nullptr;
  }
  for (std::int32_t*& p : back_) {
    if (p) host_staging_free(ctx_.dev, p);
    p = nullptr;
  }
  mirror_ = nullptr;
  slot_ = 0;
  unsettled_ = false;
  last_rows_ = 0;
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
  if (staging_[0]) return status::ok();
  const std::int64_t total = layout_of(max_bucket_).total;
  ctx_ = ctx;
  const status made = [&]() -> status {
    for (int i = 0; i < 2; ++i) {
      auto staging = host_staging_allocate(ctx.dev, total * 4);
      if (!staging) return staging.error();
      staging_[i] = static_cast<std::int32_t*>(*staging);
      auto back = host_staging_allocate(ctx.dev, 2 * max_bucket_ * 4);
      if (!back) return back.error();
      back_[i] = static_cast<std::int32_t*>(*back);
    }
    scratch_ = std::make_unique<workspace>(ctx.dev);
    TANDEM_RETURN_IF_ERROR(allocate_buffers(ctx, dtype::int32, {{&inputs_, {total}}, {&drawn_, {2 * max_bucket_}}}));
    return allocate_buffers(ctx, type, {{&hidden_, {max_bucket_, c.hidden_size}}, {&logits_, {head_rows_, c.vocab_size}}});
  }();
  if (!made) clear();
  return made;
}

status decode_capture::fill(const kv_cache& cache, std::span<const decode_row> rows, std::int64_t bucket, int slot,
                            std::span<const std::int64_t> from_last) {
  const layout l = layout_of(bucket);
  const auto n = static_cast<std::int64_t>(rows.size());
  std::int32_t* const staging = staging_[slot];
  // From the last step's draws: on the CPU its work is done and its tokens are host memory.
  const bool taken = !from_last.empty();
  const std::int32_t* const drawn_on_host = taken && ctx_.dev.is_cpu() ? drawn_.data<std::int32_t>() : nullptr;
  sequences_.clear();
  for (const decode_row& r : rows) sequences_.push_back(r.sequence);
  for (std::int64_t i = 0; i < bucket; ++i) {
    const bool real = i < n;
    const decode_row* r = real ? &rows[static_cast<std::size_t>(i)] : nullptr;
    staging[l.tokens + i] = !real            ? 0
                            : drawn_on_host  ? drawn_on_host[from_last[static_cast<std::size_t>(i)]]
                            : taken          ? 0
                                             : r->token;
    staging[l.positions + i] = real ? r->position : 0;
    rng_coordinates at{};
    if (real) at = r->rng;
    std::memcpy(staging + l.coordinates + i * coordinate_words, &at, sizeof(at));
  }
  for (std::int64_t i = 0; i <= bucket; ++i) staging[l.cu + i] = static_cast<std::int32_t>(i);
  for (const layer_type t : {layer_type::sliding, layer_type::full}) {
    std::int32_t* table = staging + l.tables[static_cast<int>(t)];
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
    return tensor::contiguous(mirror_ + at, dtype::int32, shape, device::cpu());
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

bool decode_capture::has_capture(std::int64_t rows, const ops::sampling_params& params) const {
  return captured_.count(key{bucket_of(std::max<std::int64_t>(rows, 1)), params.temperature, params.top_k, params.top_p}) > 0;
}

status decode_capture::launch(const exec_context& ctx, const model_config& c, const model_weights& w, kv_cache& cache,
                              std::span<const decode_row> rows, const ops::sampling_params& params,
                              std::span<const std::int64_t> from_last) {
  const auto n = static_cast<std::int64_t>(rows.size());
  if (n < 1 || n > max_bucket_)
    return bad(std::to_string(n) + " rows; a captured step takes 1 to " + std::to_string(max_bucket_));
  if (pending_.size() >= 2) return {status_code::invalid_argument, "decode_capture: two steps are in flight; collect one first"};
  const bool taken = !from_last.empty();
  if (taken) {
    if (static_cast<std::int64_t>(from_last.size()) != n)
      return bad(std::to_string(from_last.size()) + " token sources for " + std::to_string(n) + " rows");
    for (std::size_t i = 0; i < from_last.size(); ++i)
      if (from_last[i] < 0 || from_last[i] >= last_rows_)
        return bad("row " + std::to_string(i) + " takes its token from row " + std::to_string(from_last[i]) +
                   " of the last step, which drew " + std::to_string(last_rows_));
  }
  const dtype type = w.embed_tokens.type();
  TANDEM_RETURN_IF_ERROR(ensure_buffers(ctx, c, type));
  const std::int64_t bucket = bucket_of(n);
  const key k{bucket, params.temperature, params.top_k, params.top_p};
  const auto it = captured_.find(k);
  if (taken && it == captured_.end() && !ctx.dev.is_cpu())
    return {status_code::invalid_argument, "decode_capture: a step whose tokens stay on the device replays a capture, and " +
                                                  std::to_string(bucket) + " rows with these sampling parameters have none"};
  if (unsettled_) {  // a failed launch left copies unwaited: the staging is not ours yet
    TANDEM_RETURN_IF_ERROR(wait_for_device(ctx));
    pending_.clear();
    unsettled_ = false;
  }
  // The slot's last step has been collected (at most two in flight), so its copies are done.
  const int slot = slot_;
  TANDEM_RETURN_IF_ERROR(fill(cache, rows, bucket, slot, from_last));
  mirror_ = staging_[slot];
  unsettled_ = true;
  TANDEM_RETURN_IF_ERROR(enqueue_copy_to_device(ctx, inputs_.data<std::int32_t>(), staging_[slot], layout_of(bucket).total * 4));
  // The tokens from the last step's draws: one copy on the device per run of consecutive rows.
  for (std::int64_t i = 0; taken && i < n;) {
    std::int64_t e = i + 1;
    while (e < n && from_last[static_cast<std::size_t>(e)] == from_last[static_cast<std::size_t>(e - 1)] + 1) ++e;
    TANDEM_RETURN_IF_ERROR(copy_on_device(ctx, inputs_.data<std::int32_t>() + layout_of(bucket).tokens + i,
                                          drawn_.data<std::int32_t>() + from_last[static_cast<std::size_t>(i)], (e - i) * 4));
    i = e;
  }
  last_rows_ = 0;  // the draws are being overwritten: until this launch is enqueued, none to take from

  exec_context own = ctx;
  own.scratch = scratch_.get();
  if (it != captured_.end()) {
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
  // Tokens [n] and logprobs [n] (after max_bucket_ words): one read-back, waited for by collect().
  TANDEM_RETURN_IF_ERROR(enqueue_copy_to_host(ctx, back_[slot], drawn_.data<std::int32_t>(), (max_bucket_ + n) * 4));
  auto done = stream_marker::place(ctx);
  if (!done) return done.error();
  pending_.push_back({slot, n, std::move(*done)});
  unsettled_ = false;
  slot_ = 1 - slot;
  last_rows_ = n;
  return status::ok();
}

result<decode_draws> decode_capture::collect() {
  if (pending_.empty()) return status{status_code::invalid_argument, "decode_capture: no step is in flight"};
  pending p = std::move(pending_.front());
  pending_.pop_front();
  if (status s = p.done.wait(); !s) {
    unsettled_ = true;  // what follows it in the stream may still run
    return s;
  }
  const std::int32_t* const back = back_[p.slot];
  decode_draws out;
  out.tokens.assign(back, back + p.rows);
  out.logprobs.resize(static_cast<std::size_t>(p.rows));
  std::memcpy(out.logprobs.data(), back + max_bucket_, static_cast<std::size_t>(p.rows) * 4);
  return out;
}

}  // namespace tandem::gpu
