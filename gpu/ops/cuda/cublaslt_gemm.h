// Row-major GEMM on CUDA through cuBLASLt, shared by the CUDA ops (linear, the MoE router and
// experts): C [m, n] = op(A) [m, k] · op(B) [k, n] (+ C when accumulating), op(X) = X or Xᵀ,
// computed in true float32 (CUBLAS_COMPUTE_32F: no TF32). A and B are float32 or bfloat16 (the
// same dtype); C is float32 or A's dtype (bfloat16 inputs with a float32 result are allowed).
//
// Deterministic: one cublasLtHandle_t per device (created once, shared by every thread), the
// heuristic's first algorithm for the shape, its ld's, the pointers' alignments and the workspace
// size (cached per such key), and no split-K reduction other than a separate float32 pass
// (CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE; the in-place and output-type schemes are excluded). The
// same call gives the same bits on the same GPU model.
//
// Row-invariant calls (gemm_operands::row_invariant, for GEMMs whose rows are tokens): cuBLASLt
// picks other tiles and split-K factors for other row counts, so a token's bits would depend on
// how many tokens share its batch. A row-invariant call instead takes the algorithm the heuristic
// gives at row_invariant_rows rows, without split-K, whatever m is: row i of C is then the same
// bits whether A has 1 row or 100,000, as with the CPU GEMM's row blocks. That algorithm tiles a
// decode step's few rows into a handful of blocks, so up to 1024 rows a call takes, per power-of-
// two bucket of m, the fastest (timed at the first call's own shape and operands) of the row-
// invariant algorithm and those candidates that give its very bits on random operands of the
// call's k, at the bucket's row count and at two others within it: the heuristic's algorithms for
// the bucket and up to 256 configurations (tile, stage count) of cuBLASLt's other algorithms for
// the call's types, all without split-K. The choice is
// made once per shape and bucket, on the first call, with host waits: that call must not be in a
// stream capture (it fails with invalid_argument there; run the shape once outside the capture
// first). gemm_choices() lists the choices made, for reports.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "gpu/core/dtype.h"
#include "gpu/core/exec_context.h"
#include "gpu/core/status.h"

namespace tandem::gpu::ops::cuda {

/// The cuBLASLt workspace an op passes to gemm (a part of its one op_scratch span, 256-byte
/// aligned). Every call passes the same size, so the algorithm of a shape never changes.
constexpr std::size_t gemm_workspace_bytes = std::size_t{32} << 20;

/// One row-major GEMM. Leading dimensions are in elements; C must not overlap A or B.
struct gemm_operands {
  bool transpose_a = false;
  bool transpose_b = false;
  std::int64_t m = 0, n = 0, k = 0;
  const void* a = nullptr;  ///< [m, k] (or [k, m] when transposed), leading dimension lda
  std::int64_t lda = 0;
  const void* b = nullptr;  ///< [k, n] (or [n, k] when transposed), leading dimension ldb
  std::int64_t ldb = 0;
  void* c = nullptr;  ///< [m, n], leading dimension ldc
  std::int64_t ldc = 0;
  bool accumulate = false;  ///< C += op(A) · op(B); else C = op(A) · op(B)
  /// Row i of C does not depend on m (A not transposed): see the top of this file.
  bool row_invariant = false;
  /// Strided batches: `batch` products, the i-th over a + i·stride_a, b + i·stride_b and
  /// c + i·stride_c (elements), in one cuBLASLt call with the algorithm a single product of this
  /// shape takes (so batch i's bits are those of that single call on its operands; see gemm()).
  std::int64_t batch = 1;
  std::int64_t stride_a = 0, stride_b = 0, stride_c = 0;
};

/// A float32 product sums k in blocks of this many terms, one cuBLASLt call each, the later ones
/// accumulating into C (a float32 C; a bfloat16 C is not asked of float32 inputs). A row-invariant
/// call's float32 kernel adds k's terms in one chain, so a sum's rounding grows with k; in blocks it
/// grows with the block, as in the CPU GEMM's k blocks. At E2B's query projection (k 1536, n 2048,
/// 79 rows) the product's distance from float64 went from 6.2e-7 to 2.8e-7 on an H100; PyTorch's
/// cuBLAS call measured 2.5-3.8e-7 at 16-79 rows (other algorithms at few rows) and 6.2e-7 at 4096,
/// as ours at every row count. Row-invariant calls stay so (every block is), and the order is fixed
/// (deterministic). The cost: C is read and written once more a block (64 flops a byte of that
/// traffic, a few times the H100's float32 balance), so a float32 product can take up to about a
/// third longer (not timed; the float32 path is for parity, not speed). Bfloat16 products are not
/// split: their inputs' rounding dominates. A multiple of 64, so a block's pointers keep the whole
/// call's alignment.
constexpr std::int64_t float32_k_block = 256;

/// The row count a row-invariant call's algorithm is chosen for (a training micro-batch's tokens).
constexpr std::int64_t row_invariant_rows = 4096;

/// Enqueues the GEMM on the context's stream (its device must be current). `ab` is A's and B's
/// dtype, `c_type` C's; `workspace` holds gemm_workspace_bytes. Errors name `op` and the cuBLASLt
/// call: device_error for a failed call, unsupported when no algorithm fits.
///
/// A batched call (g.batch > 1) takes the algorithm that gemm() gives one product of the shape (for
/// a row-invariant call: the bucket of g.m's choice, else the row-invariant algorithm itself) and
/// runs it over the batch in one launch: batch i gets the bits of that single product on its own
/// operands, which, row-invariant, are the bits of a single call with any other m. unsupported
/// when that algorithm does not run batched (cublasLtMatmulAlgoCheck), never another algorithm.
status gemm(const exec_context& ctx, std::string_view op, dtype ab, dtype c_type, const gemm_operands& g,
            void* workspace);

/// Makes gemm()'s choices for `g` (the algorithm, a row-invariant call's small-rows probe, the
/// descriptors) without enqueueing the product, so that a later call of that shape may be captured
/// in a CUDA graph: the choice waits for the device, which a capture cannot. The probe's timing
/// runs the product on g's own operands, so C must be writable memory of its shape. Not in a
/// capture (invalid_argument there when a choice is missing).
status gemm_prepare(const exec_context& ctx, std::string_view op, dtype ab, dtype c_type, const gemm_operands& g,
                    void* workspace);

/// One small-row algorithm choice (made once per shape and bucket; see cublaslt_gemm.cpp).
struct gemm_choice {
  std::string shape;          ///< as the errors name it: "A · Bᵀ with m 256, n 1536, k 12288, bfloat16 -> bfloat16"
  std::int64_t bucket = 0;    ///< rows
  int candidates = 0;         ///< configurations probed for bit-equality (the reference included)
  int equal = 0;              ///< of them giving the reference's bits (the reference included)
  std::vector<std::int64_t> rows_probed;  ///< the row counts each was run at (the bucket's first)
  /// Whether the row-invariant algorithm itself gave the same bits per row at each of them (if not,
  /// it alone is kept and nothing else is probed: a token's bits then depend on its batch).
  bool reference_row_invariant = true;
  /// The kept algorithm as cuBLASLt reads it back: "algo <id>, tile <name or id>, stages <name or
  /// id>", then ", cluster <id>", ", swizzle <n>", ", custom option <n>" where not 0 (cuBLASLt's
  /// names: a tile is rows x columns of its column-major C, n x m here; "undefined" where the
  /// algorithm picks its own, as the heuristic's sm90 ones may).
  std::string chosen;
  double chosen_us = 0;     ///< its time per run at the call's shape (0 when not timed: one candidate)
  double reference_us = 0;  ///< the row-invariant algorithm's, timed alike (0 when not timed)
};

/// Every choice made so far in this process, in the order made (thread-safe copy).
std::vector<gemm_choice> gemm_choices();

}  // namespace tandem::gpu::ops::cuda
