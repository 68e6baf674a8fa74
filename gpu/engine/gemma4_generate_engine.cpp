// The Gemma 4 generate engine: scheduling, prompt sharing, preemption, sampling and refit
// (gemma4_generate_engine.h).
#include "gpu/engine/gemma4_generate_engine.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <map>
#include <string>
#include <span>
#include <tuple>
#include <utility>

#include "gpu/core/device_buffer.h"
#include "gpu/core/memory.h"
#include "gpu/core/op_profile.h"
#include "gpu/engine/checkpoint_manifest.h"
#include "gpu/model/forward.h"
#include "gpu/ops/embedding.h"
#include "gpu/ops/logprobs.h"
#include "gpu/ops/moe.h"
#include "gpu/ops/sampling.h"

namespace tandem::gpu {
namespace {

constexpr layer_type both_types[] = {layer_type::sliding, layer_type::full};
constexpr std::int64_t head_chunk_rows = 256;

using clock_type = std::chrono::steady_clock;
double seconds_since(clock_type::time_point t) { return std::chrono::duration<double>(clock_type::now() - t).count(); }

status fail(status_code code, const std::string& what) { return {code, "gemma4_generate_engine: " + what}; }

/// The KV pools the options' byte budget buys, for the model's non-shared layers, in `type` on
/// ctx.dev.
result<kv_cache> make_cache(const exec_context& ctx, const model_config& c, dtype type, const gemma4_generate_options& o) {
  return kv_cache::create(ctx, c, type, kv_cache_options_for(c, type, o.kv_block_size, o.kv_cache_bytes));
}

std::string request_name(const generation_request& r) { return "request " + std::to_string(r.id); }

}  // namespace

status gemma4_generate_engine::check_create(const exec_context& ctx, const checkpoint& source, const gemma4_generate_options& options) {
  const dtype w = source.layout.tensors.empty() ? dtype::uint8 : source.layout.tensors.front().type;
  if (w != dtype::float32 && w != dtype::bfloat16)
    return fail(status_code::invalid_argument, "the checkpoint must be opened for float32 or bfloat16 (open_checkpoint(dir, type))");
  if (w == dtype::bfloat16 && ctx.dev.is_cpu())
    return fail(status_code::invalid_argument,
                "bfloat16 weights generate on CUDA; the CPU computes in float32 (open_checkpoint(dir, float32))");
  const auto positive = [](const char* name, std::int64_t v, std::int64_t least) -> status {
    if (v >= least) return status::ok();
    return fail(status_code::invalid_argument, std::string(name) + " must be >= " + std::to_string(least) + ", got " + std::to_string(v));
  };
  for (const status& s : {positive("max_num_sequences", options.max_num_sequences, 1),
                          positive("max_sequence_length", options.max_sequence_length, 2),
                          positive("prefill_token_budget", options.prefill_token_budget, 1),
                          positive("kv_block_size", options.kv_block_size, 1), positive("bucket_bytes", options.bucket_bytes, 1)})
    if (!s) return s;
  const kv_cache_options pools = kv_cache_options_for(source.config, w, options.kv_block_size, options.kv_cache_bytes);
  if (kv_block_bytes(source.config, w, options.kv_block_size) > 0 && pools.full_blocks == 0 && pools.sliding_blocks == 0)
    return fail(status_code::invalid_argument, "kv_cache_bytes " + std::to_string(options.kv_cache_bytes) +
                                                   " does not hold one block of " + std::to_string(options.kv_block_size) +
                                                   " positions per pool (" +
                                                   std::to_string(kv_block_bytes(source.config, w, options.kv_block_size)) +
                                                   " bytes)");
  return status::ok();
}

result<std::unique_ptr<gemma4_generate_engine>> gemma4_generate_engine::create(const exec_context& ctx, checkpoint source,
                                                                               const gemma4_generate_options& options) {
  if (status s = check_create(ctx, source, options); !s) return s;
  auto weights = load_checkpoint(source, ctx.dev);
  if (!weights) return fail(weights.error().code(), "create: " + weights.error().message());
  return create_with_weights(ctx, std::move(source), std::move(*weights), options);
}

result<std::unique_ptr<gemma4_generate_engine>> gemma4_generate_engine::create_with_weights(const exec_context& ctx, checkpoint source,
                                                                                            slab weights,
                                                                                            const gemma4_generate_options& options) {
  if (status s = check_create(ctx, source, options); !s) return s;
  if (weights.dev() != ctx.dev || weights.bytes() != source.layout.total_bytes() || weights.state() != slab_state::resident)
    return fail(status_code::invalid_argument, "create: the weight slab (" + std::to_string(weights.bytes()) + " bytes on " +
                                                   weights.dev().to_string() + ") is not a resident slab of the layout's " +
                                                   std::to_string(source.layout.total_bytes()) + " bytes on " + ctx.dev.to_string());
  auto e = assemble(ctx, std::move(source), options);
  if (!e) return e.error();
  (*e)->weights_ = std::move(weights);
  if (auto s = (*e)->rebind(slab_addresses((*e)->weights_, (*e)->source_.layout)); !s) return s;
  // The load and the cache's fill ran outside the engine's stream: finish them before it reads.
  if (status s = wait_for_device((*e)->ctx_); !s) return fail(s.code(), "create: " + s.message());
  return e;
}

result<std::unique_ptr<gemma4_generate_engine>> gemma4_generate_engine::create_sharing(const exec_context& ctx, checkpoint source,
                                                                                       const weight_source& shared,
                                                                                       const gemma4_generate_options& options) {
  if (status s = check_create(ctx, source, options); !s) return s;
  auto e = assemble(ctx, std::move(source), options);
  if (!e) return e.error();
  if (status s = (*e)->share_weights(shared); !s) return s;
  // The cache's fill ran outside the engine's stream: finish it before it reads.
  if (status s = wait_for_device((*e)->ctx_); !s) return fail(s.code(), "create: " + s.message());
  return e;
}

result<std::unique_ptr<gemma4_generate_engine>> gemma4_generate_engine::assemble(const exec_context& ctx, checkpoint source,
                                                                                 const gemma4_generate_options& options) {
  std::unique_ptr<gemma4_generate_engine> e(new gemma4_generate_engine());
  e->source_ = std::move(source);
  e->options_ = options;
  auto cache = make_cache(ctx, e->source_.config, e->weight_type(), options);
  if (!cache) return fail(cache.error().code(), "create: the KV cache: " + cache.error().message());
  e->cache_ = std::move(*cache);
  e->scratch_ = std::make_unique<workspace>(ctx.dev);
  e->rows_upload_ = std::make_unique<upload_batch>(ctx.dev);
  e->ids_upload_ = std::make_unique<upload_batch>(ctx.dev);
  e->ctx_ = ctx;
  e->ctx_.scratch = e->scratch_.get();
  // A sequence maps at most max_sequence_length / kv_block_size blocks (rounded up) of a type.
  e->captured_ = std::make_unique<decode_capture>(options.max_num_sequences,
                                                  (options.max_sequence_length + options.kv_block_size - 1) / options.kv_block_size,
                                                  head_chunk_rows);
  e->manifest_ = layout_manifest(e->source_.layout, checkpoint_names(e->source_));
  e->plan_ = bucket_plan(e->manifest_, options.bucket_bytes);
  return e;
}

status gemma4_generate_engine::rebind(const std::vector<const std::byte*>& addresses) {
  auto w = bind_weights(source_.config, source_.layout, addresses, ctx_.dev);
  if (!w) return w.error();
  w_ = std::move(*w);
  if (captured_) captured_->clear();  // the captures read the old addresses
  return status::ok();
}

std::uint64_t gemma4_generate_engine::weights_digest() const {
  weight_source live;
  live.dev = ctx_.dev;
  live.manifest = manifest_;
  live.tensors = shared_ ? source_weights_.tensors : slab_addresses(weights_, source_.layout);
  return live.digest(ctx_);
}

// --- requests ------------------------------------------------------------------------------------

status gemma4_generate_engine::check_request(const generation_request& r) const {
  const model_config& c = source_.config;
  const std::string who = "submit: " + request_name(r) + ": ";
  if (r.prompt.empty()) return fail(status_code::invalid_argument, who + "the prompt is empty");
  if (r.max_new_tokens <= 0)
    return fail(status_code::invalid_argument, who + "max_new_tokens must be > 0, got " + std::to_string(r.max_new_tokens));
  for (std::size_t t = 0; t < r.prompt.size(); ++t)
    if (r.prompt[t] < 0 || r.prompt[t] >= c.vocab_size)
      return fail(status_code::invalid_argument, who + "prompt token " + std::to_string(t) + " is " + std::to_string(r.prompt[t]) +
                                                     ", outside the vocabulary [0, " + std::to_string(c.vocab_size) + ")");
  for (const std::int32_t s : r.stop_tokens)
    if (s < 0 || s >= c.vocab_size)
      return fail(status_code::invalid_argument, who + "stop token " + std::to_string(s) + " is outside the vocabulary [0, " +
                                                     std::to_string(c.vocab_size) + ")");
  if (auto s = ops::check_sampling_params(who + "sampling", r.sampling, true); !s) return fail(s.code(), s.message());
  const std::int64_t length = static_cast<std::int64_t>(r.prompt.size()) + r.max_new_tokens;
  if (length > options_.max_sequence_length)
    return fail(status_code::invalid_argument, who + "prompt (" + std::to_string(r.prompt.size()) + ") plus max_new_tokens (" +
                                                   std::to_string(r.max_new_tokens) + ") exceeds max_sequence_length " +
                                                   std::to_string(options_.max_sequence_length));
  if (cache_)
    for (const layer_type t : both_types) {
      const std::int64_t peak = cache_->peak_blocks(t, length, options_.prefill_token_budget);
      if (peak > cache_->pool_blocks(t))
        return fail(status_code::invalid_argument, who + std::to_string(length) + " positions need " + std::to_string(peak) + " " +
                                                       std::string(to_string(t)) + " KV blocks, the pool has " +
                                                       std::to_string(cache_->pool_blocks(t)) + " (raise kv_cache_bytes)");
    }
  return status::ok();
}

status gemma4_generate_engine::submit(std::span<const generation_request> requests) {
  if (pending_)
    return fail(status_code::invalid_argument, "submit: refused while the update to version " + std::to_string(*pending_) + " is staged");
  if (!has_live_weights())
    return fail(status_code::invalid_argument, "submit: refused: no weights are live (the update to version " +
                                                   std::to_string(*overwritten_) + ", received in place, did not complete; "
                                                   "a complete refit restores them)");
  std::unordered_set<std::uint64_t> batch;
  for (const generation_request& r : requests) {
    if (auto s = check_request(r); !s) return s;
    if (ids_.count(r.id) || !batch.insert(r.id).second)
      return fail(status_code::invalid_argument, "submit: " + request_name(r) + ": the id is already in use");
  }
  for (const generation_request& r : requests) {
    sequence s;
    s.request = r;
    s.tokens = r.prompt;
    if (options_.share_prompts && r.prompt.size() >= 2) {
      std::vector<std::int32_t> key(r.prompt.begin(), r.prompt.end() - 1);
      auto [it, fresh] = prefixes_.try_emplace(std::move(key));
      if (fresh) it->second.tokens = it->first;
      ++it->second.users;
      s.prefix_key = &it->first;
    }
    ids_.insert(r.id);
    waiting_.push_back(std::move(s));
  }
  return status::ok();
}

std::vector<finished_sequence> gemma4_generate_engine::collect() {
  std::vector<finished_sequence> out;
  out.swap(finished_);
  for (const finished_sequence& f : out) ids_.erase(f.id);
  return out;
}

// --- prefix holders --------------------------------------------------------------------------------

void gemma4_generate_engine::release_holder(prefix& p) {
  if (p.cache && cache_) cache_->release(*p.cache);
  p.cache.reset();
  p.computed = 0;
}

void gemma4_generate_engine::detach_prefix(sequence& s) {
  if (!s.prefix_key) return;
  auto it = prefixes_.find(*s.prefix_key);
  s.prefix_key = nullptr;
  if (it == prefixes_.end()) return;
  if (--it->second.users == 0) {
    release_holder(it->second);
    prefixes_.erase(it);
  }
}

result<bool> gemma4_generate_engine::fork_ready(sequence& s) {
  if (!s.prefix_key || s.cache) return false;
  prefix& p = prefixes_.at(*s.prefix_key);
  if (!p.cache || p.computed != static_cast<std::int64_t>(p.tokens.size())) return false;
  for (const layer_type t : both_types)
    if (cache_->blocks_to_fork(*p.cache, t) > cache_->free_blocks(t)) return false;
  auto child = cache_->fork(*p.cache);
  if (!child && child.error().code() == status_code::out_of_memory) return false;
  if (!child) return child.error();
  s.cache = *child;
  s.computed = p.computed;
  if (++p.forks == 2) ++shared_prefills_;
  detach_prefix(s);
  return true;
}

// --- one step --------------------------------------------------------------------------------------

bool gemma4_generate_engine::room_for(const sequence& s) const {
  const std::int64_t first_chunk = std::min<std::int64_t>(static_cast<std::int64_t>(s.tokens.size()), options_.prefill_token_budget);
  for (const layer_type t : both_types) {
    if (cache_->pool_blocks(t) == 0) continue;
    // Its first chunk, plus one block of growth for every running sequence and for itself.
    const std::int64_t need = cache_->blocks_to_reserve(-1, first_chunk, t) + static_cast<std::int64_t>(running_.size()) + 1;
    if (need > cache_->free_blocks(t)) return false;
  }
  return true;
}

std::vector<gemma4_generate_engine::planned> gemma4_generate_engine::plan_step() {
  std::vector<planned> plan;
  for (auto& s : running_)  // decoding rows first: one per sequence whose last token waits
    if (!s->prefix_key && s->computed + 1 == static_cast<std::int64_t>(s->tokens.size())) plan.push_back({s.get(), nullptr, 1});
  std::int64_t budget = options_.prefill_token_budget;
  std::vector<prefix*> holders;
  for (auto& s : running_) {
    if (budget <= 0) break;
    if (s->prefix_key) {
      prefix& p = prefixes_.at(*s->prefix_key);
      const auto left = static_cast<std::int64_t>(p.tokens.size()) - p.computed;
      if (left > 0 && std::find(holders.begin(), holders.end(), &p) == holders.end()) {
        holders.push_back(&p);
        const std::int64_t n = std::min(left, budget);
        plan.push_back({nullptr, &p, n});
        budget -= n;
      }
      continue;
    }
    const auto left = static_cast<std::int64_t>(s->tokens.size()) - s->computed;
    if (left > 1) {
      const std::int64_t n = std::min(left, budget);
      plan.push_back({s.get(), nullptr, n});
      budget -= n;
    }
  }
  return plan;
}

bool gemma4_generate_engine::fits(const std::vector<planned>& plan) const {
  for (const layer_type t : both_types) {
    std::int64_t need = 0;
    for (const planned& p : plan) {
      const std::optional<kv_cache::sequence_id>& id = p.seq ? p.seq->cache : p.pre->cache;
      need += cache_->blocks_to_reserve(id.value_or(-1), p.rows, t);
    }
    if (need > cache_->free_blocks(t)) return false;
  }
  return true;
}

bool gemma4_generate_engine::preempt_one() {
  if (running_.size() > 1) {
    auto newest = std::max_element(running_.begin(), running_.end(),
                                   [](const auto& a, const auto& b) { return a->admitted < b->admitted; });
    std::unique_ptr<sequence> victim = std::move(*newest);
    running_.erase(newest);
    if (victim->cache) cache_->release(*victim->cache);
    victim->cache.reset();
    victim->computed = 0;
    detach_prefix(*victim);  // readmitted, it computes every token it has alone
    waiting_.push_front(std::move(*victim));
    ++preemptions_;
    return true;
  }
  bool released = false;  // one sequence left: holders go, their requests compute alone
  for (auto& [key, p] : prefixes_)
    if (p.cache) {
      release_holder(p);
      released = true;
    }
  if (released) {
    for (auto& s : running_) detach_prefix(*s);
    for (auto& s : waiting_) detach_prefix(s);
  }
  return released;
}

result<std::int64_t> gemma4_generate_engine::step() {
  const auto work = [this] { return static_cast<std::int64_t>(waiting_.size() + running_.size()); };
  const auto started = clock_type::now();
  if (in_flight_.empty()) {  // else the last call enqueued a captured step: follow it, take its draws
    auto began = start_step();
    if (!began) return began.error();
    if (!*began) return work();
  }
  if (!in_flight_.empty())
    if (auto s = advance(); !s) {
      reset_after_failure();
      return s;
    }
  ++profile_.steps;
  profile_.step_seconds += seconds_since(started);
  return work();
}

result<bool> gemma4_generate_engine::start_step() {
  if (!cache_) {
    if (!waiting_.empty())
      return fail(status_code::invalid_argument, "step: the KV cache is released (restore_cache() first); " +
                                                     std::to_string(waiting_.size()) + " sequences stay queued");
    return false;
  }
  while (static_cast<std::int64_t>(running_.size()) < options_.max_num_sequences && !waiting_.empty()) {
    if (!running_.empty() && !room_for(waiting_.front())) break;  // admitting it would only preempt someone
    auto s = std::make_unique<sequence>(std::move(waiting_.front()));
    waiting_.pop_front();
    s->admitted = ++admissions_;
    running_.push_back(std::move(s));
  }
  if (running_.empty()) return false;
  std::vector<planned> plan;
  for (;;) {
    for (auto& s : running_)
      if (auto forked = fork_ready(*s); !forked) {
        reset_after_failure();
        return fail(forked.error().code(), "step: " + forked.error().message());
      }
    plan = plan_step();
    if (!plan.empty() && fits(plan)) break;
    if (!preempt_one())
      return fail(status_code::device_error, "step: the KV pools cannot hold the rows of one sequence (a request the submit "
                                             "check should have refused)");
  }
  if (auto s = run(plan); !s) {
    reset_after_failure();
    return s;
  }
  return true;
}

status gemma4_generate_engine::run(const std::vector<planned>& plan) {
  if (capturable(plan)) return launch_captured(plan);
  const model_config& c = source_.config;
  std::vector<std::int32_t> tokens, positions, cu{0};
  std::vector<kv_cache::sequence_id> ids;
  for (const planned& p : plan) {
    std::optional<kv_cache::sequence_id>& id = p.seq ? p.seq->cache : p.pre->cache;
    if (!id) id = cache_->add_sequence();
    const std::vector<std::int32_t>& all = p.seq ? p.seq->tokens : p.pre->tokens;
    const std::int64_t start = cache_->length(*id);
    if (auto s = cache_->reserve(*id, p.rows); !s) return fail(s.code(), "step: " + s.message());
    for (std::int64_t i = 0; i < p.rows; ++i) {
      tokens.push_back(all[static_cast<std::size_t>(start + i)]);
      positions.push_back(static_cast<std::int32_t>(start + i));
    }
    cu.push_back(static_cast<std::int32_t>(tokens.size()));
    ids.push_back(*id);
  }
  const auto n = static_cast<std::int64_t>(tokens.size());
  const auto in_step = [](status s) { return s ? s : fail(s.code(), "step: " + s.message()); };
  // The rows and the block tables go to the device in one enqueued copy; their host copies come
  // along, so the lookups and the paged ops check them here and nothing waits for the device.
  cached_batch batch;
  batch.sequences = ids;
  {
    if (auto s = in_step(rows_upload_->begin(ctx_)); !s) return s;
    const host_buffer tables[2] = {cache_->block_table(layer_type::sliding, ids), cache_->block_table(layer_type::full, ids)};
    std::size_t at[5];
    const std::pair<std::span<const std::int32_t>, std::vector<std::int64_t>> arrays[5] = {
        {tokens, {n}}, {positions, {n}}, {cu, {static_cast<std::int64_t>(cu.size())}},
        {{tables[0].data<std::int32_t>(), static_cast<std::size_t>(tables[0].numel())}, tables[0].shape()},
        {{tables[1].data<std::int32_t>(), static_cast<std::size_t>(tables[1].numel())}, tables[1].shape()}};
    for (int i = 0; i < 5; ++i) {
      auto added = rows_upload_->add(arrays[i].first, arrays[i].second);
      if (!added) return in_step(added.error());
      at[i] = *added;
    }
    if (auto s = in_step(rows_upload_->send(ctx_)); !s) return s;
    batch.tokens = rows_upload_->on_device(at[0]);
    batch.positions = rows_upload_->on_device(at[1]);
    batch.cu_rows = rows_upload_->on_device(at[2]);
    batch.host_tokens = rows_upload_->host(at[0]);
    batch.host_positions = rows_upload_->host(at[1]);
    batch.host_cu_rows = rows_upload_->host(at[2]);
    for (int t = 0; t < 2; ++t) {
      batch.block_tables[t] = rows_upload_->on_device(at[3 + t]);
      batch.host_block_tables[t] = rows_upload_->host(at[3 + t]);
    }
  }
  device_buffer hidden;
  if (auto s = in_step(allocate_unfilled_buffers(ctx_, weight_type(), {{&hidden, {n, c.hidden_size}}})); !s) return s;
  profile_.rows += n;
  auto model_started = clock_type::now();
  if (auto s = forward_cached(ctx_, c, w_, *cache_, batch, hidden, options_.trace); !s) return fail(s.code(), "step: " + s.message());
  profile_.model_seconds += seconds_since(model_started);

  // Rows whose chunk reached their sequence's last known token sample the next one, grouped by
  // sampling parameters (one sampler call per group).
  using key = std::tuple<double, std::int32_t, double>;
  std::map<key, std::vector<std::size_t>> groups;  // plan indices
  for (std::size_t i = 0; i < plan.size(); ++i) {
    const planned& p = plan[i];
    if (p.pre) {
      p.pre->computed += p.rows;
      continue;
    }
    p.seq->computed += p.rows;
    if (p.seq->computed == static_cast<std::int64_t>(p.seq->tokens.size())) {
      const ops::sampling_params& sp = p.seq->request.sampling;
      groups[{sp.temperature, sp.top_k, sp.top_p}].push_back(i);
    }
  }
  for (const auto& [k, members] : groups) {
    const ops::sampling_params params{std::get<0>(k), std::get<1>(k), std::get<2>(k)};
    for (std::size_t begin = 0; begin < members.size(); begin += head_chunk_rows) {
      const std::size_t end = std::min(members.size(), begin + static_cast<std::size_t>(head_chunk_rows));
      const auto m = static_cast<std::int64_t>(end - begin);
      std::vector<std::int32_t> last_rows;
      std::vector<rng_coordinates> coords;
      for (std::size_t j = begin; j < end; ++j) {
        const std::size_t i = members[j];
        last_rows.push_back(cu[i + 1] - 1);
        rng_coordinates r = plan[i].seq->request.rng;
        r.position = static_cast<std::uint32_t>(plan[i].seq->tokens.size());
        coords.push_back(r);
      }
      model_started = clock_type::now();
      const auto in_head = [](const char* what, status s) { return s ? s : fail(s.code(), std::string("step: ") + what + ": " + s.message()); };
      if (auto s = in_head("head", ids_upload_->begin(ctx_)); !s) return s;
      auto row_ids = ids_upload_->add(last_rows, {m});
      if (!row_ids) return in_head("head", row_ids.error());
      if (auto s = in_head("head", ids_upload_->send(ctx_)); !s) return s;
      // The sampled tokens (I32) and their logprobs (F32) side by side: one read-back.
      device_buffer rows, logits, drawn;
      if (auto s = in_head("head", allocate_unfilled_buffers(ctx_, weight_type(), {{&rows, {m, c.hidden_size}}, {&logits, {m, c.vocab_size}},
                                                                                  {&drawn, {2 * m}, dtype::int32}}));
          !s)
        return s;
      const tensor sampled(drawn.data<std::int32_t>(), dtype::int32, {m}, ctx_.dev);
      const tensor lp(drawn.data<std::int32_t>() + m, dtype::float32, {m}, ctx_.dev);
      // The sampled rows gathered from the step's hidden states: a lookup with scale 1 copies each
      // row exactly.
      if (auto s = in_head("head", ops::embedding_forward(ctx_, ids_upload_->on_device(*row_ids), hidden, 1.0, rows, 0,
                                                          ids_upload_->host(*row_ids)));
          !s)
        return s;
      if (auto s = in_head("head", head_logits(ctx_, c, w_, rows, logits)); !s) return s;
      if (auto s = in_head("sampling", ops::sampling_forward(ctx_, logits, params, coords, sampled, lp)); !s) return s;
      auto both = drawn.read<std::int32_t>(ctx_);
      if (!both) return in_head("sampling", both.error());
      rows_upload_->mark_complete();  // the read-back waited for everything enqueued before it
      ids_upload_->mark_complete();
      std::vector<float> scores(static_cast<std::size_t>(m));
      std::memcpy(scores.data(), both->data() + m, static_cast<std::size_t>(m) * 4);
      const std::vector<std::int32_t>* drawn_tokens = &*both;
      profile_.model_seconds += seconds_since(model_started);
      profile_.tokens += m;
      for (std::size_t j = begin; j < end; ++j) {
        sequence& s = *plan[members[j]].seq;
        s.tokens.push_back((*drawn_tokens)[j - begin]);
        s.logprobs.push_back(scores[j - begin]);
      }
    }
  }
  settle();
  return status::ok();
}

bool gemma4_generate_engine::capturable(const std::vector<planned>& plan) const {
  const bool wanted = options_.capture_decode == decode_capture_mode::always ||
                      (options_.capture_decode == decode_capture_mode::on_cuda && !ctx_.dev.is_cpu());
  if (!wanted || options_.trace.enabled() || op_profile_armed()) return false;
  // A model with MoE blocks: its experts' forward captures up to ops::moe_capturable_tokens tokens.
  if (source_.config.enable_moe_block &&
      decode_capture::bucket_of(static_cast<std::int64_t>(plan.size())) > ops::moe_capturable_tokens)
    return false;
  for (const planned& p : plan) {
    if (!p.seq || p.rows != 1 || p.seq->computed + 1 != static_cast<std::int64_t>(p.seq->tokens.size())) return false;
    if (!(p.seq->request.sampling == plan.front().seq->request.sampling)) return false;
  }
  return !plan.empty();
}

result<decode_row> gemma4_generate_engine::reserve_row(sequence& s, std::size_t draw) {
  decode_row r;
  r.sequence = *s.cache;
  r.position = static_cast<std::int32_t>(cache_->length(*s.cache));
  if (auto st = cache_->reserve(*s.cache, 1); !st) return fail(st.code(), "step: " + st.message());
  r.rng = s.request.rng;
  r.rng.position = static_cast<std::uint32_t>(draw);
  return r;
}

status gemma4_generate_engine::launch_captured(const std::vector<planned>& plan) {
  std::vector<decode_row> rows;
  rows.reserve(plan.size());
  launched l;
  l.params = plan.front().seq->request.sampling;
  for (const planned& p : plan) {
    sequence& s = *p.seq;
    if (!s.cache) s.cache = cache_->add_sequence();
    auto r = reserve_row(s, s.tokens.size());
    if (!r) return r.error();
    r->token = s.tokens[static_cast<std::size_t>(r->position)];
    rows.push_back(*r);
    l.rows.push_back(&s);
  }
  const auto started = clock_type::now();
  if (auto st = captured_->launch(ctx_, source_.config, w_, *cache_, rows, l.params); !st)
    return fail(st.code(), "step: " + st.message());
  profile_.model_seconds += seconds_since(started);
  in_flight_.push_back(std::move(l));
  return status::ok();
}

std::optional<std::vector<std::int64_t>> gemma4_generate_engine::follow_up(const launched& last) const {
  if (!options_.overlap_decode || in_flight_.size() != 1 || !cache_) return std::nullopt;
  // Nothing else could run next: every running sequence is in the step, none waits for admission.
  if (last.rows.size() != running_.size()) return std::nullopt;
  if (!waiting_.empty() && static_cast<std::int64_t>(running_.size()) < options_.max_num_sequences) return std::nullopt;
  std::vector<std::int64_t> next;
  for (std::size_t i = 0; i < last.rows.size(); ++i) {
    const sequence* s = last.rows[i];
    if (!s) return std::nullopt;
    // Its draw in `last` is its generated token logprobs.size() + 1: the last one at max_new_tokens.
    if (static_cast<std::int64_t>(s->logprobs.size()) + 1 < s->request.max_new_tokens) next.push_back(static_cast<std::int64_t>(i));
  }
  if (next.empty()) return std::nullopt;
  // On CUDA the step must replay a capture (its tokens stay on the device).
  if (!ctx_.dev.is_cpu() && !captured_->has_capture(static_cast<std::int64_t>(next.size()), last.params)) return std::nullopt;
  for (const layer_type t : both_types) {  // one more row each, before `last` settles (conservative)
    std::int64_t need = 0;
    for (const std::int64_t i : next) need += cache_->blocks_to_reserve(*last.rows[static_cast<std::size_t>(i)]->cache, 1, t);
    if (need > cache_->free_blocks(t)) return std::nullopt;
  }
  return next;
}

status gemma4_generate_engine::advance() {
  if (auto next = follow_up(in_flight_.back())) {
    const launched& last = in_flight_.back();
    launched l;
    l.params = last.params;
    std::vector<decode_row> rows;
    rows.reserve(next->size());
    for (const std::int64_t i : *next) {
      sequence& s = *last.rows[static_cast<std::size_t>(i)];
      auto r = reserve_row(s, s.tokens.size() + 1);  // after the token `last` draws; its token from the device
      if (!r) return r.error();
      rows.push_back(*r);
      l.rows.push_back(&s);
    }
    const auto started = clock_type::now();
    if (auto st = captured_->launch(ctx_, source_.config, w_, *cache_, rows, l.params, *next); !st)
      return fail(st.code(), "step: " + st.message());
    profile_.model_seconds += seconds_since(started);
    in_flight_.push_back(std::move(l));
    ++profile_.overlapped_steps;
  }
  return absorb();
}

status gemma4_generate_engine::absorb() {
  launched l = std::move(in_flight_.front());
  in_flight_.pop_front();
  const auto started = clock_type::now();
  auto draws = captured_->collect();
  if (!draws) return fail(draws.error().code(), "step: " + draws.error().message());
  profile_.model_seconds += seconds_since(started);
  profile_.rows += static_cast<std::int64_t>(l.rows.size());
  ++profile_.captured_steps;
  profile_.captures = captured_->captures();
  for (std::size_t i = 0; i < l.rows.size(); ++i) {
    sequence* s = l.rows[i];
    if (!s) continue;  // finished at the step before: this row is dropped
    s->computed += 1;
    s->tokens.push_back(draws->tokens[i]);
    s->logprobs.push_back(draws->logprobs[i]);
    ++profile_.tokens;
  }
  settle();
  return status::ok();
}

status gemma4_generate_engine::drain() {
  while (!in_flight_.empty())
    if (status s = absorb(); !s) {
      reset_after_failure();
      return s;
    }
  return status::ok();
}

void gemma4_generate_engine::settle() {
  // Finished sequences leave at once; every cache sequence drops what its window no longer needs.
  for (std::size_t i = running_.size(); i-- > 0;) {
    sequence& s = *running_[i];
    if (s.logprobs.empty() || s.computed + 1 != static_cast<std::int64_t>(s.tokens.size())) continue;
    const std::int32_t last = s.tokens.back();
    if (std::find(s.request.stop_tokens.begin(), s.request.stop_tokens.end(), last) != s.request.stop_tokens.end())
      finish(i, finish_reason::stop_token);
    else if (static_cast<std::int64_t>(s.logprobs.size()) == s.request.max_new_tokens)
      finish(i, finish_reason::length);
  }
  for (const auto& s : running_)
    if (s->cache) cache_->trim_window(*s->cache);
  for (auto& [k, p] : prefixes_)
    if (p.cache) cache_->trim_window(*p.cache);
}

void gemma4_generate_engine::finish(std::size_t running_index, finish_reason why) {
  std::unique_ptr<sequence> s = std::move(running_[running_index]);
  for (launched& l : in_flight_)  // its row of a step in flight is dropped
    std::replace(l.rows.begin(), l.rows.end(), s.get(), static_cast<sequence*>(nullptr));
  running_.erase(running_.begin() + static_cast<std::ptrdiff_t>(running_index));
  if (s->cache) cache_->release(*s->cache);
  finished_sequence f;
  f.id = s->request.id;
  f.tokens.assign(s->tokens.begin() + static_cast<std::ptrdiff_t>(s->request.prompt.size()), s->tokens.end());
  f.logprobs = std::move(s->logprobs);
  f.reason = why;
  f.weight_version = version_;
  finished_.push_back(std::move(f));
}

void gemma4_generate_engine::reset_after_failure() {
  in_flight_.clear();  // captured_->clear() below waits for the device
  for (auto& s : running_) {
    detach_prefix(*s);
    ids_.erase(s->request.id);
  }
  running_.clear();
  for (auto& [k, p] : prefixes_) {
    p.cache.reset();
    p.computed = 0;
  }
  captured_->clear();
  cache_.reset();  // the old storage goes before the new one is made
  auto fresh = make_cache(ctx_, source_.config, weight_type(), options_);
  if (fresh) cache_ = std::move(*fresh);
}

// --- weights ---------------------------------------------------------------------------------------

status gemma4_generate_engine::begin_weight_update(std::uint64_t version) {
  // A step in flight reads the weights and the cache. With nothing running its rows are all
  // dropped ones, so waiting for it changes no sequence; otherwise the call refuses below.
  if (running_.empty())
    if (status s = drain(); !s) return s;
  const std::string which = "begin_weight_update(" + std::to_string(version) + "): ";
  if (pending_)
    return fail(status_code::invalid_argument, which + "the update to version " + std::to_string(*pending_) +
                                                   " is still staged (commit or abort it first)");
  if (!waiting_.empty() || !running_.empty())
    return fail(status_code::invalid_argument, which + "refused while " + std::to_string(waiting_.size()) + " sequences wait and " +
                                                   std::to_string(running_.size()) + " run");
  if (shared_) return fail(status_code::invalid_argument, which + "the weights are shared in place: a refit is bump_weight_version");
  if (version <= version_)
    return fail(status_code::invalid_argument, which + "not newer than the live version " + std::to_string(version_));
  if (options_.receive == refit_receive::staging) {
    auto staging = slab::create("refit staging", source_.layout.total_bytes(), ctx_.dev);
    if (!staging) return fail(staging.error().code(), which + staging.error().message());
    staging_ = std::move(*staging);
  } else {
    overwritten_ = version;  // from the first byte on, no version is whole
  }
  pending_ = version;
  received_.assign(plan_.bucket_count(), false);
  received_count_ = 0;
  return status::ok();
}

status gemma4_generate_engine::import_bucket(std::size_t index, std::span<const std::byte> bytes) {
  if (!pending_) return fail(status_code::invalid_argument, "import_bucket: no weight update in progress");
  const std::string which = "import_bucket: bucket " + std::to_string(index) + " of version " + std::to_string(*pending_) + ": ";
  const auto refuse = [this](const std::string& why) {
    abort_weight_update();
    return fail(status_code::invalid_argument, why + after_dropped_update(options_.receive, version_));
  };
  if (index >= plan_.bucket_count()) return refuse(which + "the plan has " + std::to_string(plan_.bucket_count()) + " buckets");
  if (static_cast<std::int64_t>(bytes.size()) != plan_.bucket_size(index))
    return refuse(which + std::to_string(bytes.size()) + " bytes, expected " + std::to_string(plan_.bucket_size(index)));
  if (received_[index]) return refuse(which + "arrived twice");
  slab& target = options_.receive == refit_receive::staging ? staging_ : weights_;
  auto* base = static_cast<std::byte*>(target.view_of(0, weight_type(), std::vector<std::int64_t>{1})->data());
  const auto width = static_cast<std::int64_t>(size_of(weight_type()));
  for (const bucket_piece& piece : plan_.pieces(index))
    if (status s = copy_to_device(ctx_, base + source_.layout.tensors[piece.entry].offset_elements * width + piece.entry_offset,
                                  bytes.data() + piece.bucket_offset, piece.bytes);
        !s) {
      abort_weight_update();
      return fail(s.code(), which + s.message() + after_dropped_update(options_.receive, version_));
    }
  received_[index] = true;
  ++received_count_;
  return status::ok();
}

status gemma4_generate_engine::commit_weight_update() {
  // Nothing runs while an update is staged (submit refuses, begin needs an idle engine), but a
  // step whose rows all stopped may still be in flight, reading the live weights.
  if (status s = drain(); !s) return s;
  if (!pending_) return fail(status_code::invalid_argument, "commit_weight_update: no weight update in progress");
  if (received_count_ != received_.size()) {
    const auto missing = static_cast<std::size_t>(std::find(received_.begin(), received_.end(), false) - received_.begin());
    const std::string why = "commit_weight_update(" + std::to_string(*pending_) + "): " +
                            std::to_string(received_.size() - received_count_) + " of " + std::to_string(received_.size()) +
                            " buckets missing (first: bucket " + std::to_string(missing) + ")" + after_dropped_update(options_.receive, version_);
    abort_weight_update();
    return fail(status_code::invalid_argument, why);
  }
  if (options_.receive == refit_receive::in_place) {  // the buckets are the live weights: same addresses
    overwritten_.reset();
    version_ = *pending_;
    pending_.reset();
    received_.clear();
    received_count_ = 0;
    return status::ok();
  }
  std::swap(weights_, staging_);
  if (auto s = rebind(slab_addresses(weights_, source_.layout)); !s) {  // cannot fail for a slab of the layout's size
    std::swap(weights_, staging_);
    (void)rebind(slab_addresses(weights_, source_.layout));
    abort_weight_update();
    return s;
  }
  staging_ = slab{};
  version_ = *pending_;
  pending_.reset();
  received_.clear();
  received_count_ = 0;
  return status::ok();
}

void gemma4_generate_engine::abort_weight_update() {
  pending_.reset();
  received_.clear();
  received_count_ = 0;
  staging_ = slab{};  // in place, overwritten_ stays: the weights are part old, part new
}


status gemma4_generate_engine::share_weights(const weight_source& source) {
  // A step in flight reads the weights and the cache. With nothing running its rows are all
  // dropped ones, so waiting for it changes no sequence; otherwise the call refuses below.
  if (running_.empty())
    if (status s = drain(); !s) return s;
  if (pending_) return fail(status_code::invalid_argument, "share_weights: refused while an update is staged");
  if (!waiting_.empty() || !running_.empty())
    return fail(status_code::invalid_argument, "share_weights: refused while sequences wait or run");
  if (auto s = check_weight_source("gemma4_generate_engine: share_weights", source, manifest_); !s) return s;
  if (source.dev != ctx_.dev)
    return fail(status_code::invalid_argument, "share_weights: the weights are on " + source.dev.to_string() + ", the engine on " +
                                                   ctx_.dev.to_string());
  if (auto s = rebind(source.tensors); !s) return s;
  source_weights_ = source;
  shared_ = true;
  weights_ = slab{};
  overwritten_.reset();
  return status::ok();
}

status gemma4_generate_engine::bump_weight_version(std::uint64_t version) {
  // A step in flight reads the weights and the cache. With nothing running its rows are all
  // dropped ones, so waiting for it changes no sequence; otherwise the call refuses below.
  if (running_.empty())
    if (status s = drain(); !s) return s;
  const std::string which = "bump_weight_version(" + std::to_string(version) + "): ";
  if (!shared_)
    return fail(status_code::invalid_argument, which + "the weights are the engine's own copy: a refit is begin_weight_update, "
                                                       "import_bucket, commit_weight_update");
  if (pending_) return fail(status_code::invalid_argument, which + "refused while an update is staged");
  if (!waiting_.empty() || !running_.empty())
    return fail(status_code::invalid_argument, which + "refused while " + std::to_string(waiting_.size()) + " sequences wait and " +
                                                   std::to_string(running_.size()) + " run");
  if (version <= version_)
    return fail(status_code::invalid_argument, which + "not newer than the live version " + std::to_string(version_));
  version_ = version;
  return status::ok();
}

// --- memory ----------------------------------------------------------------------------------------

status gemma4_generate_engine::release_cache() {
  // A step in flight reads the weights and the cache. With nothing running its rows are all
  // dropped ones, so waiting for it changes no sequence; otherwise the call refuses below.
  if (running_.empty())
    if (status s = drain(); !s) return s;
  if (!cache_) return status::ok();
  if (!waiting_.empty() || !running_.empty())
    return fail(status_code::invalid_argument, "release_cache: refused while " + std::to_string(waiting_.size()) +
                                                   " sequences wait and " + std::to_string(running_.size()) + " run");
  prefixes_.clear();  // no request references one
  captured_->clear();
  cache_.reset();
  scratch_->trim();
  // What the cache's storage held goes back to the device for the trainer's slabs.
  if (status s = release_cached_memory(ctx_); !s) return fail(s.code(), "release_cache: " + s.message());
  return status::ok();
}

status gemma4_generate_engine::restore_cache() {
  if (cache_) return status::ok();
  auto fresh = make_cache(ctx_, source_.config, weight_type(), options_);
  if (!fresh) return fail(fresh.error().code(), "restore_cache: " + fresh.error().message());
  cache_ = std::move(*fresh);
  return status::ok();
}

}  // namespace tandem::gpu
