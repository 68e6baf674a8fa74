// Linear layers: checks and dispatch to GEMM (OpenBLAS on the CPU, cuBLASLt on CUDA).
#include "gpu/ops/linear.h"

#include <utility>

#include <cstdio>

#include "gpu/ops/cpu/gemm.h"
#include "gpu/ops/cuda/linear.h"
#include "gpu/ops/dispatch.h"
#include "gpu/ops/op_check.h"
#if TANDEM_HAVE_CUDA
#include "gpu/ops/cuda/cublaslt_gemm.h"
#endif

namespace tandem::gpu::ops {

status linear_forward(const exec_context& ctx, const tensor& x, const tensor& w, const tensor& y, bool accumulate) {
  constexpr const char* op = "linear_forward";
  TANDEM_RETURN_IF_ERROR(expect_shape(x, op, "x", {any, any}));
  const std::int64_t n = x.dim(0), in = x.dim(1);
  TANDEM_RETURN_IF_ERROR(expect_shape(w, op, "w", {any, in}));
  const std::int64_t out = w.dim(0);
  TANDEM_RETURN_IF_ERROR(expect_shape(y, op, "y", {n, out}));
  TANDEM_RETURN_IF_ERROR(expect_type(w, op, "w", x.type()));
  TANDEM_RETURN_IF_ERROR(expect_type(y, op, "y", x.type()));
  TANDEM_RETURN_IF_ERROR(expect_same_device(w, x, op, "w"));
  TANDEM_RETURN_IF_ERROR(expect_same_device(y, x, op, "y"));
  return dispatch_float(ctx, op, x, [&](auto zero) {
    using T = decltype(zero);
    cpu::gemm<T>(false, true, n, out, in, T(1), x.as<T>(), in, w.as<T>(), in, accumulate ? T(1) : T(0), y.as<T>(), out);
    return status::ok();
  }, TANDEM_ON_CUDA(cuda::linear_forward(ctx, storage, x, w, y, accumulate)));
}

status linear_backward(const exec_context& ctx, const tensor& x, const tensor& w, const tensor& dy, const tensor& dx, const tensor& dw,
                       bool accumulate_dx) {
  constexpr const char* op = "linear_backward";
  TANDEM_RETURN_IF_ERROR(expect_shape(x, op, "x", {any, any}));
  const std::int64_t n = x.dim(0), in = x.dim(1);
  TANDEM_RETURN_IF_ERROR(expect_shape(w, op, "w", {any, in}));
  const std::int64_t out = w.dim(0);
  TANDEM_RETURN_IF_ERROR(expect_shape(dy, op, "dy", {n, out}));
  if (!dx.empty()) TANDEM_RETURN_IF_ERROR(expect_shape(dx, op, "dx", {n, in}));
  if (!dw.empty()) TANDEM_RETURN_IF_ERROR(expect_shape(dw, op, "dw", {out, in}));
  const std::pair<const tensor*, const char*> operands[] = {{&w, "w"}, {&dy, "dy"}, {&dx, "dx"}, {&dw, "dw"}};
  for (const auto& [t, name] : operands) {
    if (t->empty()) continue;
    TANDEM_RETURN_IF_ERROR(expect_type(*t, op, name, x.type()));
    TANDEM_RETURN_IF_ERROR(expect_same_device(*t, x, op, name));
  }
  return dispatch_float(ctx, op, x, [&](auto zero) {
    using T = decltype(zero);
    if (!dx.empty())
      cpu::gemm<T>(false, false, n, in, out, T(1), dy.as<T>(), out, w.as<T>(), in, accumulate_dx ? T(1) : T(0),
                   dx.as<T>(), in);
    if (!dw.empty()) cpu::gemm<T>(true, false, out, in, n, T(1), dy.as<T>(), out, x.as<T>(), in, T(1), dw.as<T>(), in);
    return status::ok();
  }, TANDEM_ON_CUDA(cuda::linear_backward(ctx, storage, x, w, dy, dx, dw, accumulate_dx)));
}

std::vector<std::string> linear_algorithm_choices() {
  std::vector<std::string> lines;
#if TANDEM_HAVE_CUDA
  for (const cuda::gemm_choice& c : cuda::gemm_choices()) {
    char times[96] = "";
    if (c.chosen_us > 0) std::snprintf(times, sizeof times, ": %.1f us, row-invariant %.1f us", c.chosen_us, c.reference_us);
    lines.push_back(c.shape + " at " + std::to_string(c.bucket) + " rows: " + std::to_string(c.equal) + " of " +
                    std::to_string(c.candidates) + " probed give the bits" +
                    (c.reference_row_invariant ? "" : " (the row-invariant algorithm itself does not at other rows)") +
                    "; " + c.chosen + times);
  }
#endif
  return lines;
}

}  // namespace tandem::gpu::ops
