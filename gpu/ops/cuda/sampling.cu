// Sampling on CUDA: one block per row runs filter_row (token_filter_row.cuh), then the inverse CDF
// over the kept tokens in ascending id order. When filter_row gathered the row's top-k candidates
// in shared memory, over those (token_candidates.cuh: draw_candidates). Else over the row: each
// warp owns a contiguous segment of ids, sums its probabilities e_j / S (double, a warp scan per
// 32 ids), the segment offsets are added in warp order, and every warp looks for its first token
// with u < c in a second walk; the lowest such id wins (the last kept token when rounding leaves
// c below u everywhere).
#include "gpu/ops/cuda/sampling.h"

#include <climits>
#include <cstdint>
#include <algorithm>

#include "gpu/ops/cuda/device_math.cuh"
#include "gpu/ops/cuda/launch.h"
#include "gpu/ops/cuda/token_filter_row.cuh"
#include "gpu/ops/op_check.h"

namespace tandem::gpu::ops::cuda {
namespace {

using filter::row_threads;
using filter::row_warps;
using filter::warp_inclusive_d;

// ---------------------------------------------------------------------------------------------
// kernels

/// The token of the inverse CDF at u over the kept set of sh.row, ascending ids: c_j = (offset of
/// j's warp segment) + (running sum within the segment), the first j with u < c_j.
template <class S>
__device__ std::int64_t draw(const S* x, std::int64_t v, double u, filter::scratch& sh) {
  const filter::row_state& row = sh.row;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const std::int64_t seg = ((v + row_warps - 1) / row_warps + 31) / 32 * 32;
  const std::int64_t begin = warp * seg, end = begin + seg < v ? begin + seg : v;
  auto probability = [&](std::int64_t j, bool& kept) {
    kept = false;
    if (j >= end) return 0.0;
    const float xv = to_float(x[j]);
    kept = filter::is_kept(row, filter::rank_key(xv), j);
    return kept ? static_cast<double>(filter::token_weight(row, xv)) / row.sum : 0.0;
  };
  // A group of 32 ids with nothing kept adds zeros to the running sum: skipped, the same bits
  // (with top-k, almost every group of a large vocabulary).
  double run = 0.0;
  std::int64_t last = -1;
  for (std::int64_t base = begin; base < end; base += 32) {
    bool kept;
    const double p = probability(base + lane, kept);
    if (!__any_sync(0xffffffffu, kept)) continue;
    const double incl = warp_inclusive_d(p);
    run += __shfl_sync(0xffffffffu, incl, 31);
    if (kept) last = base + lane;
  }
  const unsigned long long last_code = static_cast<unsigned long long>(last + 1);
  unsigned long long best = last_code;
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) {
    const unsigned long long o = __shfl_xor_sync(0xffffffffu, best, offset);
    best = o > best ? o : best;
  }
  if (lane == 0) {
    sh.red_d[warp] = run;
    sh.red_u[warp] = best;
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    double acc = 0.0;
    unsigned long long last_kept = 0;
    for (int w = 0; w < row_warps; ++w) {
      const double total = sh.red_d[w];
      sh.red_d[w] = acc;
      acc += total;
      last_kept = sh.red_u[w] > last_kept ? sh.red_u[w] : last_kept;
    }
    sh.found = static_cast<std::int32_t>(last_kept) - 1;
  }
  __syncthreads();
  const double offset = sh.red_d[warp];
  run = 0.0;
  std::int64_t first = LLONG_MAX;
  for (std::int64_t base = begin; base < end; base += 32) {
    bool kept;
    const double p = probability(base + lane, kept);
    if (!__any_sync(0xffffffffu, kept)) continue;
    const double incl = warp_inclusive_d(p);
    const unsigned hit = __ballot_sync(0xffffffffu, kept && u < offset + (run + incl));
    if (hit) {
      first = base + __ffs(hit) - 1;
      break;
    }
    run += __shfl_sync(0xffffffffu, incl, 31);
  }
  if (lane == 0) sh.red_u[warp] = static_cast<unsigned long long>(first);
  __syncthreads();
  std::int64_t token = sh.found;
  for (int w = 0; w < row_warps; ++w) {
    const auto f = static_cast<std::int64_t>(sh.red_u[w]);
    if (f != LLONG_MAX) {
      token = f;
      break;
    }
  }
  __syncthreads();
  return token;
}

/// The rows of one launch and their coordinates, passed by value: 1000 x 32 bytes, within the
/// 32,764 bytes of arguments a kernel may take since CUDA 12.1 (sm_70 on), beside the others. A
/// decode step's rows then go in one launch whose blocks run side by side (launches of fewer rows
/// run one after the other, each a row's time long).
constexpr std::int64_t coordinate_chunk = 1000;
static_assert(sizeof(rng_coordinates) == 32);
struct chunk_coordinates {
  rng_coordinates at[coordinate_chunk];
  __device__ const rng_coordinates& operator[](std::int64_t r) const { return at[r]; }
};
/// Coordinates in device memory, from the launch's first row.
struct device_coordinates {
  const rng_coordinates* at;
  __device__ const rng_coordinates& operator[](std::int64_t r) const { return at[r]; }
};

/// Block r: tokens[r] drawn from row r's filtered distribution (greedy: its first-ranked token),
/// logprobs[r] its logprob there; the pointers start at the launch's first row.
template <class S, class O, class C>
__global__ void __launch_bounds__(row_threads, 2) sampling_kernel(const S* __restrict__ logits, std::int64_t v,
                                                                  filter::params p, bool greedy, const C coordinates,
                                                                  std::int32_t* __restrict__ tokens,
                                                                  O* __restrict__ logprobs) {
  __shared__ filter::scratch sh;
  extern __shared__ __align__(16) unsigned char dyn[];
  const std::int64_t r = blockIdx.x;
  const S* x = logits + r * v;
  const filter::bins b = filter::carve(dyn, p.use_p);
  filter::filter_row(x, v, p, b, sh, false, greedy);  // S as the scorer's
  if (!sh.row.finite) {
    if (threadIdx.x == 0) {
      tokens[r] = -1;
      logprobs[r] = filter::from_double<O>(NAN);
    }
    return;
  }
  std::int64_t token = sh.row.argmax;
  if (!greedy) {
    const double u = static_cast<double>(uniform_float(random_words(coordinates[r])[0]));
    token = sh.row.kept_count > 0 ? filter::draw_candidates(filter::candidates_of(b), u, sh) : draw(x, v, u, sh);
  }
  if (threadIdx.x == 0) {
    tokens[r] = static_cast<std::int32_t>(token);
    logprobs[r] = filter::from_double<O>(filter::token_logprob(sh.row, to_float(x[token]), token));
  }
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// launchers

status sampling_forward(const exec_context& ctx, dtype storage, const tensor& logits, const sampling_params& params,
                        const rng_coordinates* coordinates, bool on_device, const tensor& tokens, const tensor& logprobs) {
  constexpr const char* op = "sampling_forward";
  TANDEM_RETURN_IF_ERROR(use_device(ctx));
  const std::int64_t rows = logits.dim(0), v = logits.dim(1);
  if (rows == 0) return status::ok();
  const bool greedy = params.temperature == 0.0;
  sampling_params filtered = params;
  if (greedy) filtered.temperature = 1.0;  // greedy rows report their logprob at T = 1
  const filter::params p = filter::make_params(filtered, v);
  const std::size_t bytes = filter::dynamic_bytes(p.use_k, p.use_p);
  const cudaStream_t stream = stream_of(ctx);
  return with_storage(storage, op, [&](auto zero) -> status {
    using S = decltype(zero);
    auto launch = [&](auto out_zero) -> status {
      using O = decltype(out_zero);
      if (on_device) {  // one launch: a grid holds 2^31 - 1 rows
        if (rows > 0x7fffffffLL) return status{status_code::unsupported, std::string(op) + ": too many rows for one CUDA grid"};
        auto* kernel = &sampling_kernel<S, O, device_coordinates>;
        TANDEM_RETURN_IF_ERROR(filter::allow_dynamic_shared(kernel, bytes));
        kernel<<<static_cast<unsigned>(rows), row_threads, bytes, stream>>>(logits.as<const S>(), v, p, greedy,
                                                                            device_coordinates{coordinates},
                                                                            tokens.as<std::int32_t>(), logprobs.as<O>());
        return launch_status(op, "sampling_kernel");
      }
      auto* kernel = &sampling_kernel<S, O, chunk_coordinates>;
      TANDEM_RETURN_IF_ERROR(filter::allow_dynamic_shared(kernel, bytes));
      for (std::int64_t first = 0; first < rows; first += coordinate_chunk) {
        const std::int64_t count = std::min(coordinate_chunk, rows - first);
        chunk_coordinates chunk{};
        if (!greedy) std::copy(coordinates + first, coordinates + first + count, chunk.at);
        kernel<<<static_cast<unsigned>(count), row_threads, bytes, stream>>>(logits.as<const S>() + first * v, v, p, greedy, chunk,
                                                                             tokens.as<std::int32_t>() + first,
                                                                             logprobs.as<O>() + first);
        TANDEM_RETURN_IF_ERROR(launch_status(op, "sampling_kernel"));
      }
      return status::ok();
    };
    if (logprobs.type() == dtype::float32) return launch(float{});
    return launch(S{});
  });
}

}  // namespace tandem::gpu::ops::cuda
