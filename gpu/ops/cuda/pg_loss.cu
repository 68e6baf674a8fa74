// The clipped policy-gradient loss on CUDA: one evaluator (the CPU's, per token in float32)
// gives every term and its derivative, so the forward and backward agree. Forward: block s walks
// sequence s twice (its masked count and seq-mask-tis log-ratio, then its tokens' terms), reduces
// them by fixed block trees in double and writes one record; a single block adds the records in a
// fixed order into the loss and the metrics. Backward: block s recomputes its sequence's count
// and keep flag, then writes its tokens' gradients.
#include "gpu/ops/cuda/pg_loss.h"

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>

#include "gpu/core/host_waits.h"
#include "gpu/ops/cuda/device_math.cuh"
#include "gpu/ops/cuda/launch.h"
#include "gpu/ops/op_check.h"
#include "gpu/ops/scratch.h"

namespace tandem::gpu::ops::cuda {
namespace {

constexpr int seq_threads = 256;
constexpr int finish_threads = 256;

/// The settings as the kernels read them (float32 constants as the CPU evaluator rounds them).
struct settings_dev {
  float lo, hi, c, is_min, is_max, in_clamp, out_clamp, beta;
  double is_min_d, is_max_d;
  bool dual, force_on_policy, kl, on_policy_kl, kl_weight_grad, token_level;
  importance_correction importance;
};

enum flag_bits : int { bad_offsets = 1, bad_mask = 2 };

/// One sequence's sums (the forward's per-block record).
struct seq_record {
  double pg, kl;
  double ratio_sum, ratio_clamped_sum, importance_weight_sum, mult_prob_error_sum, gen_kl_error_sum,
      approx_entropy_sum;
  double ratio_min, ratio_max, ratio_clamped_min, ratio_clamped_max;
  long long masked, clipped_low, clipped_high, clipped_dual, truncated;
  int kept;
};

/// The micro-batch's result, copied back for the metrics.
struct batch_record {
  double pg_loss, kl_penalty;
  double ratio_sum, ratio_clamped_sum, importance_weight_sum, mult_prob_error_sum, gen_kl_error_sum,
      approx_entropy_sum;
  double ratio_min, ratio_max, ratio_clamped_min, ratio_clamped_max;
  long long token_count, sequence_count, clipped_low, clipped_high, clipped_dual, truncated, masked_sequences;
  int flags;
};

struct inputs_dev {
  const float *cur, *prev, *gen, *adv, *mask, *ref;
  const std::int32_t* offsets;
  std::int64_t tokens, sequences;
};

enum class clip_kind : int { none, low, high, dual };

struct token_terms {
  float ratio = 0, ratio_clamped = 0;
  float pg = 0, d_pg = 0;
  float weight = 1, weight_metric = 0;
  float kl = 0, d_kl = 0;
  clip_kind clip = clip_kind::none;
  bool truncated = false;
};

/// std::clamp's semantics.
__device__ __forceinline__ float clampf(float v, float lo, float hi) { return v < lo ? lo : (hi < v ? hi : v); }

/// Token i's terms (gpu/ops/cpu/pg_loss.cpp's evaluator::token, in float32).
__device__ token_terms evaluate(const inputs_dev& in, const settings_dev& s, std::int64_t i, bool sequence_kept) {
  token_terms t;
  const float x = in.cur[i], prev = in.prev[i], gen = in.gen[i], a = in.adv[i];
  if (s.force_on_policy) {
    t.ratio = t.ratio_clamped = 1.f;
  } else {
    t.ratio = expf(x - prev);
    t.ratio_clamped = clampf(t.ratio, s.lo, s.hi);
  }
  const float unclipped = -a * t.ratio, clipped = -a * t.ratio_clamped;
  t.pg = unclipped;
  t.d_pg = -a * t.ratio;
  if (clipped > unclipped) {
    t.pg = clipped;
    t.d_pg = 0.f;
    t.clip = t.ratio < s.lo ? clip_kind::low : clip_kind::high;
  }
  if (s.dual && a < 0.f) {
    const float dual = -a * s.c;
    if (dual < t.pg) {
      t.pg = dual;
      t.d_pg = 0.f;
      t.clip = clip_kind::dual;
    }
  }
  float raw = expf(prev - gen);
  if (!isfinite(raw)) raw = 0.f;
  float w = raw;
  switch (s.importance) {
    case importance_correction::off:
    case importance_correction::plain: break;
    case importance_correction::tis:
      w = clampf(raw, s.is_min, s.is_max);
      t.truncated = raw > s.is_max || raw < s.is_min;
      break;
    case importance_correction::icepop:
      t.truncated = !(raw >= s.is_min && raw <= s.is_max);
      if (t.truncated) w = 0.f;
      break;
    case importance_correction::seq_mask_tis:
      t.truncated = !sequence_kept;
      if (t.truncated) w = 0.f;
      break;
  }
  t.weight_metric = w;
  t.weight = s.importance == importance_correction::off ? 1.f : w;
  if (s.kl) {
    float u = in.ref[i] - x, du = -1.f;
    if (u > s.in_clamp || u < -s.in_clamp) {
      u = clampf(u, -s.in_clamp, s.in_clamp);
      du = 0.f;
    }
    const float eu = expf(u);
    float k = eu - 1.f - u, dk = (eu - 1.f) * du;
    if (k > s.out_clamp || k < -s.out_clamp) {
      k = clampf(k, -s.out_clamp, s.out_clamp);
      dk = 0.f;
    }
    if (s.on_policy_kl) {
      float f = expf(x - gen);
      if (!isfinite(f)) f = 0.f;
      t.kl = f * k;
      t.d_kl = f * dk;
      if (s.kl_weight_grad) t.d_kl += f * k;
    } else {
      t.kl = k;
      t.d_kl = k + dk;
    }
  }
  return t;
}

// ---------------------------------------------------------------------------------------------
// block reductions (fixed trees)

template <class T, class Op>
__device__ __forceinline__ T block_reduce(T v, T identity, Op op, T* shared) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) v = op(v, __shfl_xor_sync(0xffffffffu, v, offset));
  if (lane == 0) shared[warp] = v;
  __syncthreads();
  T total = lane < warps ? shared[lane] : identity;
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) total = op(total, __shfl_xor_sync(0xffffffffu, total, offset));
  __syncthreads();
  return total;
}

struct plus_op {
  template <class T>
  __device__ T operator()(T a, T b) const { return a + b; }
};
struct min_op {
  __device__ double operator()(double a, double b) const { return fmin(a, b); }
};
struct max_op {
  __device__ double operator()(double a, double b) const { return fmax(a, b); }
};

__device__ __forceinline__ double sum_d(double v, double* sh) { return block_reduce(v, 0.0, plus_op{}, sh); }
__device__ __forceinline__ long long sum_ll(long long v, long long* sh) { return block_reduce(v, 0ll, plus_op{}, sh); }

/// Sequence s's token range, clamped into [0, tokens]; flags what the CPU would refuse.
__device__ __forceinline__ void sequence_range(const inputs_dev& in, std::int64_t s, std::int64_t& begin,
                                               std::int64_t& end, int* flags) {
  const std::int64_t b = in.offsets[s], e = in.offsets[s + 1];
  if ((b < 0 || e < b || e > in.tokens) && threadIdx.x == 0) atomicOr(flags, bad_offsets);
  begin = b < 0 ? 0 : (b > in.tokens ? in.tokens : b);
  end = e < begin ? begin : (e > in.tokens ? in.tokens : e);
}

/// The sequence's masked count and seq-mask-tis keep flag (the CPU's evaluator::sequence).
__device__ __forceinline__ void sequence_info(const inputs_dev& in, const settings_dev& s, std::int64_t begin,
                                              std::int64_t end, int* flags, long long& masked, bool& kept,
                                              double* sh_d, long long* sh_ll) {
  long long count = 0;
  double log_ratio = 0.0;
  bool mask_ok = true;
  for (std::int64_t i = begin + threadIdx.x; i < end; i += blockDim.x) {
    const float m = in.mask[i];
    mask_ok = mask_ok && (m == 0.f || m == 1.f);
    if (m == 0.f) continue;
    ++count;
    const double d = static_cast<double>(in.prev[i]) - static_cast<double>(in.gen[i]);
    log_ratio += isfinite(d) ? d : 0.0;
  }
  if (!mask_ok && flags) atomicOr(flags, bad_mask);
  masked = sum_ll(count, sh_ll);
  kept = true;
  if (s.importance == importance_correction::seq_mask_tis) {
    log_ratio = sum_d(log_ratio, sh_d);
    const double geo = exp(masked > 0 ? log_ratio / static_cast<double>(masked) : 0.0);
    kept = geo >= s.is_min_d && geo <= s.is_max_d;
  }
}

// ---------------------------------------------------------------------------------------------
// kernels

/// Block s: sequence s's record.
__global__ void __launch_bounds__(seq_threads) pg_sequence_kernel(inputs_dev in, settings_dev s,
                                                                  seq_record* __restrict__ records, int* flags) {
  __shared__ double sh_d[32];
  __shared__ long long sh_ll[32];
  const std::int64_t q = blockIdx.x;
  std::int64_t begin, end;
  sequence_range(in, q, begin, end, flags);
  long long masked;
  bool kept;
  sequence_info(in, s, begin, end, flags, masked, kept, sh_d, sh_ll);
  double pg = 0, kl = 0, r_sum = 0, rc_sum = 0, w_sum = 0, mpe = 0, gke = 0, ent = 0;
  double r_min = INFINITY, r_max = -INFINITY, rc_min = INFINITY, rc_max = -INFINITY;
  long long low = 0, high = 0, dual = 0, truncated = 0;
  for (std::int64_t i = begin + threadIdx.x; i < end; i += blockDim.x) {
    if (in.mask[i] == 0.f) continue;
    const token_terms t = evaluate(in, s, i, kept);
    pg += static_cast<double>(t.weight * t.pg);
    kl += static_cast<double>(t.kl);
    low += t.clip == clip_kind::low;
    high += t.clip == clip_kind::high;
    dual += t.clip == clip_kind::dual;
    truncated += t.truncated;
    const double r = t.ratio, rc = t.ratio_clamped;
    r_sum += r;
    r_min = fmin(r_min, r);
    r_max = fmax(r_max, r);
    rc_sum += rc;
    rc_min = fmin(rc_min, rc);
    rc_max = fmax(rc_max, rc);
    w_sum += static_cast<double>(t.weight_metric);
    const float prev = in.prev[i], gen = in.gen[i], x = in.cur[i];
    mpe += static_cast<double>(expf(fabsf(gen - prev)));
    // e^r - 1 - r cancels to ~r²/2: in double, as the CPU evaluates it.
    const double log_ratio = static_cast<double>(prev - gen);
    gke += exp(log_ratio) - 1.0 - log_ratio;
    ent += static_cast<double>(-expf(x - gen) * x);
  }
  seq_record rec;
  rec.pg = sum_d(pg, sh_d);
  rec.kl = sum_d(kl, sh_d);
  rec.ratio_sum = sum_d(r_sum, sh_d);
  rec.ratio_clamped_sum = sum_d(rc_sum, sh_d);
  rec.importance_weight_sum = sum_d(w_sum, sh_d);
  rec.mult_prob_error_sum = sum_d(mpe, sh_d);
  rec.gen_kl_error_sum = sum_d(gke, sh_d);
  rec.approx_entropy_sum = sum_d(ent, sh_d);
  rec.ratio_min = block_reduce(r_min, static_cast<double>(INFINITY), min_op{}, sh_d);
  rec.ratio_max = block_reduce(r_max, static_cast<double>(-INFINITY), max_op{}, sh_d);
  rec.ratio_clamped_min = block_reduce(rc_min, static_cast<double>(INFINITY), min_op{}, sh_d);
  rec.ratio_clamped_max = block_reduce(rc_max, static_cast<double>(-INFINITY), max_op{}, sh_d);
  rec.masked = masked;
  rec.clipped_low = sum_ll(low, sh_ll);
  rec.clipped_high = sum_ll(high, sh_ll);
  rec.clipped_dual = sum_ll(dual, sh_ll);
  rec.truncated = sum_ll(truncated, sh_ll);
  rec.kept = kept;
  if (threadIdx.x == 0) records[q] = rec;
}

/// One block: the records added in a fixed order (thread t takes sequences t, t + blockDim, ...,
/// then a block tree) into the loss and the batch record.
__global__ void __launch_bounds__(finish_threads) pg_finish_kernel(inputs_dev in, const seq_record* __restrict__ records,
                                                                   std::int64_t offset_count, bool token_level,
                                                                   double normaliser, double beta, bool kl,
                                                                   float* __restrict__ loss, batch_record* out,
                                                                   int* flags) {
  __shared__ double sh_d[32];
  __shared__ long long sh_ll[32];
  double pg = 0, klv = 0, r_sum = 0, rc_sum = 0, w_sum = 0, mpe = 0, gke = 0, ent = 0;
  double r_min = INFINITY, r_max = -INFINITY, rc_min = INFINITY, rc_max = -INFINITY;
  long long tokens = 0, sequences = 0, low = 0, high = 0, dual = 0, truncated = 0, masked_sequences = 0;
  for (std::int64_t q = threadIdx.x; q < in.sequences; q += blockDim.x) {
    const seq_record& r = records[q];
    if (r.masked == 0) continue;
    ++sequences;
    masked_sequences += !r.kept;
    const double per = token_level ? 1.0 : static_cast<double>(r.masked);
    pg += r.pg / per;
    klv += r.kl / per;
    tokens += r.masked;
    low += r.clipped_low;
    high += r.clipped_high;
    dual += r.clipped_dual;
    truncated += r.truncated;
    r_sum += r.ratio_sum;
    rc_sum += r.ratio_clamped_sum;
    w_sum += r.importance_weight_sum;
    mpe += r.mult_prob_error_sum;
    gke += r.gen_kl_error_sum;
    ent += r.approx_entropy_sum;
    r_min = fmin(r_min, r.ratio_min);
    r_max = fmax(r_max, r.ratio_max);
    rc_min = fmin(rc_min, r.ratio_clamped_min);
    rc_max = fmax(rc_max, r.ratio_clamped_max);
  }
  batch_record b;
  b.pg_loss = sum_d(pg, sh_d) / normaliser;
  b.kl_penalty = kl ? sum_d(klv, sh_d) / normaliser : 0.0;
  b.ratio_sum = sum_d(r_sum, sh_d);
  b.ratio_clamped_sum = sum_d(rc_sum, sh_d);
  b.importance_weight_sum = sum_d(w_sum, sh_d);
  b.mult_prob_error_sum = sum_d(mpe, sh_d);
  b.gen_kl_error_sum = sum_d(gke, sh_d);
  b.approx_entropy_sum = sum_d(ent, sh_d);
  b.ratio_min = block_reduce(r_min, static_cast<double>(INFINITY), min_op{}, sh_d);
  b.ratio_max = block_reduce(r_max, static_cast<double>(-INFINITY), max_op{}, sh_d);
  b.ratio_clamped_min = block_reduce(rc_min, static_cast<double>(INFINITY), min_op{}, sh_d);
  b.ratio_clamped_max = block_reduce(rc_max, static_cast<double>(-INFINITY), max_op{}, sh_d);
  b.token_count = sum_ll(tokens, sh_ll);
  b.sequence_count = sum_ll(sequences, sh_ll);
  b.clipped_low = sum_ll(low, sh_ll);
  b.clipped_high = sum_ll(high, sh_ll);
  b.clipped_dual = sum_ll(dual, sh_ll);
  b.truncated = sum_ll(truncated, sh_ll);
  b.masked_sequences = sum_ll(masked_sequences, sh_ll);
  if (threadIdx.x == 0) {
    if (offset_count < 1 || in.offsets[0] != 0 || in.offsets[offset_count - 1] != in.tokens) atomicOr(flags, bad_offsets);
    b.flags = *flags;
    *loss = static_cast<float>(b.pg_loss + beta * b.kl_penalty);
    *out = b;
  }
}

/// Block s: d_lp_cur over sequence s.
__global__ void __launch_bounds__(seq_threads) pg_backward_kernel(inputs_dev in, settings_dev s, double dloss,
                                                                  double normaliser, float* __restrict__ grad,
                                                                  bool accumulate) {
  __shared__ double sh_d[32];
  __shared__ long long sh_ll[32];
  const std::int64_t q = blockIdx.x;
  const std::int64_t b = in.offsets[q], e = in.offsets[q + 1];
  const std::int64_t begin = b < 0 ? 0 : (b > in.tokens ? in.tokens : b);
  const std::int64_t end = e < begin ? begin : (e > in.tokens ? in.tokens : e);
  long long masked;
  bool kept;
  sequence_info(in, s, begin, end, nullptr, masked, kept, sh_d, sh_ll);
  const double per = s.token_level ? 1.0 : static_cast<double>(masked > 1 ? masked : 1);
  const float scale = static_cast<float>(dloss / (per * normaliser));
  for (std::int64_t i = begin + threadIdx.x; i < end; i += blockDim.x) {
    float g = 0.f;
    if (in.mask[i] != 0.f) {
      const token_terms t = evaluate(in, s, i, kept);
      g = scale * (t.weight * t.d_pg + s.beta * t.d_kl);
    }
    grad[i] = accumulate ? grad[i] + g : g;
  }
}

// ---------------------------------------------------------------------------------------------
// host helpers

settings_dev settings_of(const pg_loss_settings& s) {
  settings_dev d;
  d.lo = static_cast<float>(1.0 - s.ratio_clip_min);
  d.hi = static_cast<float>(1.0 + s.ratio_clip_max);
  d.c = static_cast<float>(s.ratio_clip_c.value_or(0.0));
  d.is_min = static_cast<float>(s.is_ratio_min);
  d.is_max = static_cast<float>(s.is_ratio_max);
  d.in_clamp = static_cast<float>(s.kl_input_clamp);
  d.out_clamp = static_cast<float>(s.kl_output_clamp);
  d.beta = static_cast<float>(s.kl_beta);
  d.is_min_d = s.is_ratio_min;
  d.is_max_d = s.is_ratio_max;
  d.dual = s.ratio_clip_c.has_value();
  d.force_on_policy = s.force_on_policy_ratio;
  d.kl = s.kl_beta > 0;
  d.on_policy_kl = s.use_on_policy_kl_approximation;
  d.kl_weight_grad = s.kl_on_policy_weight_grad;
  d.token_level = s.token_level_loss;
  d.importance = s.importance;
  return d;
}

inputs_dev inputs_of(const pg_loss_inputs& in, const pg_loss_settings& s) {
  inputs_dev d;
  d.cur = in.lp_cur.as<const float>();
  d.prev = s.force_on_policy_ratio ? d.cur : in.lp_prev.as<const float>();
  d.gen = in.lp_gen.as<const float>();
  d.adv = in.advantages.as<const float>();
  d.mask = in.mask.as<const float>();
  d.ref = s.kl_beta > 0 ? in.lp_ref.as<const float>() : nullptr;
  d.offsets = in.seq_offsets.as<const std::int32_t>();
  d.tokens = in.lp_cur.dim(0);
  d.sequences = in.seq_offsets.dim(0) > 0 ? in.seq_offsets.dim(0) - 1 : 0;
  return d;
}

status float32_only(const char* op, dtype storage) {
  if (storage == dtype::float32) return status::ok();
  return {status_code::unsupported,
          std::string(op) + ": the CUDA backend computes the loss in float32 only, got " + std::string(to_string(storage))};
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// launchers

status pg_loss_forward(const exec_context& ctx, dtype storage, const pg_loss_inputs& in, const pg_loss_settings& settings,
                       const tensor& loss, pg_loss_metrics* metrics, bool* bad_values) {
  constexpr const char* op = "pg_loss_forward";
  TANDEM_RETURN_IF_ERROR(float32_only(op, storage));
  TANDEM_RETURN_IF_ERROR(use_device(ctx));
  const inputs_dev d = inputs_of(in, settings);
  const settings_dev s = settings_of(settings);
  // One span: the records, the batch record, the flags.
  const std::size_t records_bytes = (static_cast<std::size_t>(d.sequences) * sizeof(seq_record) + 255) / 256 * 256;
  const std::size_t batch_bytes = (sizeof(batch_record) + 255) / 256 * 256;
  auto scratch = op_scratch::get(ctx, op, records_bytes + batch_bytes + sizeof(int));
  if (!scratch) return scratch.error();
  auto* records = reinterpret_cast<seq_record*>(scratch->data());
  auto* batch = reinterpret_cast<batch_record*>(scratch->data() + records_bytes);
  auto* flags = reinterpret_cast<int*>(scratch->data() + records_bytes + batch_bytes);
  const cudaStream_t stream = stream_of(ctx);
  TANDEM_CUDA_CHECK(cudaMemsetAsync(flags, 0, sizeof(int), stream));
  if (d.sequences > 0) {
    pg_sequence_kernel<<<static_cast<unsigned>(d.sequences), seq_threads, 0, stream>>>(d, s, records, flags);
    TANDEM_RETURN_IF_ERROR(launch_status(op, "pg_sequence_kernel"));
  }
  const double normaliser = settings.token_level_loss ? in.global_token_count : in.global_sequence_count;
  pg_finish_kernel<<<1, finish_threads, 0, stream>>>(d, records, in.seq_offsets.dim(0), settings.token_level_loss,
                                                     normaliser, settings.kl_beta, s.kl, loss.as<float>(), batch, flags);
  TANDEM_RETURN_IF_ERROR(launch_status(op, "pg_finish_kernel"));
  if (bad_values) *bad_values = false;
  if (metrics == nullptr) return status::ok();
  batch_record b;
  {  // the wait covers the copy: into pageable memory it returns once done
    const host_wait waiting;
    TANDEM_CUDA_CHECK(cudaMemcpyAsync(&b, batch, sizeof(b), cudaMemcpyDeviceToHost, stream));
    TANDEM_CUDA_CHECK(cudaStreamSynchronize(stream));  // the metrics are host values
  }
  if (bad_values) *bad_values = b.flags != 0;
  pg_loss_metrics& m = *metrics;
  m = pg_loss_metrics{};
  m.pg_loss = b.pg_loss;
  m.kl_penalty = b.kl_penalty;
  m.token_count = b.token_count;
  m.sequence_count = b.sequence_count;
  m.clipped_low = b.clipped_low;
  m.clipped_high = b.clipped_high;
  m.clipped_dual = b.clipped_dual;
  m.is_truncated_tokens = b.truncated;
  m.is_masked_sequences = b.masked_sequences;
  m.ratio_sum = b.ratio_sum;
  m.ratio_min = b.ratio_min;
  m.ratio_max = b.ratio_max;
  m.ratio_clamped_sum = b.ratio_clamped_sum;
  m.ratio_clamped_min = b.ratio_clamped_min;
  m.ratio_clamped_max = b.ratio_clamped_max;
  m.importance_weight_sum = b.importance_weight_sum;
  m.mult_prob_error_sum = b.mult_prob_error_sum;
  m.gen_kl_error_sum = b.gen_kl_error_sum;
  m.approx_entropy_sum = b.approx_entropy_sum;
  return status::ok();
}

status pg_loss_backward(const exec_context& ctx, dtype storage, const pg_loss_inputs& in, const pg_loss_settings& settings,
                        double dloss, const tensor& d_lp_cur, bool accumulate) {
  constexpr const char* op = "pg_loss_backward";
  TANDEM_RETURN_IF_ERROR(float32_only(op, storage));
  TANDEM_RETURN_IF_ERROR(use_device(ctx));
  const inputs_dev d = inputs_of(in, settings);
  if (d.sequences == 0) return status::ok();
  const double normaliser = settings.token_level_loss ? in.global_token_count : in.global_sequence_count;
  pg_backward_kernel<<<static_cast<unsigned>(d.sequences), seq_threads, 0, stream_of(ctx)>>>(
      d, settings_of(settings), dloss, normaliser, d_lp_cur.as<float>(), accumulate);
  return launch_status(op, "pg_backward_kernel");
}

}  // namespace tandem::gpu::ops::cuda
