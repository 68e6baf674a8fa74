// The op test harness: deterministic random inputs, closeness checks with per-dtype tolerances,
// float32-vs-float64 reference runs, and central finite differences in float64.
//
// How an op test reads (see tests/unit/gpu/ops/linear_test.cpp):
//   1. make float64 inputs with random_buffer(dtype::float64, shape, seed);
//   2. reference: run the op on float32 copies (converted(x, dtype::float32)) and on the float64
//      inputs; expect_close(f32_out, f64_out, tolerance_for(dtype::float32), "y");
//   3. gradients: pick random output weights g; loss = weighted_sum(y, g) recomputed from the
//      inputs' current values; run the backward with dy = g; check_gradient("x", x, loss, dx).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "gpu/core/host_buffer.h"
#include "gpu/core/status.h"

namespace tandem::test {

struct tolerance {
  double rtol;
  double atol;
};

/// float64 1e-12 / 1e-12, float32 2e-5 / 1e-6, bfloat16 1e-2 / 1e-2, float16 1e-3 / 1e-3.
tolerance tolerance_for(gpu::dtype type);

/// Uniform values in [lo, hi), the same for a given seed on every machine.
gpu::host_buffer random_buffer(gpu::dtype type, std::vector<std::int64_t> shape, std::uint64_t seed, double lo = -1.0,
                               double hi = 1.0);

/// Random int32 values in [lo, hi).
gpu::host_buffer random_indices(std::vector<std::int64_t> shape, std::uint64_t seed, std::int32_t lo, std::int32_t hi);

/// A copy in another floating dtype (float32, float64).
gpu::host_buffer converted(const gpu::host_buffer& b, gpu::dtype type);

/// Element i as a double, whatever the floating dtype.
double value_at(const gpu::host_buffer& b, std::int64_t i);
void set_value(const gpu::host_buffer& b, std::int64_t i, double v);

/// Boost assertions that |actual - expected| <= atol + rtol * |expected| element-wise; a failure
/// names `what`, the first bad index, both values and the count of bad elements.
void expect_close(const gpu::host_buffer& actual, const gpu::host_buffer& expected, tolerance tol,
                  const std::string& what);

/// Boost assertions that `s` is the refusal of float64 tensors on a CUDA context by `op`:
/// unsupported, "<op>: the CUDA backend stores float32 or bfloat16, ..." in a build with the
/// CUDA backend, "<op>: this build has no CUDA backend ..." in one without.
void expect_cuda_refuses_float64(const gpu::status& s, const std::string& op);

/// sum_i out[i] * weights[i] in float64: a scalar loss whose gradient with respect to out is weights.
double weighted_sum(const gpu::host_buffer& out, const gpu::host_buffer& weights);

/// Central differences (loss(x + h) - loss(x - h)) / 2h for up to `max_elements` elements of the
/// float64 `input` (spread over the tensor), compared with `analytic`; `loss` must recompute
/// everything from the input's current values.
void check_gradient(const std::string& what, const gpu::host_buffer& input, const std::function<double()>& loss,
                    const gpu::host_buffer& analytic, double step = 1e-6, tolerance tol = {1e-6, 1e-8},
                    int max_elements = 200);

}  // namespace tandem::test
