// Linear layers on CUDA: each product is one cuBLASLt GEMM (cublaslt_gemm.h) in the row-major
// forms of the CPU path: y = x · wᵀ (the "TN" GEMM), dx = dy · w, dw += dyᵀ · x. No kernels of
// their own.
#include "gpu/ops/cuda/linear.h"

#include <cstdint>

#include "gpu/ops/cuda/cublaslt_gemm.h"
#include "gpu/ops/cuda/launch.h"
#include "gpu/ops/op_check.h"
#include "gpu/ops/scratch.h"

namespace tandem::gpu::ops::cuda {

// ---------------------------------------------------------------------------------------------
// launchers

status linear_forward(const exec_context& ctx, dtype storage, const tensor& x, const tensor& w, const tensor& y,
                      bool accumulate) {
  constexpr const char* op = "linear_forward";
  TANDEM_RETURN_IF_ERROR(use_device(ctx));
  const std::int64_t n = x.dim(0), in = x.dim(1), out = w.dim(0);
  if (n == 0 || out == 0) return status::ok();
  auto scratch = op_scratch::get(ctx, op, gemm_workspace_bytes);
  if (!scratch) return scratch.error();
  gemm_operands g;
  g.transpose_b = true;
  g.m = n, g.n = out, g.k = in;
  g.a = x.data(), g.lda = in;
  g.b = w.data(), g.ldb = in;
  g.c = y.data(), g.ldc = out;
  g.accumulate = accumulate;
  g.row_invariant = true;  // rows are tokens
  return gemm(ctx, op, storage, storage, g, scratch->data());
}

status linear_backward(const exec_context& ctx, dtype storage, const tensor& x, const tensor& w, const tensor& dy,
                       const tensor& dx, const tensor& dw, bool accumulate_dx) {
  constexpr const char* op = "linear_backward";
  TANDEM_RETURN_IF_ERROR(use_device(ctx));
  const std::int64_t n = x.dim(0), in = x.dim(1), out = w.dim(0);
  if (dx.empty() && dw.empty()) return status::ok();
  auto scratch = op_scratch::get(ctx, op, gemm_workspace_bytes);
  if (!scratch) return scratch.error();
  if (!dx.empty()) {  // dx [N, in] = dy [N, out] · w [out, in]
    gemm_operands g;
    g.m = n, g.n = in, g.k = out;
    g.a = dy.data(), g.lda = out;
    g.b = w.data(), g.ldb = in;
    g.c = dx.data(), g.ldc = in;
    g.accumulate = accumulate_dx;
    g.row_invariant = true;
    TANDEM_RETURN_IF_ERROR(gemm(ctx, op, storage, storage, g, scratch->data()));
  }
  if (!dw.empty()) {  // dw [out, in] += dyᵀ [out, N] · x [N, in]
    gemm_operands g;
    g.transpose_a = true;
    g.m = out, g.n = in, g.k = n;
    g.a = dy.data(), g.lda = out;
    g.b = x.data(), g.ldb = in;
    g.c = dw.data(), g.ldc = in;
    g.accumulate = true;
    TANDEM_RETURN_IF_ERROR(gemm(ctx, op, storage, storage, g, scratch->data()));
  }
  return status::ok();
}

}  // namespace tandem::gpu::ops::cuda
