// The Gemma 4 train engine over the model of gpu/model/, on the context's device.
#include "gpu/engine/gemma4_train_engine.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <tuple>

#include "gpu/core/convert.h"
#include "gpu/core/memory.h"
#include "gpu/core/staged_copy.h"
#include "gpu/engine/checkpoint_manifest.h"
#include "gpu/model/backward.h"
#include "gpu/model/checkpoint_writer.h"
#include "gpu/model/json_text.h"
#include "gpu/model/safetensors_file.h"
#include "gpu/model/safetensors_writer.h"
#include "gpu/model/slab_views.h"
#include "gpu/ops/elementwise.h"
#include "gpu/ops/pg_loss.h"

namespace tandem::gpu {
namespace {

constexpr const char* optimizer_file = "optimizer.safetensors";

status fail(status_code code, const std::string& what) { return {code, "gemma4_train_engine: " + what}; }

tensor flat(const slab& s, dtype type, std::int64_t elements) { return *s.view_of(0, type, std::vector<std::int64_t>{elements}); }

// Row r of the head predicts token r + 1: the token frame puts that value at r + 1, 0 at each
// sequence's first token.
std::vector<float> to_token_frame(const packed_sequences& s, const std::vector<float>& rows) {
  std::vector<float> out(s.tokens.size(), 0.0f);
  for (std::size_t q = 0; q + 1 < s.offsets.size(); ++q)
    for (std::int32_t t = s.offsets[q] + 1; t < s.offsets[q + 1]; ++t)
      out[static_cast<std::size_t>(t)] = rows[static_cast<std::size_t>(t) - 1];
  return out;
}

}  // namespace

status gemma4_train_engine::check_create(const exec_context& ctx, const checkpoint& source, const train_engine_options& options,
                                         const communicator* group) {
  const dtype w = source.layout.tensors.empty() ? dtype::uint8 : source.layout.tensors.front().type;
  if (w != dtype::float32 && w != dtype::bfloat16)
    return fail(status_code::invalid_argument, "the checkpoint must be opened for float32 or bfloat16 (open_checkpoint(dir, type))");
  if (w == dtype::bfloat16 && ctx.dev.is_cpu())
    return fail(status_code::invalid_argument,
                "bfloat16 weights train on CUDA; the CPU computes in float32 (open_checkpoint(dir, float32))");
  if (auto s = check_train_engine_options("gemma4_train_engine", options); !s) return s;
  if (group && group->context().dev != ctx.dev)
    return fail(status_code::invalid_argument, "the data-parallel group runs on " + group->context().dev.to_string() +
                                                   ", the engine on " + ctx.dev.to_string());
  return status::ok();
}

result<std::unique_ptr<gemma4_train_engine>> gemma4_train_engine::create(const exec_context& ctx, checkpoint source,
                                                                         const train_engine_options& options,
                                                                         communicator* group) {
  if (status s = check_create(ctx, source, options, group); !s) return s;
  auto weights = load_checkpoint(source, ctx.dev);
  if (!weights) return fail(weights.error().code(), "create: " + weights.error().message());
  return create_with_weights(ctx, std::move(source), std::move(*weights), options, group);
}

result<std::unique_ptr<gemma4_train_engine>> gemma4_train_engine::create_with_weights(const exec_context& ctx, checkpoint source,
                                                                                      slab weights,
                                                                                      const train_engine_options& options,
                                                                                      communicator* group) {
  if (status s = check_create(ctx, source, options, group); !s) return s;
  if (weights.dev() != ctx.dev || weights.bytes() != source.layout.total_bytes() || weights.state() != slab_state::resident)
    return fail(status_code::invalid_argument, "create: the weight slab (" + std::to_string(weights.bytes()) + " bytes on " +
                                                   weights.dev().to_string() + ") is not a resident slab of the layout's " +
                                                   std::to_string(source.layout.total_bytes()) + " bytes on " + ctx.dev.to_string());
  std::unique_ptr<gemma4_train_engine> e(new gemma4_train_engine());
  e->weights_ = std::move(weights);
  const std::int64_t n = source.layout.total_elements;
  const auto slab_bytes = [n](dtype t) { return n * static_cast<std::int64_t>(size_of(t)); };
  const dtype weight_type = source.layout.tensors.front().type;
  auto grads = slab::create("gradients", slab_bytes(weight_type), ctx.dev);
  auto m = slab::create("exp_avg", slab_bytes(options.first_moment_dtype), ctx.dev);
  auto v = slab::create("exp_avg_sq", slab_bytes(options.second_moment_dtype), ctx.dev);
  if (!grads || !m || !v) {
    const status& s = (!grads ? grads : !m ? m : v).error();
    return fail(s.code(), "create: " + s.message());
  }
  if (options.master_dtype != weight_type) {
    auto master = slab::create("master weights", slab_bytes(options.master_dtype), ctx.dev);
    if (!master) return fail(master.error().code(), "create: " + master.error().message());
    e->master_ = std::move(*master);
  }
  e->grads_ = std::move(*grads);
  e->exp_avg_ = std::move(*m);
  e->exp_avg_sq_ = std::move(*v);
  e->source_ = std::move(source);
  e->options_ = options;
  e->group_ = group;
  e->scratch_ = std::make_unique<workspace>(ctx.dev);
  e->ctx_ = ctx;
  e->ctx_.scratch = e->scratch_.get();
  auto w = bind_weights(e->source_.config, e->source_.layout, e->weights_);
  auto g = bind_weights(e->source_.config, e->source_.layout, e->grads_);
  if (!w || !g) return (!w ? w : g).error();
  e->w_ = std::move(*w);
  e->g_ = std::move(*g);
  e->names_ = checkpoint_names(e->source_);
  e->manifest_ = layout_manifest(e->source_.layout, e->names_);
  for (std::size_t i = 0; i < e->source_.layout.tensors.size(); ++i) {
    const tensor_entry& t = e->source_.layout.tensors[i];
    if (!t.trainable) continue;
    e->trainable_.push_back(i);
    e->trainable_ranges_.push_back({t.offset_elements, t.elements()});
  }
  // The loads and fills above ran outside the engine's stream: finish them before it reads.
  if (status s = wait_for_device(e->ctx_); !s) return fail(s.code(), "create: " + s.message());
  if (status s = e->round_weights_through_master(); !s) return fail(s.code(), "create: " + s.message());
  return e;
}

status gemma4_train_engine::check_resident(const char* op) const {
  if (state_ == train_memory_state::resident) return status::ok();
  return fail(status_code::invalid_argument, std::string(op) + ": the training state is offloaded (restore_state() first)");
}

status gemma4_train_engine::check_batch(const char* op, const packed_sequences& batch) const {
  const auto& o = batch.offsets;
  if (o.empty() || o.front() != 0 || static_cast<std::size_t>(o.back()) != batch.tokens.size())
    return fail(status_code::invalid_argument, std::string(op) + ": offsets must start at 0 and end at the token count " +
                                                   std::to_string(batch.tokens.size()));
  for (std::size_t s = 0; s + 1 < o.size(); ++s)
    if (o[s + 1] < o[s]) return fail(status_code::invalid_argument, std::string(op) + ": offsets decrease at sequence " + std::to_string(s));
  for (std::size_t t = 0; t < batch.tokens.size(); ++t)
    if (batch.tokens[t] < 0 || batch.tokens[t] >= source_.config.vocab_size)
      return fail(status_code::invalid_argument, std::string(op) + ": token " + std::to_string(t) + " is " +
                                                     std::to_string(batch.tokens[t]) + ", outside [0, " +
                                                     std::to_string(source_.config.vocab_size) + ")");
  return status::ok();
}

result<std::vector<float>> gemma4_train_engine::logprobs(const packed_sequences& batch, const ops::sampling_params& params) {
  if (auto s = check_batch("logprobs", batch); !s) return s;
  auto step = [&](status s) { return s ? s : fail(s.code(), "logprobs: " + s.message()); };
  auto b = pack_tokens(ctx_, batch.tokens, batch.offsets);
  if (!b) return step(b.error());
  device_buffer rows;
  if (auto s = step(allocate_buffers(ctx_, dtype::float32, {{&rows, {static_cast<std::int64_t>(batch.tokens.size())}}})); !s) return s;
  if (auto s = step(forward_logprobs(ctx_, source_.config, w_, b->view(), b->targets, params, rows, options_.logprob_chunk_rows)); !s)
    return s;
  auto host = rows.read<float>(ctx_);
  if (!host) return step(host.error());
  return to_token_frame(batch, *host);
}

result<gemma4_train_engine::micro_batch_forward> gemma4_train_engine::forward_micro_batch(const char* op, const packed_sequences& batch,
                                                                                    const ops::sampling_params& params) {
  const model_config& c = source_.config;
  const auto T = static_cast<std::int64_t>(batch.tokens.size());
  auto step = [op](const char* what, status s) { return s ? s : fail(s.code(), std::string(op) + ": " + what + ": " + s.message()); };
  auto b = pack_tokens(ctx_, batch.tokens, batch.offsets);
  if (!b) return step("forward", b.error());
  micro_batch_forward f{std::move(*b), {}, {}, {}, {}};
  device_buffer rows;
  if (auto s = step("forward", allocate_unfilled_buffers(ctx_, weight_type(), {{&f.hidden, {T, c.hidden_size}}})); !s) return s;
  if (auto s = step("forward", allocate_unfilled_buffers(ctx_, dtype::float32, {{&rows, {T}}})); !s) return s;
  if (auto s = step("forward", forward_for_backward(ctx_, c, w_, f.batch.view(), f.hidden, f.act, options_.recompute)); !s) return s;
  // Without recompute the head's logits are kept like every other activation, so the backward
  // skips the head's product (about 5 ms of E2B's step at 4096 tokens, for 2 GiB).
  if (options_.recompute == recompute_mode::none)
    if (auto s = step("the head's logits kept for the backward (recompute none; selective and full recompute them)",
                      allocate_unfilled_buffers(ctx_, weight_type(), {{&f.logits, {T, c.vocab_size}}}));
        !s)
      return s;
  if (auto s = step("logprobs", head_logprobs(ctx_, c, w_, f.hidden, f.batch.targets, params, rows, options_.logprob_chunk_rows,
                                              f.logits.view()));
      !s)
    return s;
  auto host = rows.read<float>(ctx_);
  if (!host) return step("logprobs", host.error());
  f.rows = std::move(*host);
  return f;
}

status gemma4_train_engine::backward_micro_batch(const char* op, const micro_batch_forward& f, const std::vector<float>& d_rows,
                                              const ops::sampling_params& params) {
  const model_config& c = source_.config;
  const auto T = static_cast<std::int64_t>(d_rows.size());
  auto step = [op](const char* what, status s) { return s ? s : fail(s.code(), std::string(op) + ": " + what + ": " + s.message()); };
  device_buffer d_rows_dev, d_hidden;
  if (auto s = step("head backward", allocate_unfilled_buffers(ctx_, dtype::float32, {{&d_rows_dev, {T}}})); !s) return s;
  if (auto s = step("head backward", allocate_unfilled_buffers(ctx_, weight_type(), {{&d_hidden, {T, c.hidden_size}}})); !s) return s;
  if (auto s = step("head backward", copy_to_device(ctx_, d_rows_dev.data<float>(), d_rows.data(), T * 4)); !s) return s;
  ++pending_micro_batches_;  // from here on the gradients may hold part of this micro-batch
  if (auto s = step("head backward", head_backward(ctx_, c, w_, f.hidden, f.batch.targets, params, d_rows_dev, d_hidden, g_,
                                                   options_.logprob_chunk_rows, f.logits.view()));
      !s)
    return s;
  return step("backward", model_backward(ctx_, c, w_, f.batch.view(), f.act, d_hidden, g_));
}

result<ops::pg_loss_metrics> gemma4_train_engine::train_micro_batch(const train_micro_batch_data& mb,
                                                                 const ops::pg_loss_settings& loss,
                                                                 const global_counts& counts,
                                                                 const ops::sampling_params& params) {
  const std::size_t n = mb.sequences.tokens.size();
  if (auto s = check_resident("train_micro_batch"); !s) return s;
  if (auto s = check_micro_batch_sizes("gemma4_train_engine", mb, loss); !s) return s;
  if (auto s = check_batch("train_micro_batch", mb.sequences); !s) return s;
  auto f = forward_micro_batch("train_micro_batch", mb.sequences, params);
  if (!f) return f.error();
  const std::vector<float> lp_cur = to_token_frame(mb.sequences, f->rows);
  std::vector<float> d_lp(n, 0.0f);

  // The loss runs on the host: one value per token, in and out.
  const auto T = static_cast<std::int64_t>(n);
  const exec_context host = exec_context::cpu();
  const ops::pg_loss_inputs in = pg_loss_inputs_of(mb, lp_cur, counts);
  float loss_value = 0;
  ops::pg_loss_metrics metrics;
  auto step = [&](const char* what, status s) { return s ? s : fail(s.code(), std::string("train_micro_batch: ") + what + ": " + s.message()); };
  if (auto s = step("loss", ops::pg_loss_forward(host, in, loss, tensor(&loss_value, dtype::float32, {1}), &metrics)); !s) return s;
  if (!std::isfinite(loss_value))
    return fail(status_code::invalid_argument, "train_micro_batch: the loss is not finite (" + std::to_string(loss_value) +
                                                   "); no gradient was accumulated");
  if (auto s = step("loss backward", ops::pg_loss_backward(host, in, loss, 1.0, tensor(d_lp.data(), dtype::float32, {T}))); !s) return s;
  // Back to the head's frame: row r predicts token r + 1.
  std::vector<float> d_rows(n, 0.0f);
  for (std::size_t q = 0; q + 1 < mb.sequences.offsets.size(); ++q)
    for (std::int32_t t = mb.sequences.offsets[q] + 1; t < mb.sequences.offsets[q + 1]; ++t)
      d_rows[static_cast<std::size_t>(t) - 1] = d_lp[static_cast<std::size_t>(t)];
  if (auto s = backward_micro_batch("train_micro_batch", *f, d_rows, params); !s) return s;
  return metrics;
}

result<double> gemma4_train_engine::train_cross_entropy(const packed_sequences& batch, std::span<const float> mask,
                                                     std::int64_t global_tokens) {
  if (auto s = check_resident("train_cross_entropy"); !s) return s;
  if (global_tokens <= 0) return fail(status_code::invalid_argument, "train_cross_entropy: global_tokens must be > 0");
  if (auto s = check_batch("train_cross_entropy", batch); !s) return s;
  if (!mask.empty() && mask.size() != batch.tokens.size())
    return fail(status_code::invalid_argument, "train_cross_entropy: the mask holds " + std::to_string(mask.size()) +
                                                   " values for " + std::to_string(batch.tokens.size()) + " tokens");
  auto f = forward_micro_batch("train_cross_entropy", batch, {});
  if (!f) return f.error();
  std::vector<float> d_rows(batch.tokens.size(), 0.0f);
  double loss = 0;
  const float weight = -1.0f / static_cast<float>(global_tokens);
  for (std::size_t q = 0; q + 1 < batch.offsets.size(); ++q)
    for (std::int32_t t = batch.offsets[q]; t + 1 < batch.offsets[q + 1]; ++t) {
      // rows[t] is log p(token t + 1 | tokens up to t): the mask's weight of token t + 1.
      const auto at = static_cast<std::size_t>(t);
      const float m = mask.empty() ? 1.0f : mask[at + 1];
      if (m != 0.0f) loss -= static_cast<double>(m) * static_cast<double>(f->rows[at]);
      d_rows[at] = weight * m;
    }
  loss /= static_cast<double>(global_tokens);
  if (!std::isfinite(loss))
    return fail(status_code::invalid_argument, "train_cross_entropy: the loss is not finite; no gradient was accumulated");
  if (auto s = backward_micro_batch("train_cross_entropy", *f, d_rows, {}); !s) return s;
  return loss;
}

status gemma4_train_engine::set_learning_rate(double lr) {
  if (auto s = check_learning_rate("gemma4_train_engine", lr); !s) return s;
  options_.adamw.lr = lr;
  return status::ok();
}

void gemma4_train_engine::abandon_step() {
  zero_gradients();
  if (!group_ || state_ != train_memory_state::resident) return;  // offloaded: every rank refuses before the collective alike
  const std::int64_t n = source_.layout.total_elements;
  if (n == 0) return;
  const float nan = std::numeric_limits<float>::quiet_NaN();
  std::byte stored[4];
  convert_elements(&nan, dtype::float32, stored, weight_type(), 1);
  const auto bytes = static_cast<std::int64_t>(size_of(weight_type()));
  if (!copy_to_device(ctx_, flat(grads_, weight_type(), n).data(), stored, bytes)) return;  // a failed device fails the others' step anyway
  (void)optimizer_step();  // refuses the step here as on every rank, and zeroes the gradients
}

result<optimizer_result> gemma4_train_engine::optimizer_step() {
  if (auto s = check_resident("optimizer_step"); !s) {
    zero_gradients();
    return s;
  }
  const model_layout& layout = source_.layout;
  const std::int64_t n = layout.total_elements;
  if (group_) {
    void* g = flat(grads_, weight_type(), n).data();  // in the gradients' own dtype, on the group's device
    const auto count = static_cast<std::size_t>(n);
    const status reduced = weight_type() == dtype::bfloat16 ? group_->all_reduce(std::span<bfloat16>(static_cast<bfloat16*>(g), count))
                                                            : group_->all_reduce(std::span<float>(static_cast<float*>(g), count));
    if (auto s = reduced; !s) {
      zero_gradients();
      return fail(s.code(), "optimizer_step: gradient all-reduce over " + std::to_string(group_->size()) + " ranks: " + s.message());
    }
  }
  std::vector<double> sums(trainable_.size());
  if (status s = ops::sum_squares(ctx_, flat(grads_, weight_type(), n), trainable_ranges_, sums); !s) {
    zero_gradients();
    return fail(s.code(), "optimizer_step: gradient norm: " + s.message());
  }
  double sum_sq = 0;
  for (std::size_t k = 0; k < trainable_.size(); ++k) {
    if (!std::isfinite(sums[k])) {
      status refused = non_finite_gradient(trainable_[k]);
      zero_gradients();
      return refused;
    }
    sum_sq += sums[k];
  }
  const double norm = std::sqrt(sum_sq);
  ops::adamw_hyper hyper = options_.adamw;
  hyper.lr = scheduled_lr(options_, step_);
  hyper.step = step_ + 1;
  // Clipping scales the gradient inside the step (one pass over the optimizer state, not two).
  if (options_.max_grad_norm > 0 && norm > options_.max_grad_norm) hyper.grad_scale = options_.max_grad_norm / (norm + 1e-6);
  const bool separate_master = options_.master_dtype != weight_type();
  const dtype w_type = weight_type();
  const auto at = [](std::int64_t first, dtype t) { return first * static_cast<std::int64_t>(size_of(t)); };
  // One call per run of adjacent trainable tensors (an element-wise step: the same bits as tensor
  // by tensor, in tens of launches instead of hundreds); buffers (layer_scalar) take no step, not
  // even weight decay.
  status s;
  const auto step_range = [&](std::int64_t first, std::int64_t count) {
    const std::vector<std::int64_t> shape{count};
    const tensor weights = *weights_.view_of(at(first, w_type), w_type, shape);
    const tensor master =
        separate_master ? *master_.view_of(at(first, options_.master_dtype), options_.master_dtype, shape) : weights;
    return ops::adamw_step(ctx_, master, *grads_.view_of(at(first, w_type), w_type, shape),
                           *exp_avg_.view_of(at(first, options_.first_moment_dtype), options_.first_moment_dtype, shape),
                           *exp_avg_sq_.view_of(at(first, options_.second_moment_dtype), options_.second_moment_dtype, shape),
                           hyper, separate_master ? weights : tensor{});
  };
  std::int64_t run_first = 0, run_count = 0;
  for (const tensor_entry& e : layout.tensors) {
    if (!e.trainable) continue;
    if (run_count > 0 && e.offset_elements != run_first + run_count) {
      if (s = step_range(run_first, run_count); !s) break;
      run_count = 0;
    }
    if (run_count == 0) run_first = e.offset_elements;
    run_count += e.elements();
  }
  if (s && run_count > 0) s = step_range(run_first, run_count);
  zero_gradients();
  if (!s) return fail(s.code(), "optimizer_step: " + s.message());
  ++step_;
  return optimizer_result{norm, hyper.lr, step_};
}

void gemma4_train_engine::zero_gradients() {
  pending_micro_batches_ = 0;
  // A device that cannot zero memory fails the next op that runs on it, which reports it.
  if (grads_.state() == slab_state::resident)
    (void)fill_zero(ctx_, flat(grads_, weight_type(), source_.layout.total_elements).data(), grads_.bytes());
}

status gemma4_train_engine::export_bucket(const bucket_plan& plan, std::size_t index, std::span<std::byte> out) const {
  const auto width = static_cast<std::int64_t>(size_of(weight_type()));
  if (plan.total_bytes() != source_.layout.parameter_count * width)
    return fail(status_code::invalid_argument, "export_bucket: the plan covers " + std::to_string(plan.total_bytes()) +
                                                   " bytes, the manifest " + std::to_string(source_.layout.parameter_count * width));
  if (index >= plan.bucket_count())
    return fail(status_code::invalid_argument, "export_bucket: bucket " + std::to_string(index) + " of " + std::to_string(plan.bucket_count()));
  if (static_cast<std::int64_t>(out.size()) != plan.bucket_size(index))
    return fail(status_code::invalid_argument, "export_bucket: bucket " + std::to_string(index) + " holds " +
                                                   std::to_string(plan.bucket_size(index)) + " bytes, the buffer " + std::to_string(out.size()));
  const auto* base = static_cast<const std::byte*>(flat(weights_, weight_type(), source_.layout.total_elements).data());
  for (const bucket_piece& piece : plan.pieces(index)) {
    if (piece.entry >= manifest_.size() || piece.entry_offset + piece.bytes > manifest_[piece.entry].bytes())
      return fail(status_code::invalid_argument, "export_bucket: the plan does not match the manifest (a plan of another model?)");
    const std::int64_t at = source_.layout.tensors[piece.entry].offset_elements * width + piece.entry_offset;
    if (status s = copy_to_host(ctx_, out.data() + piece.bucket_offset, base + at, piece.bytes); !s)
      return fail(s.code(), "export_bucket: " + s.message());
  }
  return status::ok();
}

std::uint64_t gemma4_train_engine::weights_digest() const { return shared_weights().digest(ctx_); }

weight_source gemma4_train_engine::shared_weights() const {
  weight_source out;
  out.dev = weights_.dev();
  out.manifest = manifest_;
  out.tensors = slab_addresses(weights_, source_.layout);
  return out;
}

status gemma4_train_engine::save(const std::filesystem::path& directory) const {
  if (auto s = check_resident("save"); !s) return s;
  if (status s = wait_for_device(ctx_); !s) return fail(s.code(), "save: " + s.message());
  save_options o;
  o.type = dtype::float32;
  o.replace = true;
  o.extra_files = [this](const std::filesystem::path& partial) {
    std::vector<st_write_item> items;
    for (const auto& [prefix, moments, type] : {std::tuple{"exp_avg.", &exp_avg_, options_.first_moment_dtype},
                                                std::tuple{"exp_avg_sq.", &exp_avg_sq_, options_.second_moment_dtype}}) {
      for (std::size_t i = 0; i < source_.layout.tensors.size(); ++i) {
        const auto* base = static_cast<const std::byte*>(view_in(*moments, source_.layout.tensors[i], type)->data());
        items.push_back({std::string(prefix) + names_[i], st_dtype_of(type), source_.layout.tensors[i].shape,
                         [this, base](std::int64_t at, std::span<std::byte> out) {
                           return copy_to_host(ctx_, out.data(), base + at, static_cast<std::int64_t>(out.size()));
                         }});
      }
    }
    return write_st_file(partial / optimizer_file, items,
                         {{"format", "pt"}, {"optimizer", "adamw"}, {"step", std::to_string(step_)}});
  };
  // The most precise copy of the weights: a float32 master beside bfloat16 weights, else the weights.
  const bool master_is_finer = options_.master_dtype == dtype::float32 && weight_type() != dtype::float32;
  checkpoint as_saved = source_;
  if (master_is_finer)
    for (tensor_entry& t : as_saved.layout.tensors) t.type = dtype::float32;  // the master's layout: same element offsets
  auto r = save_checkpoint(as_saved, master_is_finer ? master_ : weights_, directory, o);
  if (!r) return fail(r.error().code(), "save: " + r.error().message());
  return status::ok();
}

status gemma4_train_engine::load(const std::filesystem::path& directory) {
  if (auto s = check_resident("load"); !s) return s;
  auto c = open_checkpoint(directory, dtype::float32);
  if (!c) return fail(c.error().code(), "load: " + c.error().message());
  if (c->layout.total_elements != source_.layout.total_elements || c->config.layers != source_.config.layers)
    return fail(status_code::invalid_argument, "load: " + directory.string() + " holds another model");
  for (std::size_t i = 0; i < c->layout.tensors.size(); ++i)
    if (c->layout.tensors[i].shape != source_.layout.tensors[i].shape ||
        c->layout.tensors[i].offset_elements != source_.layout.tensors[i].offset_elements)
      return fail(status_code::invalid_argument, "load: " + directory.string() + " holds another model (tensor " +
                                                     quote_name(names_[i]) + " differs)");
  auto weights = load_checkpoint(*c, ctx_.dev);
  if (!weights) return fail(weights.error().code(), "load: " + weights.error().message());
  auto opt = st_file::open(directory / optimizer_file);
  if (!opt) return fail(opt.error().code(), "load: " + opt.error().message());
  const std::int64_t n = source_.layout.total_elements;
  // Read everything into fresh slabs first; copy into the live ones (in place, so shared_weights()
  // stays valid) only once every check passed.
  auto m = slab::create("exp_avg", n * static_cast<std::int64_t>(size_of(options_.first_moment_dtype)), ctx_.dev);
  auto v = slab::create("exp_avg_sq", n * static_cast<std::int64_t>(size_of(options_.second_moment_dtype)), ctx_.dev);
  if (!m || !v) return (!m ? m : v).error();
  for (const auto& [prefix, moments, type] : {std::tuple{"exp_avg.", &*m, options_.first_moment_dtype},
                                              std::tuple{"exp_avg_sq.", &*v, options_.second_moment_dtype}}) {
    for (std::size_t i = 0; i < source_.layout.tensors.size(); ++i) {
      const tensor_entry& e = source_.layout.tensors[i];
      const std::string name = std::string(prefix) + names_[i];
      const st_tensor* st = opt->header().find(name);
      if (!st) return fail(status_code::invalid_argument, "load: " + opt->path().string() + ": missing tensor " + quote_name(name));
      const auto from = compute_dtype_of(st->type);
      if (!from || st->shape != e.shape)
        return fail(status_code::invalid_argument, "load: " + opt->path().string() + ": tensor " + quote_name(name) + ": " +
                                                       std::string(to_string(st->type)) + " " + shape_string(st->shape) +
                                                       ", expected " + shape_string(e.shape));
      if (status s = convert_to_device(ctx_, opt->data(*st).data(), *from, view_in(*moments, e, type)->data(), type, e.elements()); !s)
        return fail(s.code(), "load: " + opt->path().string() + ": tensor " + quote_name(name) + ": " + s.message());
    }
  }
  const auto step = opt->header().metadata.find("step");
  std::int64_t steps = -1;
  if (step != opt->header().metadata.end()) {
    try {
      steps = std::stoll(step->second);
    } catch (const std::exception&) {
    }
  }
  if (steps < 0) return fail(status_code::invalid_argument, "load: " + opt->path().string() + ": no valid step count in its metadata");
  // Every check passed: take it all (in place: shared_weights() stays valid).
  if (status s = wait_for_device(ctx_); !s) return fail(s.code(), "load: " + s.message());
  // The saved float32 values go to the master when it is separate (rounded to its dtype), then
  // the weights are the master in their own dtype; else straight to the weights.
  const bool separate = options_.master_dtype != weight_type();
  const tensor saved = flat(*weights, dtype::float32, n);
  const tensor target = separate ? flat(master_, options_.master_dtype, n) : flat(weights_, weight_type(), n);
  status took = converted_on_device(saved, target, n);
  if (took && separate) took = converted_on_device(target, flat(weights_, weight_type(), n), n);
  if (!took) return fail(took.code(), "load: " + took.message());
  exp_avg_ = std::move(*m);
  exp_avg_sq_ = std::move(*v);
  step_ = steps;
  zero_gradients();
  return status::ok();
}

gemma4_train_engine::memory_use gemma4_train_engine::memory() const {
  return {weights_.bytes(), grads_.bytes(), exp_avg_.bytes() + exp_avg_sq_.bytes() + master_.bytes(),
          static_cast<std::int64_t>(scratch_->high_water())};
}

std::vector<slab*> gemma4_train_engine::optimizer_slabs() {
  std::vector<slab*> out{&exp_avg_, &exp_avg_sq_};
  if (options_.master_dtype != weight_type()) out.push_back(&master_);  // a separate master
  return out;
}

status gemma4_train_engine::offload_state() {
  if (state_ == train_memory_state::offloaded) return status::ok();
  if (pending_micro_batches_ > 0)
    return fail(status_code::invalid_argument, "offload_state: gradients of " + std::to_string(pending_micro_batches_) +
                                                   " micro-batches are pending (optimizer_step() or zero_gradients() first)");
  if (status s = wait_for_device(ctx_); !s) return fail(s.code(), "offload_state: " + s.message());
  std::vector<slab*> done;
  for (slab* s : optimizer_slabs()) {
    if (status r = s->offload(); !r) {
      for (slab* back : done) (void)back->restore();  // undo: the previous state, resident
      return fail(r.code(), "offload_state: " + r.message());
    }
    done.push_back(s);
  }
  (void)grads_.release();
  scratch_->trim();
  state_ = train_memory_state::offloaded;
  // The activations' memory, kept for reuse between steps, goes back to the device too (the
  // state is offloaded either way; a failure here is the device's, and is reported).
  if (status r = release_cached_memory(ctx_); !r) return fail(r.code(), "offload_state: " + r.message());
  return status::ok();
}

status gemma4_train_engine::restore_state() {
  if (state_ == train_memory_state::resident) return status::ok();
  std::vector<slab*> all = optimizer_slabs();
  all.push_back(&grads_);
  for (slab* s : all)
    if (status r = s->restore(); !r) return fail(r.code(), "restore_state: " + r.message());  // the others stay restorable
  if (status s = wait_for_device(ctx_); !s) return fail(s.code(), "restore_state: " + s.message());
  auto g = bind_weights(source_.config, source_.layout, grads_);  // the gradient slab moved
  if (!g) return fail(g.error().code(), "restore_state: " + g.error().message());
  g_ = std::move(*g);
  state_ = train_memory_state::resident;
  return status::ok();
}

status gemma4_train_engine::round_weights_through_master() {
  if (options_.master_dtype == weight_type()) return status::ok();
  const std::int64_t n = source_.layout.total_elements;
  const tensor w = flat(weights_, weight_type(), n), master = flat(master_, options_.master_dtype, n);
  // The master is the weights in its dtype (rounded once when narrower); the weights then equal it.
  if (status s = converted_on_device(w, master, n); !s) return s;
  return converted_on_device(master, w, n);
}

status gemma4_train_engine::converted_on_device(const tensor& from, const tensor& to, std::int64_t n) const {
  if (from.type() == to.type()) return copy_on_device(ctx_, to.data(), from.data(), n * static_cast<std::int64_t>(size_of(from.type())));
  return convert_on_device(ctx_, from.data(), from.type(), to.data(), to.type(), n);
}

status gemma4_train_engine::non_finite_gradient(std::size_t i) {
  const tensor_entry& e = source_.layout.tensors[i];
  const dtype w = weight_type();
  const auto width = static_cast<std::int64_t>(size_of(w));
  const tensor grad = *grads_.view_of(e.offset_elements * width, w, std::vector<std::int64_t>{e.elements()});
  std::int64_t k = 0, found = -1;
  float value = 0;
  std::vector<float> values;
  if (status s = read_from_device(ctx_, grad.data(), e.elements() * width,
                                  [&](std::span<const std::byte> piece) {
                                    values.resize(piece.size() / static_cast<std::size_t>(width));
                                    convert_elements(piece.data(), w, values.data(), dtype::float32, static_cast<std::int64_t>(values.size()));
                                    for (std::size_t j = 0; j < values.size() && found < 0; ++j, ++k)
                                      if (!std::isfinite(values[j])) found = k, value = values[j];
                                  });
      !s)
    return fail(s.code(), "optimizer_step: reading the gradient of " + quote_name(names_[i]) + ": " + s.message());
  const std::string where = "element " + (found >= 0 ? std::to_string(found) + ": " + std::to_string(value)
                                                     : std::to_string(e.elements()) + ": overflow");  // the sum overflowed
  const std::string abandoned = group_ && group_->size() > 1
                                    ? " (after the all-reduce over " + std::to_string(group_->size()) +
                                          " ranks: a rank whose micro-batch failed abandons the step this way)"
                                    : "";
  return fail(status_code::invalid_argument, "optimizer_step: the gradient of " + quote_name(names_[i]) + " is not finite (" + where +
                                                 ")" + abandoned + "; the step is refused, the weights are unchanged");
}

}  // namespace tandem::gpu
