// The CPU train engine over the model of gpu/model/.
#include "gpu/engine/cpu_train_engine.h"

#include <cmath>
#include <cstring>

#include "gpu/core/convert.h"
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

status fail(status_code code, const std::string& what) { return {code, "cpu_train_engine: " + what}; }

tensor flat(const slab& s, dtype type, std::int64_t elements) { return *s.view_of(0, type, std::vector<std::int64_t>{elements}); }

// Row r of the head predicts token r + 1: the token frame puts that value at r + 1, 0 at each
// sequence's first token.
std::vector<float> to_token_frame(const packed_sequences& s, const float* rows) {
  std::vector<float> out(s.tokens.size(), 0.0f);
  for (std::size_t q = 0; q + 1 < s.offsets.size(); ++q)
    for (std::int32_t t = s.offsets[q] + 1; t < s.offsets[q + 1]; ++t) out[static_cast<std::size_t>(t)] = rows[t - 1];
  return out;
}

}  // namespace

result<std::unique_ptr<cpu_train_engine>> cpu_train_engine::create(checkpoint source, const cpu_train_options& options,
                                                                   communicator* group) {
  if (source.layout.tensors.empty() || source.layout.tensors.front().type != dtype::float32)
    return fail(status_code::invalid_argument, "the checkpoint must be opened for float32 (open_checkpoint(dir, float32))");
  if (options.moment_dtype != dtype::float32 && options.moment_dtype != dtype::bfloat16)
    return fail(status_code::invalid_argument, "moments must be float32 or bfloat16, got " + std::string(to_string(options.moment_dtype)));
  if (options.logprob_chunk_rows <= 0 || !(options.max_grad_norm >= 0) || options.warmup_steps < 0 ||
      !(options.warmup_start_factor > 0 && options.warmup_start_factor <= 1))
    return fail(status_code::invalid_argument, "logprob_chunk_rows > 0, max_grad_norm >= 0, warmup_steps >= 0 and "
                                               "warmup_start_factor in (0, 1] are required");
  std::unique_ptr<cpu_train_engine> e(new cpu_train_engine());
  auto weights = load_checkpoint(source, device::cpu());
  if (!weights) return weights.error();
  e->weights_ = std::move(*weights);
  const std::int64_t n = source.layout.total_elements;
  auto grads = slab::create("gradients", n * 4, device::cpu());
  auto m = slab::create("exp_avg", n * static_cast<std::int64_t>(size_of(options.moment_dtype)), device::cpu());
  auto v = slab::create("exp_avg_sq", n * static_cast<std::int64_t>(size_of(options.moment_dtype)), device::cpu());
  if (!grads || !m || !v) return (!grads ? grads : !m ? m : v).error();
  e->grads_ = std::move(*grads);
  e->exp_avg_ = std::move(*m);
  e->exp_avg_sq_ = std::move(*v);
  e->source_ = std::move(source);
  e->options_ = options;
  e->group_ = group;
  auto w = bind_weights(e->source_.config, e->source_.layout, e->weights_);
  auto g = bind_weights(e->source_.config, e->source_.layout, e->grads_);
  if (!w || !g) return (!w ? w : g).error();
  e->w_ = std::move(*w);
  e->g_ = std::move(*g);
  const model_layout& layout = e->source_.layout;
  e->names_.resize(layout.tensors.size());
  for (std::size_t i = 0; i < layout.tensors.size(); ++i) e->names_[i] = hf_full_name(e->source_.config, layout.tensors[i]);
  for (const planned_tensor& p : e->source_.plan.tensors)
    if (p.role == tensor_role::text) e->names_[p.layout_index] = p.name;
  for (std::size_t i = 0; i < layout.tensors.size(); ++i)
    e->manifest_.push_back({e->names_[i], layout.tensors[i].shape, dtype::float32});
  return e;
}

status cpu_train_engine::check_batch(const char* op, const packed_sequences& batch) const {
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

result<std::vector<float>> cpu_train_engine::logprobs(const packed_sequences& batch, const ops::sampling_params& params) {
  if (auto s = check_batch("logprobs", batch); !s) return s;
  const packed_tokens b = pack_tokens(batch.tokens, batch.offsets);
  host_buffer rows(dtype::float32, {static_cast<std::int64_t>(batch.tokens.size())});
  if (auto s = forward_logprobs(source_.config, w_, b.view(), b.targets, params, rows, options_.logprob_chunk_rows); !s)
    return fail(s.code(), "logprobs: " + s.message());
  return to_token_frame(batch, rows.data<float>());
}

result<ops::pg_loss_metrics> cpu_train_engine::train_micro_batch(const train_micro_batch_data& mb,
                                                                 const ops::pg_loss_settings& loss,
                                                                 const global_counts& counts,
                                                                 const ops::sampling_params& params) {
  const std::size_t n = mb.sequences.tokens.size();
  if (auto s = check_micro_batch_sizes("cpu_train_engine", mb, loss); !s) return s;
  if (auto s = check_batch("train_micro_batch", mb.sequences); !s) return s;
  const model_config& c = source_.config;
  const packed_tokens b = pack_tokens(mb.sequences.tokens, mb.sequences.offsets);
  const auto T = static_cast<std::int64_t>(n);
  model_activations act;
  host_buffer hidden(dtype::float32, {T, c.hidden_size}), d_hidden(dtype::float32, {T, c.hidden_size});
  host_buffer rows(dtype::float32, {T}), d_rows(dtype::float32, {T});
  auto step = [&](const char* what, status s) { return s ? s : fail(s.code(), std::string("train_micro_batch: ") + what + ": " + s.message()); };
  if (auto s = step("forward", forward_for_backward(c, w_, b.view(), hidden, act, options_.recompute)); !s) return s;
  if (auto s = step("logprobs", head_logprobs(c, w_, hidden, b.targets, params, rows, options_.logprob_chunk_rows)); !s) return s;
  const std::vector<float> lp_cur = to_token_frame(mb.sequences, rows.data<float>());
  std::vector<float> d_lp(n, 0.0f);

  const ops::pg_loss_inputs in = pg_loss_inputs_of(mb, lp_cur, counts);
  float loss_value = 0;
  ops::pg_loss_metrics metrics;
  if (auto s = step("loss", ops::pg_loss_forward(in, loss, tensor(&loss_value, dtype::float32, {1}), &metrics)); !s) return s;
  if (!std::isfinite(loss_value))
    return fail(status_code::invalid_argument, "train_micro_batch: the loss is not finite (" + std::to_string(loss_value) +
                                                   "); no gradient was accumulated");
  if (auto s = step("loss backward", ops::pg_loss_backward(in, loss, 1.0, tensor(d_lp.data(), dtype::float32, {T}))); !s) return s;
  // Back to the head's frame: row r predicts token r + 1.
  for (std::size_t q = 0; q + 1 < mb.sequences.offsets.size(); ++q)
    for (std::int32_t t = mb.sequences.offsets[q] + 1; t < mb.sequences.offsets[q + 1]; ++t)
      d_rows.data<float>()[t - 1] = d_lp[static_cast<std::size_t>(t)];
  if (auto s = step("head backward", head_backward(c, w_, hidden, b.targets, params, d_rows, d_hidden, g_,
                                                   options_.logprob_chunk_rows));
      !s)
    return s;
  if (auto s = step("backward", model_backward(c, w_, b.view(), act, d_hidden, g_)); !s) return s;
  return metrics;
}

result<double> cpu_train_engine::train_cross_entropy(const packed_sequences& batch, std::int64_t global_tokens) {
  if (global_tokens <= 0) return fail(status_code::invalid_argument, "train_cross_entropy: global_tokens must be > 0");
  if (auto s = check_batch("train_cross_entropy", batch); !s) return s;
  const model_config& c = source_.config;
  const packed_tokens b = pack_tokens(batch.tokens, batch.offsets);
  const auto T = static_cast<std::int64_t>(batch.tokens.size());
  model_activations act;
  host_buffer hidden(dtype::float32, {T, c.hidden_size}), d_hidden(dtype::float32, {T, c.hidden_size});
  host_buffer rows(dtype::float32, {T}), d_rows(dtype::float32, {T});
  auto step = [&](const char* what, status s) { return s ? s : fail(s.code(), std::string("train_cross_entropy: ") + what + ": " + s.message()); };
  if (auto s = step("forward", forward_for_backward(c, w_, b.view(), hidden, act, options_.recompute)); !s) return s;
  if (auto s = step("logprobs", head_logprobs(c, w_, hidden, b.targets, {}, rows, options_.logprob_chunk_rows)); !s) return s;
  double loss = 0;
  const float weight = -1.0f / static_cast<float>(global_tokens);
  for (std::size_t q = 0; q + 1 < batch.offsets.size(); ++q)
    for (std::int32_t t = batch.offsets[q]; t + 1 < batch.offsets[q + 1]; ++t) {
      loss -= static_cast<double>(rows.data<float>()[t]);
      d_rows.data<float>()[t] = weight;
    }
  loss /= static_cast<double>(global_tokens);
  if (!std::isfinite(loss))
    return fail(status_code::invalid_argument, "train_cross_entropy: the loss is not finite; no gradient was accumulated");
  if (auto s = step("head backward", head_backward(c, w_, hidden, b.targets, {}, d_rows, d_hidden, g_, options_.logprob_chunk_rows)); !s)
    return s;
  if (auto s = step("backward", model_backward(c, w_, b.view(), act, d_hidden, g_)); !s) return s;
  return loss;
}

result<optimizer_result> cpu_train_engine::optimizer_step() {
  const model_layout& layout = source_.layout;
  const std::int64_t n = layout.total_elements;
  float* g = static_cast<float*>(flat(grads_, dtype::float32, n).data());
  if (group_) {
    if (auto s = group_->all_reduce(std::span<float>(g, static_cast<std::size_t>(n))); !s) {
      zero_gradients();
      return fail(s.code(), "optimizer_step: gradient all-reduce over " + std::to_string(group_->size()) + " ranks: " + s.message());
    }
  }
  double sum_sq = 0;
  for (std::size_t i = 0; i < layout.tensors.size(); ++i) {
    const tensor_entry& e = layout.tensors[i];
    if (!e.trainable) continue;
    const float* d = g + e.offset_elements;
    double part = 0;
    for (std::int64_t k = 0; k < e.elements(); ++k) part += static_cast<double>(d[k]) * d[k];
    if (!std::isfinite(part)) {
      std::int64_t k = 0;
      while (k < e.elements() && std::isfinite(d[k])) ++k;
      const std::string value = k < e.elements() ? std::to_string(d[k]) : "overflow";
      zero_gradients();
      return fail(status_code::invalid_argument, "optimizer_step: the gradient of " + quote_name(names_[i]) + " is not finite (element " +
                                                     std::to_string(k) + ": " + value + "); the step is refused, the weights are unchanged");
    }
    sum_sq += part;
  }
  const double norm = std::sqrt(sum_sq);
  const tensor grad = flat(grads_, dtype::float32, n);
  if (options_.max_grad_norm > 0 && norm > options_.max_grad_norm) {
    const double factor = options_.max_grad_norm / (norm + 1e-6);
    if (auto s = ops::scale_forward(grad.reshaped({1, n}), factor, grad.reshaped({1, n})); !s) return s;
  }
  const double warm = options_.warmup_steps > 0
                          ? options_.warmup_start_factor + (1.0 - options_.warmup_start_factor) *
                                                               static_cast<double>(std::min(step_, options_.warmup_steps)) /
                                                               static_cast<double>(options_.warmup_steps)
                          : 1.0;
  ops::adamw_hyper hyper = options_.adamw;
  hyper.lr = options_.adamw.lr * warm;
  hyper.step = step_ + 1;
  // Tensor by tensor: buffers (layer_scalar) take no step, not even weight decay.
  status s;
  for (const tensor_entry& e : layout.tensors) {
    if (!e.trainable) continue;
    const std::int64_t moment_at = e.offset_elements * static_cast<std::int64_t>(size_of(options_.moment_dtype));
    const std::vector<std::int64_t> shape{e.elements()};
    s = ops::adamw_step(*weights_.view_of(e.offset_elements * 4, dtype::float32, shape), *grads_.view_of(e.offset_elements * 4, dtype::float32, shape),
                        *exp_avg_.view_of(moment_at, options_.moment_dtype, shape), *exp_avg_sq_.view_of(moment_at, options_.moment_dtype, shape),
                        hyper);
    if (!s) break;
  }
  zero_gradients();
  if (!s) return fail(s.code(), "optimizer_step: " + s.message());
  ++step_;
  return optimizer_result{norm, hyper.lr, step_};
}

void cpu_train_engine::zero_gradients() { std::memset(flat(grads_, dtype::float32, source_.layout.total_elements).data(), 0, static_cast<std::size_t>(grads_.bytes())); }

status cpu_train_engine::export_bucket(const bucket_plan& plan, std::size_t index, std::span<std::byte> out) const {
  if (plan.total_bytes() != source_.layout.parameter_count * 4)
    return fail(status_code::invalid_argument, "export_bucket: the plan covers " + std::to_string(plan.total_bytes()) +
                                                   " bytes, the manifest " + std::to_string(source_.layout.parameter_count * 4));
  if (index >= plan.bucket_count())
    return fail(status_code::invalid_argument, "export_bucket: bucket " + std::to_string(index) + " of " + std::to_string(plan.bucket_count()));
  if (static_cast<std::int64_t>(out.size()) != plan.bucket_size(index))
    return fail(status_code::invalid_argument, "export_bucket: bucket " + std::to_string(index) + " holds " +
                                                   std::to_string(plan.bucket_size(index)) + " bytes, the buffer " + std::to_string(out.size()));
  const auto* base = static_cast<const std::byte*>(flat(weights_, dtype::float32, source_.layout.total_elements).data());
  for (const bucket_piece& piece : plan.pieces(index)) {
    if (piece.entry >= manifest_.size() || piece.entry_offset + piece.bytes > manifest_[piece.entry].bytes())
      return fail(status_code::invalid_argument, "export_bucket: the plan does not match the manifest (a plan of another model?)");
    const std::int64_t at = source_.layout.tensors[piece.entry].offset_elements * 4 + piece.entry_offset;
    std::memcpy(out.data() + piece.bucket_offset, base + at, static_cast<std::size_t>(piece.bytes));
  }
  return status::ok();
}

std::uint64_t cpu_train_engine::weights_digest() const {
  std::uint64_t h = 1469598103934665603ull;
  for (const tensor_entry& e : source_.layout.tensors) {
    const auto* p = static_cast<const unsigned char*>(view_in(weights_, e, dtype::float32)->data());
    for (std::int64_t i = 0; i < e.bytes(); ++i) h = (h ^ p[i]) * 1099511628211ull;
  }
  return h;
}

status cpu_train_engine::save(const std::filesystem::path& directory) const {
  save_options o;
  o.type = dtype::float32;
  o.replace = true;
  o.extra_files = [this](const std::filesystem::path& partial) {
    std::vector<st_write_item> items;
    const std::size_t msize = size_of(options_.moment_dtype);
    for (const char* which : {"exp_avg.", "exp_avg_sq."}) {
      const slab& s = std::string(which) == "exp_avg." ? exp_avg_ : exp_avg_sq_;
      for (std::size_t i = 0; i < source_.layout.tensors.size(); ++i) {
        const tensor_entry& e = source_.layout.tensors[i];
        const auto* base = static_cast<const std::byte*>(s.view_of(0, options_.moment_dtype, std::vector<std::int64_t>{1})->data()) +
                           e.offset_elements * static_cast<std::int64_t>(msize);
        items.push_back({std::string(which) + names_[i], st_dtype_of(options_.moment_dtype), e.shape,
                         [base](std::int64_t at, std::span<std::byte> out) {
                           std::memcpy(out.data(), base + at, out.size());
                           return status::ok();
                         }});
      }
    }
    return write_st_file(partial / optimizer_file, items,
                         {{"format", "pt"}, {"optimizer", "adamw"}, {"step", std::to_string(step_)}});
  };
  auto r = save_checkpoint(source_, weights_, directory, o);
  if (!r) return fail(r.error().code(), "save: " + r.error().message());
  return status::ok();
}

status cpu_train_engine::load(const std::filesystem::path& directory) {
  auto c = open_checkpoint(directory, dtype::float32);
  if (!c) return fail(c.error().code(), "load: " + c.error().message());
  if (c->layout.total_elements != source_.layout.total_elements || c->config.layers != source_.config.layers)
    return fail(status_code::invalid_argument, "load: " + directory.string() + " holds another model");
  auto weights = load_checkpoint(*c, device::cpu());
  if (!weights) return fail(weights.error().code(), "load: " + weights.error().message());
  auto opt = st_file::open(directory / optimizer_file);
  if (!opt) return fail(opt.error().code(), "load: " + opt.error().message());
  const std::int64_t n = source_.layout.total_elements;
  const std::size_t msize = size_of(options_.moment_dtype);
  auto m = slab::create("exp_avg", n * static_cast<std::int64_t>(msize), device::cpu());
  auto v = slab::create("exp_avg_sq", n * static_cast<std::int64_t>(msize), device::cpu());
  if (!m || !v) return (!m ? m : v).error();
  for (const char* which : {"exp_avg.", "exp_avg_sq."}) {
    const slab& s = std::string(which) == "exp_avg." ? *m : *v;
    auto* base = static_cast<std::byte*>(s.view_of(0, options_.moment_dtype, std::vector<std::int64_t>{1})->data());
    for (std::size_t i = 0; i < source_.layout.tensors.size(); ++i) {
      const tensor_entry& e = source_.layout.tensors[i];
      const std::string name = std::string(which) + names_[i];
      const st_tensor* t = opt->header().find(name);
      if (!t) return fail(status_code::invalid_argument, "load: " + opt->path().string() + ": missing tensor " + quote_name(name));
      const auto from = compute_dtype_of(t->type);
      if (!from || t->shape != e.shape)
        return fail(status_code::invalid_argument, "load: " + opt->path().string() + ": tensor " + quote_name(name) + ": " +
                                                       std::string(to_string(t->type)) + " " + shape_string(t->shape) + ", expected " +
                                                       shape_string(e.shape));
      convert_elements(opt->data(*t).data(), *from, base + e.offset_elements * static_cast<std::int64_t>(msize),
                       options_.moment_dtype, e.elements());
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
  auto w = bind_weights(c->config, c->layout, *weights);
  if (!w) return w.error();
  // Every check passed: take it all.
  weights_ = std::move(*weights);
  w_ = std::move(*w);
  exp_avg_ = std::move(*m);
  exp_avg_sq_ = std::move(*v);
  source_ = std::move(*c);
  step_ = steps;
  zero_gradients();
  return status::ok();
}

}  // namespace tandem::gpu
