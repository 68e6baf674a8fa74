// Every op on every backend against the CPU float64 reference, in the manner of llama.cpp's
// test-backend-ops: a TABLE of cases per op (shapes and options), every backend under test runs
// every case, and each output of the case (forward outputs, and every gradient of a backward) is
// compared with the reference's by its normalised mean squared error
// NMSE = Σ (a − b)² / Σ b² against a per-op limit, plus an element-wise expect_close that catches
// a few wild elements the mean would dilute. A second table checks the float64 reference itself
// against INDEPENDENT formulas written out here in double: backend-vs-reference catches rounding,
// not formula errors.
//
// Backends. backends() lists the backends under test. This file builds twice: as part of the CPU
// unit tests with one backend, "cpu" (exec_context::cpu(), float32), and with
// TANDEM_BACKEND_OPS_ON_CUDA as the GPU test (CTest label gpu; skipped where no CUDA device is
// visible) with two: "cuda float32" and "cuda bfloat16" (device::cuda(0), a workspace, the default
// stream). A case never touches op memory directly: device_tensors allocates every tensor on the
// backend's device and copies it there and back with device_allocate / copy_to_device /
// copy_to_host (gpu/core/memory.h), so every backend runs every case unchanged. Saved statistics
// (inverse RMS, log-sum-exp) are float32 next to bfloat16 storage (device_tensors::stat).
//
// The reference of a backend is the CPU in float64 fed the very same input values: every floating
// input is rounded to the backend's dtype (or to a tensor's storage dtype, e.g. bfloat16 moments)
// before either runs, so the comparison measures the op's arithmetic, not input quantisation.
//
// Limits. float32 cases allow NMSE 1e-9 (float32 rounding gives ~1e-14; the margin absorbs
// reductions and ill-conditioned elements) and expect_close {rtol 1e-4, atol 1e-5} (looser than
// tolerance_for(float32) because sums over up to 65 terms of random sign lose absolute, not
// relative, precision near zero); looser limits are explained where a case sets them.
//
// bfloat16 storage: inputs, outputs and the intermediates an op stores are rounded to bfloat16
// (8 significant bits), arithmetic is float32. One rounding of an output is a relative error of at
// most 2^-9 (NMSE <= 4e-6); the limits, NMSE 1e-4 and expect_close {rtol 2e-2, atol 2e-2}, allow
// the few roundings an op makes (RoPE rotates with bf16 tables, attention rounds P before P·V) and
// outputs that are sums of terms of random sign. A case that needs more sets its own bfloat16
// tolerance, with the reason. Ops whose CUDA tensors are float32 only, or whose cases set every dtype themselves,
// run on the float32 backend alone; float32_only_ops() lists them.
//
// Independent formulas: linear (triple loop), embedding, rmsnorm and the residual norm, rope (frequencies, tables,
// pair rotation) and the norm before it, gelu_tanh / gated / fused, softcap, PLE, attention (masked softmax per
// sequence), the paged KV write and paged attention (through the block table), the MoE router
// and experts, logprobs and sampling (a sort-based filter), AdamW, pg_loss and the element-wise
// ops. Backward formulas are spelled out where they are one line;
// the rmsnorm, attention and MoE-router backwards are not re-derived here: their test files check
// every one of their gradients against central finite differences (rmsnorm_test, attention_test,
// moe_test), which is the independent check a backward needs.
//
// Adding an op: add its name to op_names() and at least one case to the table; the coverage test
// fails otherwise (it also scans gpu/ops/*.h for ops that op_names() lacks).
#include <boost/test/data/monomorphic.hpp>
#include <boost/test/data/test_case.hpp>
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <limits>
#include <numbers>
#include <numeric>
#include <optional>
#include <ostream>
#include <random>
#include <regex>
#include <set>
#include <span>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "support/cuda_context.h"
#include "gpu/core/exec_context.h"
#include "gpu/core/host_buffer.h"
#include "gpu/core/memory.h"
#include "gpu/core/philox.h"
#include "gpu/ops/adamw.h"
#include "gpu/ops/attention.h"
#include "gpu/ops/dispatch.h"
#include "gpu/ops/elementwise.h"
#include "gpu/ops/embedding.h"
#include "gpu/ops/gated_mlp.h"
#include "gpu/ops/linear.h"
#include "gpu/ops/logprobs.h"
#include "gpu/ops/moe.h"
#include "gpu/ops/paged_attention.h"
#include "gpu/ops/per_layer_input.h"
#include "gpu/ops/pg_loss.h"
#include "gpu/ops/rmsnorm.h"
#include "gpu/ops/rope.h"
#include "gpu/ops/sampling.h"
#include "gpu/ops/softcap.h"
#include "gpu/ops/sum_squares.h"
#include "support/op_harness.h"

using namespace tandem::gpu;
using namespace tandem::test;
namespace bdata = boost::unit_test::data;

namespace {

using shape_t = std::vector<std::int64_t>;
constexpr double inf = std::numeric_limits<double>::infinity();

// ---------------------------------------------------------------------------------------------
// Backends and their memory.

/// A backend under test: where its ops run and the dtype its floating tensors are given in.
struct backend {
  std::string name;
  exec_context ctx;
  dtype compute;           ///< dtype of the floating tensors handed to the ops
  bool reference = false;  ///< the float64 reference of another backend
  dtype grid = compute;    ///< the reference: the dtype its inputs' values are rounded to first
};

std::ostream& operator<<(std::ostream& o, const backend& b) { return o << b.name; }

/// Every backend under test (see the file comment).
#if TANDEM_BACKEND_OPS_ON_CUDA
std::vector<backend> backends() {
  return {backend{"cuda float32", tandem::test::cuda::test_context(), dtype::float32},
          backend{"cuda bfloat16", tandem::test::cuda::test_context(), dtype::bfloat16}};
}
#else
std::vector<backend> backends() { return {backend{"cpu", exec_context::cpu(), dtype::float32}}; }
#endif

/// The CPU in float64, fed the values that `b`'s dtype represents.
backend reference_of(const backend& b) {
  return backend{"float64 reference of " + b.name, exec_context::cpu(), dtype::float64, true, b.compute};
}

void require_ok(const status& s) { BOOST_REQUIRE_MESSAGE(s.is_ok(), s.message()); }

/// The tensors of one case on one backend: allocated on its device, uploaded from float64 host
/// buffers, read back as float64 host buffers, freed with the case.
class device_tensors {
 public:
  explicit device_tensors(const backend& b) : b_(b) {}
  device_tensors(const device_tensors&) = delete;
  device_tensors& operator=(const device_tensors&) = delete;
  ~device_tensors() {
    for (void* p : blocks_) device_free(b_.ctx.dev, p);
  }

  /// A floating input in the compute dtype (the reference: float64 holding the values that the
  /// backend's dtype represents).
  tensor in(const host_buffer& x) { return in_stored(x, b_.reference ? b_.grid : b_.compute); }
  /// A floating input stored as `storage` on a backend (bfloat16 moments, say); the reference
  /// stores it in float64, rounded to `storage`'s values.
  tensor in_stored(const host_buffer& x, dtype storage) {
    const host_buffer on_grid = converted(x, storage);
    return upload(b_.reference ? converted(on_grid, dtype::float64) : on_grid);
  }
  /// Exactly this buffer, dtype and all, on every backend (int32 ids, the float32 inv_freq).
  tensor raw(const host_buffer& x) { return upload(x); }
  /// Zero-filled outputs of the same three kinds.
  tensor out(const shape_t& s) { return in(host_buffer(dtype::float64, s)); }
  tensor out_stored(const shape_t& s, dtype storage) { return in_stored(host_buffer(dtype::float64, s), storage); }
  tensor out_raw(const shape_t& s, dtype type) { return upload(host_buffer(type, s)); }
  /// A zero-filled saved statistic (inverse RMS, log-sum-exp): float32 next to float32 or
  /// bfloat16 storage, float64 on the reference (ops::statistics_type).
  tensor stat(const shape_t& s) { return out_stored(s, ops::statistics_type(b_.compute)); }

  /// A float64 host copy of `t` (integers too).
  host_buffer get(const tensor& t) {
    shape_t s;
    for (int i = 0; i < t.rank(); ++i) s.push_back(t.dim(i));
    host_buffer h(t.type(), s);
    require_ok(copy_to_host(b_.ctx.dev, h.data<void>(), t.data(), t.bytes()));
    return converted(h, dtype::float64);
  }

 private:
  tensor upload(const host_buffer& h) {
    const std::int64_t bytes = h.numel() * static_cast<std::int64_t>(size_of(h.type()));
    auto p = device_allocate(b_.ctx.dev, std::max<std::int64_t>(bytes, 1));
    BOOST_REQUIRE_MESSAGE(p.has_value(), "device_allocate on " << b_.ctx.dev.to_string() << " failed");
    blocks_.push_back(*p);
    require_ok(copy_to_device(b_.ctx.dev, *p, h.data<void>(), bytes));
    return tensor::contiguous(*p, h.type(), h.shape(), b_.ctx.dev);
  }

  const backend& b_;
  std::vector<void*> blocks_;
};

// ---------------------------------------------------------------------------------------------
// Cases and their outputs.

/// One output of a case, read back as float64.
struct output {
  std::string name;
  host_buffer value;
  bool exact = false;           ///< integers (indices, tokens, counts): equal values required
  double max_nmse = 0;          ///< 0: the case's limit
  std::vector<char> rows = {};  ///< empty: every element; else the dimension-0 rows compared
};
using outputs = std::vector<output>;

struct op_case {
  std::string op;     ///< the public function of gpu/ops/*.h
  std::string label;  ///< shapes and options
  double max_nmse;
  tolerance tol;
  std::function<outputs(const backend&)> run;  ///< builds its inputs from fixed seeds, runs, reads back
  std::optional<tolerance> bf16_tol;           ///< the bfloat16 backend's, when the default is too tight
};

std::ostream& operator<<(std::ostream& o, const op_case& c) { return o << c.op << " [" << c.label << "]"; }

constexpr double default_nmse = 1e-9;
constexpr tolerance default_tol{1e-4, 1e-5};

template <class... A>
std::string cat(const A&... a) {
  std::ostringstream o;
  (o << ... << a);
  return o.str();
}

class case_table {
 public:
  void add(std::string op, std::string label, std::function<outputs(const backend&)> run,
           double max_nmse = default_nmse, tolerance tol = default_tol, std::optional<tolerance> bf16_tol = {}) {
    cases.push_back({std::move(op), std::move(label), max_nmse, tol, std::move(run), bf16_tol});
  }
  /// A fresh block of 16 seeds: the table is built in a fixed order, so seeds are fixed too.
  std::uint64_t seed() { return next_ += 16; }
  std::vector<op_case> cases;

 private:
  std::uint64_t next_ = 1000;
};

/// Uniform float64 values in [lo, hi).
host_buffer f64(const shape_t& shape, std::uint64_t seed, double lo = -1.0, double hi = 1.0) {
  return random_buffer(dtype::float64, shape, seed, lo, hi);
}

host_buffer offsets_of(const std::vector<std::int32_t>& lengths) {
  std::vector<std::int32_t> cu{0};
  for (auto n : lengths) cu.push_back(cu.back() + n);
  return host_buffer::of<std::int32_t>({static_cast<std::int64_t>(cu.size())}, cu);
}

std::int32_t total(const std::vector<std::int32_t>& lengths) {
  return std::accumulate(lengths.begin(), lengths.end(), std::int32_t{0});
}

std::string lengths_string(const std::vector<std::int32_t>& lengths) {
  std::string s = "lengths {";
  for (std::size_t i = 0; i < lengths.size(); ++i) s += cat(i ? ", " : "", lengths[i]);
  return s + "}";
}

double* at(const host_buffer& b) { return b.data<double>(); }

// ---------------------------------------------------------------------------------------------
// Comparison.

/// NMSE over the selected elements; non-finite elements must be equal (-inf logprobs of masked
/// targets, the +-inf extrema of empty metrics) and are left out of the sums.
void compare(const output& got, const output& want, double max_nmse, tolerance tol) {
  BOOST_TEST_CONTEXT("output " << want.name) {
    BOOST_TEST_REQUIRE(got.name == want.name);
    BOOST_TEST_REQUIRE(got.value.numel() == want.value.numel());
    const std::int64_t n = want.value.numel();
    const std::int64_t rows = want.value.shape().empty() ? 1 : want.value.shape()[0];
    const std::int64_t row_size = rows > 0 ? n / rows : 0;
    const bool all_rows = want.rows.empty();
    std::vector<double> a, b;
    std::int64_t non_finite_mismatch = 0, first_mismatch = -1;
    for (std::int64_t i = 0; i < n; ++i) {
      if (!all_rows && !want.rows[static_cast<std::size_t>(i / row_size)]) continue;
      const double x = at(got.value)[i], y = at(want.value)[i];
      if (!std::isfinite(x) || !std::isfinite(y)) {
        if (!(x == y || (std::isnan(x) && std::isnan(y))) && non_finite_mismatch++ == 0) first_mismatch = i;
        continue;
      }
      a.push_back(x);
      b.push_back(y);
    }
    BOOST_TEST(non_finite_mismatch == 0,
               non_finite_mismatch << " non-finite elements differ, first at " << first_mismatch);
    if (want.exact) {
      std::int64_t bad = 0;
      for (std::size_t i = 0; i < a.size(); ++i) bad += a[i] != b[i];
      BOOST_TEST(bad == 0, bad << " of " << a.size() << " exact elements differ");
      return;
    }
    double num = 0, den = 0;
    for (std::size_t i = 0; i < a.size(); ++i) {
      num += (a[i] - b[i]) * (a[i] - b[i]);
      den += b[i] * b[i];
    }
    // A reference that is exactly zero everywhere (a gradient that cancels in exact arithmetic:
    // attention with window 1, a router with K = 1) has no scale to normalise by; the element
    // tolerance below (atol) judges such an output alone.
    if (den > 0) {
      const double nmse = num / den;
      BOOST_TEST(nmse <= max_nmse, "NMSE " << nmse << " above the limit " << max_nmse);
    }
    const auto size = static_cast<std::int64_t>(a.size());
    expect_close(host_buffer::of<double>({size}, a), host_buffer::of<double>({size}, b), tol, want.name);
  }
}

/// An independent formula's verdict on a float64 reference output: NMSE 1e-20 (double rounding
/// is ~1e-32; the margin covers reductions and exp/log) and expect_close at float64 tolerance.
void expect_formula(const host_buffer& got, const host_buffer& want, const std::string& what, double max_nmse = 1e-20,
                    tolerance tol = tolerance_for(dtype::float64)) {
  compare(output{what, converted(got, dtype::float64)}, output{what, converted(want, dtype::float64)}, max_nmse, tol);
}

// ---------------------------------------------------------------------------------------------
// Independent formulas in double, shared by the case inputs (tables, margins) and the formula
// checks. None calls an op.

double gelu(double x) {
  const double k = std::sqrt(2.0 / std::numbers::pi);
  return 0.5 * x * (1.0 + std::tanh(k * (x + 0.044715 * x * x * x)));
}

double gelu_derivative(double x) {
  const double k = std::sqrt(2.0 / std::numbers::pi), t = std::tanh(k * (x + 0.044715 * x * x * x));
  return 0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * k * (1.0 + 3.0 * 0.044715 * x * x);
}

/// HF's inverse frequencies: 1 / theta^(2j/d) for j < R (R = d/2, or int(prf * d // 2) when
/// proportional), 0 beyond, all divided by the factor.
std::vector<double> inv_freq_formula(const ops::rope_parameters& p, std::int64_t d) {
  const std::int64_t half = d / 2;
  const bool prop = p.kind == ops::rope_kind::proportional;
  const auto rotated =
      prop ? static_cast<std::int64_t>(std::floor(p.partial_rotary_factor * static_cast<double>(d) / 2)) : half;
  std::vector<double> f(static_cast<std::size_t>(half), 0.0);
  for (std::int64_t j = 0; j < rotated; ++j)
    f[static_cast<std::size_t>(j)] = 1.0 / std::pow(p.theta, static_cast<double>(2 * j) / static_cast<double>(d));
  for (double& v : f) v /= prop ? p.factor : 1.0;
  return f;
}

/// float32 angles float(pos) * float(inv_freq) (the op's documented angle), cos and sin in double,
/// each angle twice over: [n, 2 half].
std::pair<host_buffer, host_buffer> tables_formula(const host_buffer& positions, const std::vector<float>& inv_freq) {
  const std::int64_t n = positions.numel(), half = static_cast<std::int64_t>(inv_freq.size()), d = 2 * half;
  host_buffer c(dtype::float64, {n, d}), s(dtype::float64, {n, d});
  for (std::int64_t t = 0; t < n; ++t)
    for (std::int64_t j = 0; j < half; ++j) {
      const float angle = static_cast<float>(positions.data<std::int32_t>()[t]) * inv_freq[static_cast<std::size_t>(j)];
      at(c)[t * d + j] = at(c)[t * d + j + half] = std::cos(static_cast<double>(angle));
      at(s)[t * d + j] = at(s)[t * d + j + half] = std::sin(static_cast<double>(angle));
    }
  return {c, s};
}

std::vector<float> as_float(const std::vector<double>& v) { return {v.begin(), v.end()}; }

host_buffer float_buffer(const std::vector<float>& v) {
  return host_buffer::of<float>({static_cast<std::int64_t>(v.size())}, v);
}

/// Rotation of each pair (x_j, x_{j+h}) by the angle of (cos, sin) row t; `inverse`: by -angle.
host_buffer rotate_pairs(const host_buffer& x, const host_buffer& c, const host_buffer& s, bool inverse) {
  const std::int64_t tokens = x.shape()[0], heads = x.shape()[1], d = x.shape()[2], h = d / 2;
  host_buffer y(dtype::float64, x.shape());
  for (std::int64_t t = 0; t < tokens; ++t)
    for (std::int64_t hd = 0; hd < heads; ++hd)
      for (std::int64_t j = 0; j < h; ++j) {
        const double a = at(x)[(t * heads + hd) * d + j], b = at(x)[(t * heads + hd) * d + j + h];
        const double co = at(c)[t * d + j], si = (inverse ? -1.0 : 1.0) * at(s)[t * d + j];
        at(y)[(t * heads + hd) * d + j] = a * co - b * si;
        at(y)[(t * heads + hd) * d + j + h] = a * si + b * co;
      }
  return y;
}

/// One row's distribution under sampling_params, by sorting (not gpu/ops/cpu/token_filter).
struct filtered {
  std::vector<double> logprob;  ///< -infinity outside the kept set P
  double entropy = 0;
  std::int64_t first = 0;  ///< the first-ranked token
  double margin = inf;     ///< how far the logits are from changing P (logit gap at top-k, mass gap at top-p)
};

filtered filter_formula(const double* x, std::int64_t v, const ops::sampling_params& p) {
  std::vector<std::int64_t> order(static_cast<std::size_t>(v));
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(),
            [&](std::int64_t a, std::int64_t b) { return x[a] > x[b] || (x[a] == x[b] && a < b); });
  filtered f;
  f.first = order[0];
  const double t = p.temperature;
  std::vector<double> e(static_cast<std::size_t>(v));
  for (std::int64_t j = 0; j < v; ++j) e[static_cast<std::size_t>(j)] = std::exp((x[j] - x[order[0]]) / t);
  const std::int64_t k = p.top_k > 0 && p.top_k < v ? p.top_k : v;
  if (k < v) f.margin = x[order[static_cast<std::size_t>(k - 1)]] - x[order[static_cast<std::size_t>(k)]];
  double sk = 0;
  for (std::int64_t r = 0; r < k; ++r) sk += e[static_cast<std::size_t>(order[static_cast<std::size_t>(r)])];
  std::vector<char> kept(static_cast<std::size_t>(v), 0);
  double before = 0, s = 0;
  for (std::int64_t r = 0; r < k; ++r) {
    const auto j = static_cast<std::size_t>(order[static_cast<std::size_t>(r)]);
    if (p.top_p < 1) f.margin = std::min(f.margin, std::abs(before / sk - p.top_p));
    if (p.top_p >= 1 || before < p.top_p * sk) {
      kept[j] = 1;
      s += e[j];
    }
    before += e[j];
  }
  f.logprob.assign(static_cast<std::size_t>(v), -inf);
  for (std::int64_t j = 0; j < v; ++j) {
    const auto i = static_cast<std::size_t>(j);
    if (!kept[i]) continue;
    f.logprob[i] = (x[j] - x[order[0]]) / t - std::log(s);
    const double q = e[i] / s;
    if (q > 0) f.entropy -= q * std::log(q);
  }
  return f;
}

/// The sampler's draw, spelled out: u from the row's Philox words, the first kept token (ascending
/// ids) whose cumulative probability exceeds u; margin = distance of u from the nearest step.
struct draw {
  std::int64_t token;
  double margin;
};

draw draw_formula(const filtered& f, const rng_coordinates& c) {
  const double u = static_cast<double>(uniform_float(random_words(c)[0]));
  double cum = 0, margin = inf;
  std::int64_t token = -1, last = f.first;
  for (std::size_t j = 0; j < f.logprob.size(); ++j) {
    if (!std::isfinite(f.logprob[j])) continue;
    cum += std::exp(f.logprob[j]);
    margin = std::min(margin, std::abs(u - cum));
    if (token < 0 && u < cum) token = static_cast<std::int64_t>(j);
    last = static_cast<std::int64_t>(j);
  }
  return {token < 0 ? last : token, margin};
}

std::vector<rng_coordinates> coordinates_for(std::int64_t rows) {
  std::vector<rng_coordinates> c(static_cast<std::size_t>(rows));
  for (std::int64_t r = 0; r < rows; ++r)
    c[static_cast<std::size_t>(r)] = {20261201,
                                      3,
                                      1,
                                      static_cast<std::uint32_t>(r / 4),
                                      static_cast<std::uint32_t>(r % 4),
                                      static_cast<std::uint32_t>(r + 11)};
  return c;
}

/// Rows whose kept set (and draw, for the sampler) is at least 1e-4 from flipping: only there is
/// the float64 reference's choice one a float32 backend must reproduce.
std::vector<char> unambiguous_rows(const host_buffer& logits, const ops::sampling_params& p, bool sampler) {
  const std::int64_t rows = logits.shape()[0], v = logits.shape()[1];
  const auto coords = coordinates_for(rows);
  std::vector<char> ok(static_cast<std::size_t>(rows), 0);
  const bool greedy = sampler && p.temperature == 0;
  ops::sampling_params q = p;
  if (greedy) q.temperature = 1.0;
  for (std::int64_t r = 0; r < rows; ++r) {
    const double* x = at(logits) + r * v;
    const filtered f = filter_formula(x, v, q);
    double margin = f.margin;
    if (greedy && v > 1) {
      std::vector<double> row(x, x + v);
      std::nth_element(row.begin(), row.begin() + 1, row.end(), std::greater<>());
      margin = std::min(margin, row[0] - row[1]);
    } else if (sampler) {
      margin = std::min(margin, draw_formula(f, coords[static_cast<std::size_t>(r)]).margin);
    }
    ok[static_cast<std::size_t>(r)] = margin > 1e-4;
  }
  return ok;
}

/// The router's probabilities for one token, spelled out: u = x / sqrt(mean x² + eps) ·
/// router_scale / sqrt(H), logits = proj · u, softmax.
std::vector<double> router_probs(const double* x, const double* scale, const double* proj, std::int64_t h,
                                 std::int64_t e, double eps, double* inv_rms = nullptr) {
  double sq = 0;
  for (std::int64_t i = 0; i < h; ++i) sq += x[i] * x[i];
  const double r = 1.0 / std::sqrt(sq / static_cast<double>(h) + eps);
  if (inv_rms) *inv_rms = r;
  std::vector<double> logit(static_cast<std::size_t>(e), 0.0);
  for (std::int64_t j = 0; j < e; ++j)
    for (std::int64_t i = 0; i < h; ++i)
      logit[static_cast<std::size_t>(j)] += proj[j * h + i] * x[i] * r * scale[i] / std::sqrt(static_cast<double>(h));
  const double m = *std::max_element(logit.begin(), logit.end());
  double z = 0;
  for (double& l : logit) z += (l = std::exp(l - m));
  for (double& l : logit) l /= z;
  return logit;
}

/// Experts sorted by descending probability (ties: lower index first).
std::vector<std::int64_t> ranked(const std::vector<double>& p) {
  std::vector<std::int64_t> order(p.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](std::int64_t a, std::int64_t b) {
    return p[static_cast<std::size_t>(a)] > p[static_cast<std::size_t>(b)];
  });
  return order;
}

struct router_inputs {
  host_buffer x, scale, proj, per_expert;
};

/// Router inputs whose top-k choice and slot order are at least 1e-3 in probability from flipping,
/// so every backend must pick the reference's experts: rows with a narrower gap are redrawn (from
/// further fixed seeds).
router_inputs make_router_inputs(std::int64_t n, std::int64_t h, std::int64_t e, std::int64_t k, std::uint64_t seed) {
  router_inputs in{host_buffer(dtype::float64, {n, h}), f64({h}, seed + 1, 0.5, 1.5), f64({e, h}, seed + 2, -2, 2),
                   f64({e}, seed + 3, 0.5, 1.5)};
  for (std::int64_t t = 0; t < n; ++t)
    for (std::uint64_t attempt = 0;; ++attempt) {
      const host_buffer row = f64({h}, seed + 100 + 1000 * static_cast<std::uint64_t>(t) + attempt);
      const auto p = router_probs(at(row), at(in.scale), at(in.proj), h, e, 1e-6);
      const auto order = ranked(p);
      double gap = inf;
      for (std::int64_t s = 0; s < std::min(k + 1, e) - 1; ++s)
        gap = std::min(gap, p[static_cast<std::size_t>(order[static_cast<std::size_t>(s)])] -
                                p[static_cast<std::size_t>(order[static_cast<std::size_t>(s + 1)])]);
      if (gap > 1e-3 || attempt == 50) {
        std::copy_n(at(row), h, at(in.x) + t * h);
        break;
      }
    }
  return in;
}

// ---------------------------------------------------------------------------------------------
// The case table, one function per header.

struct linear_dims {
  std::int64_t n, in, out;
};

void linear_cases(case_table& t, const std::vector<linear_dims>& shapes) {
  for (const linear_dims d : shapes) {
    const std::string label = cat("N ", d.n, ", in ", d.in, ", out ", d.out);
    const std::uint64_t s = t.seed();
    for (const bool accumulate : {false, true})
      t.add("linear_forward", label + (accumulate ? ", accumulate" : ""), [=](const backend& b) {
        device_tensors m(b);
        const tensor x = m.in(f64({d.n, d.in}, s)), w = m.in(f64({d.out, d.in}, s + 1));
        const tensor y = accumulate ? m.in(f64({d.n, d.out}, s + 2)) : m.out({d.n, d.out});
        require_ok(ops::linear_forward(b.ctx, x, w, y, accumulate));
        return outputs{{"y", m.get(y)}};
      });
    for (const int variant : {0, 1, 2})  // dx written, dx accumulated, dx skipped
      t.add("linear_backward",
            label + (variant == 0   ? ", dx and dw"
                     : variant == 1 ? ", accumulate dx"
                                    : ", dw only"),
            [=](const backend& b) {
              device_tensors m(b);
              const tensor x = m.in(f64({d.n, d.in}, s)), w = m.in(f64({d.out, d.in}, s + 1));
              const tensor dy = m.in(f64({d.n, d.out}, s + 3));
              const tensor dx = variant == 2 ? tensor{} : m.in(f64({d.n, d.in}, s + 4));
              const tensor dw = m.in(f64({d.out, d.in}, s + 5));  // weight gradients accumulate
              require_ok(ops::linear_backward(b.ctx, x, w, dy, dx, dw, variant == 1));
              outputs o{{"dw", m.get(dw)}};
              if (variant != 2) o.push_back({"dx", m.get(dx)});
              return o;
            });
  }
}

void embedding_cases(case_table& t) {
  struct dims {
    std::int64_t tokens, vocab, table_width, width, column_begin;
    double scale;
    std::optional<std::int32_t> padding;
  };
  for (const dims d : {dims{1, 1, 1, 1, 0, 1.0, std::nullopt}, dims{7, 17, 5, 5, 0, std::sqrt(5.0), 3},
                       dims{17, 5, 24, 8, 16, 2.0, 0}, dims{65, 33, 12, 6, 3, 0.125, std::nullopt}}) {
    const std::string label =
        cat("tokens ", d.tokens, ", vocab ", d.vocab, ", columns [", d.column_begin, ", ", d.column_begin + d.width,
            ") of ", d.table_width, ", scale ", d.scale, d.padding ? cat(", padding ", *d.padding) : std::string());
    const std::uint64_t s = t.seed();
    const auto ids = random_indices({d.tokens}, s, 0, static_cast<std::int32_t>(d.vocab));  // repeats ids
    t.add("embedding_forward", label, [=](const backend& b) {
      device_tensors m(b);
      const tensor out = m.out({d.tokens, d.width});
      require_ok(ops::embedding_forward(b.ctx, m.raw(ids), m.in(f64({d.vocab, d.table_width}, s + 1)), d.scale, out,
                                        d.column_begin));
      return outputs{{"out", m.get(out)}};
    });
    t.add("embedding_backward", label, [=](const backend& b) {
      device_tensors m(b);
      const tensor d_table = m.in(f64({d.vocab, d.table_width}, s + 2));  // accumulates
      require_ok(ops::embedding_backward(b.ctx, m.raw(ids), m.in(f64({d.tokens, d.width}, s + 3)), d.scale, d_table,
                                         d.padding, d.column_begin));
      return outputs{{"d_table", m.get(d_table)}};
    });
  }
}

struct rmsnorm_dims {
  std::int64_t rows, d;
  double magnitude;
};

void rmsnorm_cases(case_table& t, const std::vector<rmsnorm_dims>& shapes) {
  for (const rmsnorm_dims d : shapes) {
    for (const bool weight : {true, false}) {
      const std::string label =
          cat("rows ", d.rows, ", d ", d.d, ", |x| <= ", d.magnitude, weight ? ", weight" : ", scale-less");
      const std::uint64_t s = t.seed();
      const auto x = [=] { return f64({d.rows, d.d}, s, -d.magnitude, d.magnitude); };
      for (const bool in_place : {false, true})
        t.add("rmsnorm_forward", label + (in_place ? ", in place" : ""), [=](const backend& b) {
          device_tensors m(b);
          const tensor xt = m.in(x()), w = weight ? m.in(f64({d.d}, s + 1, 0.5, 1.5)) : tensor{};
          const tensor y = in_place ? xt : m.out({d.rows, d.d}), inv_rms = m.stat({d.rows});
          require_ok(ops::rmsnorm_forward(b.ctx, xt, w, 1e-6, y, inv_rms));
          return outputs{{"y", m.get(y)}, {"inv_rms", m.get(inv_rms)}};
        });
      for (const bool accumulate : {false, true})
        t.add("rmsnorm_backward", label + (accumulate ? ", accumulate dx" : ""), [=](const backend& b) {
          device_tensors m(b);
          const tensor xt = m.in(x()), w = weight ? m.in(f64({d.d}, s + 1, 0.5, 1.5)) : tensor{};
          const tensor y = m.out({d.rows, d.d}), inv_rms = m.stat({d.rows});
          require_ok(ops::rmsnorm_forward(b.ctx, xt, w, 1e-6, y, inv_rms));
          const tensor dx = accumulate ? m.in(f64({d.rows, d.d}, s + 2)) : m.out({d.rows, d.d});
          const tensor dw = weight ? m.in(f64({d.d}, s + 3)) : tensor{};
          require_ok(ops::rmsnorm_backward(b.ctx, xt, w, inv_rms, m.in(f64({d.rows, d.d}, s + 4)), dx, dw, accumulate));
          // d = 1: n = x · inv_rms = ±(1 − O(eps / x²)), so dx = inv_rms · dn · (1 − n²) is a
          // cancellation down to ~eps / x² ≈ 1e-6 that float32 resolves to ~10% only (the
          // reference's dx is ~1e-6, float32's is off by ~1e-7): NMSE 0.1 there, while the element
          // tolerance (atol 1e-5) still bounds it. The float32 formula's conditioning, not a bug.
          outputs o{{"dx", m.get(dx), false, d.d == 1 && !accumulate ? 0.1 : 0}};
          if (weight) o.push_back({"dw", m.get(dw)});
          return o;
        });
    }
  }
}

/// The options of a residual_norm_forward case: which optional tensors it gives.
struct residual_options {
  bool branch, scale, next, in_place;
};

std::string residual_label(std::int64_t rows, std::int64_t d, const residual_options& o) {
  return cat("rows ", rows, ", d ", d, o.branch ? ", branch" : "", o.scale ? ", scale" : "", o.next ? ", next norm" : "",
             o.in_place ? ", in place" : "");
}

/// Runs residual_norm_forward on m's tensors with the inputs of seed s; outputs in a fixed order.
outputs run_residual_norm(const backend& b, std::int64_t rows, std::int64_t d, const residual_options& o, std::uint64_t s) {
  device_tensors m(b);
  ops::residual_norm_io io;
  io.x = m.in(f64({rows, d}, s, -3, 3));
  io.w = m.in(f64({d}, s + 1, 0.5, 1.5));
  io.residual = m.in(f64({rows, d}, s + 2, -2, 2));
  io.out = o.in_place ? io.residual : m.out({rows, d});
  io.inv_rms = m.stat({rows});
  if (o.branch) io.branch = m.out({rows, d});
  if (o.scale) {
    io.scale = m.in(f64({1}, s + 3, 0.25, 2));
    io.pre_scale = m.out({rows, d});
  }
  if (o.next) {
    io.next_w = m.in(f64({d}, s + 4, 0.5, 1.5));
    io.next = m.out({rows, d});
    io.next_inv_rms = m.stat({rows});
  }
  require_ok(ops::residual_norm_forward(b.ctx, io, 1e-6));
  outputs out{{"out", m.get(io.out)}, {"inv_rms", m.get(io.inv_rms)}};
  if (o.branch) out.push_back({"branch", m.get(io.branch)});
  if (o.scale) out.push_back({"pre_scale", m.get(io.pre_scale)});
  if (o.next) {
    out.push_back({"next", m.get(io.next)});
    out.push_back({"next_inv_rms", m.get(io.next_inv_rms)});
  }
  return out;
}

/// The same through rmsnorm_forward, add_forward, scale_by_forward and rmsnorm_forward in turn.
outputs run_residual_norm_in_turn(const backend& b, std::int64_t rows, std::int64_t d, const residual_options& o,
                                  std::uint64_t s) {
  device_tensors m(b);
  const tensor x = m.in(f64({rows, d}, s, -3, 3)), w = m.in(f64({d}, s + 1, 0.5, 1.5));
  const tensor residual = m.in(f64({rows, d}, s + 2, -2, 2));
  const tensor branch = m.out({rows, d}), inv_rms = m.stat({rows}), sum = m.out({rows, d});
  require_ok(ops::rmsnorm_forward(b.ctx, x, w, 1e-6, branch, inv_rms));
  require_ok(ops::add_forward(b.ctx, residual, branch, sum));
  tensor out = sum;
  if (o.scale) {
    out = m.out({rows, d});
    require_ok(ops::scale_by_forward(b.ctx, sum, m.in(f64({1}, s + 3, 0.25, 2)), out));
  }
  outputs got{{"out", m.get(out)}, {"inv_rms", m.get(inv_rms)}};
  if (o.branch) got.push_back({"branch", m.get(branch)});
  if (o.scale) got.push_back({"pre_scale", m.get(sum)});
  if (o.next) {
    const tensor next = m.out({rows, d}), next_inv = m.stat({rows});
    require_ok(ops::rmsnorm_forward(b.ctx, out, m.in(f64({d}, s + 4, 0.5, 1.5)), 1e-6, next, next_inv));
    got.push_back({"next", m.get(next)});
    got.push_back({"next_inv_rms", m.get(next_inv)});
  }
  return got;
}

/// Shapes of the residual cases: one element; odd widths (the scalar path on CUDA); widths of
/// whole 16-byte vectors at one to eight vectors a thread (the vector path, 32 to 256 threads a
/// row); Gemma 4 E2B's hidden size.
struct residual_dims {
  std::int64_t rows, d;
};
const residual_dims residual_shapes[] = {{1, 1}, {7, 17}, {5, 64}, {9, 1024}, {3, 4096}, {33, 1536}};

const residual_options residual_variants[] = {{false, false, false, false}, {true, false, true, false},
                                              {false, true, false, false},  {true, true, true, true},
                                              {false, false, true, true}};

void residual_norm_cases(case_table& t) {
  for (const residual_dims& d : residual_shapes)
    for (const residual_options& o : residual_variants) {
      const std::uint64_t s = t.seed();
      t.add("residual_norm_forward", residual_label(d.rows, d.d, o),
            [=](const backend& b) { return run_residual_norm(b, d.rows, d.d, o, s); });
    }
}

// The RoPE parameter sets of the cases: Gemma 4's default (sliding) and proportional (full) kinds.
struct rope_setting {
  const char* name;
  ops::rope_parameters p;
};
const rope_setting rope_settings[] = {
    {"default theta 1e4", {ops::rope_kind::standard, 10000.0, 1.0, 1.0}},
    {"default theta 1e6", {ops::rope_kind::standard, 1e6, 0.25, 1.0}},  // partial factor ignored
    {"proportional theta 1e6 prf 0.25", {ops::rope_kind::proportional, 1e6, 0.25, 1.0}},
    {"proportional theta 1e4 prf 0.5 factor 2", {ops::rope_kind::proportional, 10000.0, 0.5, 2.0}},
};

void rope_cases(case_table& t) {
  for (const rope_setting& r : rope_settings)
    for (const std::int64_t d : {2, 6, 64, 512}) {
      // inv_freq is float32 on every path (no float64 variant exists): the limit is float32's.
      t.add("rope_inv_freq", cat(r.name, ", head_dim ", d), [=](const backend& b) {
        device_tensors m(b);
        const tensor f = m.out_raw({d / 2}, dtype::float32);
        require_ok(ops::rope_inv_freq(b.ctx, r.p, d, f));
        return outputs{{"inv_freq", m.get(f)}};
      });
    }
  struct dims {
    std::int64_t tokens, heads, d;
    std::int32_t max_position;
    int setting;
  };
  for (const dims d : {dims{1, 1, 2, 1, 0}, dims{7, 3, 16, 64, 0}, dims{17, 8, 64, 8192, 2}, dims{65, 2, 6, 131072, 3},
                       dims{33, 4, 32, 4096, 1}}) {
    const rope_setting& r = rope_settings[d.setting];
    const std::string label =
        cat("tokens ", d.tokens, ", heads ", d.heads, ", d ", d.d, ", positions < ", d.max_position, ", ", r.name);
    const std::uint64_t s = t.seed();
    const auto positions = random_indices({d.tokens}, s, 0, d.max_position);
    const auto inv_freq = as_float(inv_freq_formula(r.p, d.d));
    t.add("rope_tables", label, [=](const backend& b) {
      device_tensors m(b);
      const tensor c = m.out({d.tokens, d.d}), sn = m.out({d.tokens, d.d});
      require_ok(ops::rope_tables(b.ctx, m.raw(positions), m.raw(float_buffer(inv_freq)), c, sn));
      return outputs{{"cos", m.get(c)}, {"sin", m.get(sn)}};
    });
    const auto [cos_table, sin_table] = tables_formula(positions, inv_freq);
    for (const bool in_place : {false, true}) {
      t.add("rope_forward", label + (in_place ? ", in place" : ""),
            [=, c = cos_table, sn = sin_table](const backend& b) {
              device_tensors m(b);
              const tensor x = m.in(f64({d.tokens, d.heads, d.d}, s + 1)),
                           y = in_place ? x : m.out({d.tokens, d.heads, d.d});
              require_ok(ops::rope_forward(b.ctx, x, m.in(c), m.in(sn), y));
              return outputs{{"y", m.get(y)}};
            });
      t.add("rope_backward", label + (in_place ? ", in place" : ""),
            [=, c = cos_table, sn = sin_table](const backend& b) {
              device_tensors m(b);
              const tensor dy = m.in(f64({d.tokens, d.heads, d.d}, s + 2)),
                           dx = in_place ? dy : m.out({d.tokens, d.heads, d.d});
              require_ok(ops::rope_backward(b.ctx, dy, m.in(c), m.in(sn), dx));
              return outputs{{"dx", m.get(dx)}};
            });
    }
  }
}

/// A rmsnorm_rope_forward shape: tokens, heads, head dim, positions below max_position, the RoPE
/// setting. Head dims 256 and 512 are Gemma 4's (the vector path on CUDA); 2, 6 and 18 are not whole
/// vectors (its scalar path).
struct norm_rope_dims {
  std::int64_t tokens, heads, d;
  std::int32_t max_position;
  int setting;
};
const norm_rope_dims norm_rope_shapes[] = {{1, 1, 2, 1, 0}, {7, 3, 18, 64, 0}, {9, 8, 256, 4096, 0}, {5, 8, 512, 131072, 2},
                                           {3, 2, 6, 64, 3}, {17, 1, 64, 8192, 1}};
/// More (token, head) rows than the CUDA kernel of a row a warp has warps resident (4,224 at d 256,
/// 3,168 at d 512): warps that take a second row, its loads made while the first is computed.
const norm_rope_dims norm_rope_many_rows[] = {{700, 8, 256, 8192, 0}, {500, 8, 512, 131072, 2}};

std::string norm_rope_label(const norm_rope_dims& d) {
  return cat("tokens ", d.tokens, ", heads ", d.heads, ", d ", d.d, ", positions < ", d.max_position, ", ",
             rope_settings[d.setting].name);
}

/// The cos and sin tables of a shape's random positions (the formula's, as rope_forward's cases).
std::pair<host_buffer, host_buffer> norm_rope_tables(const norm_rope_dims& d, std::uint64_t s) {
  const auto positions = random_indices({d.tokens}, s, 0, d.max_position);
  return tables_formula(positions, as_float(inv_freq_formula(rope_settings[d.setting].p, d.d)));
}

/// rmsnorm_rope_forward on b, or (in_turn) rmsnorm_forward then rope_forward; outputs y, inv_rms.
outputs run_norm_rope(const backend& b, const norm_rope_dims& d, bool in_place, bool in_turn, std::uint64_t s) {
  device_tensors m(b);
  const auto [cos_table, sin_table] = norm_rope_tables(d, s);
  const tensor x = m.in(f64({d.tokens, d.heads, d.d}, s + 1, -3, 3)), w = m.in(f64({d.d}, s + 2, 0.5, 1.5));
  const tensor c = m.in(cos_table), sn = m.in(sin_table);
  const tensor y = in_place ? x : m.out({d.tokens, d.heads, d.d}), inv_rms = m.stat({d.tokens * d.heads});
  if (in_turn) {
    require_ok(ops::rmsnorm_forward(b.ctx, x.reshaped({d.tokens * d.heads, d.d}), w, 1e-6,
                                    y.reshaped({d.tokens * d.heads, d.d}), inv_rms));
    require_ok(ops::rope_forward(b.ctx, y, c, sn, y));
  } else {
    require_ok(ops::rmsnorm_rope_forward(b.ctx, x, w, 1e-6, c, sn, y, inv_rms));
  }
  return outputs{{"y", m.get(y)}, {"inv_rms", m.get(inv_rms)}};
}

void norm_rope_cases(case_table& t, std::span<const norm_rope_dims> shapes) {
  for (const norm_rope_dims& d : shapes)
    for (const bool in_place : {false, true}) {
      const std::uint64_t s = t.seed();
      t.add("rmsnorm_rope_forward", norm_rope_label(d) + (in_place ? ", in place" : ""),
            [=](const backend& b) { return run_norm_rope(b, d, in_place, false, s); });
    }
}

void gated_mlp_cases(case_table& t) {
  struct dims {
    std::int64_t rows, cols;
    double range;
  };
  for (const dims d : {dims{1, 1, 1}, dims{7, 17, 3}, dims{17, 64, 6}, dims{65, 33, 10}}) {
    const std::string label = cat("rows ", d.rows, ", cols ", d.cols, ", |x| <= ", d.range);
    const std::uint64_t s = t.seed();
    const shape_t shape{d.rows, d.cols}, fused{d.rows, 2 * d.cols};
    for (const bool in_place : {false, true})
      t.add("gelu_tanh_forward", label + (in_place ? ", in place" : ""), [=](const backend& b) {
        device_tensors m(b);
        const tensor x = m.in(f64(shape, s, -d.range, d.range)), y = in_place ? x : m.out(shape);
        require_ok(ops::gelu_tanh_forward(b.ctx, x, y));
        return outputs{{"y", m.get(y)}};
      });
    for (const bool accumulate : {false, true})
      t.add("gelu_tanh_backward", label + (accumulate ? ", accumulate" : ""), [=](const backend& b) {
        device_tensors m(b);
        const tensor dx = accumulate ? m.in(f64(shape, s + 1)) : m.out(shape);
        require_ok(ops::gelu_tanh_backward(b.ctx, m.in(f64(shape, s, -d.range, d.range)), m.in(f64(shape, s + 2)), dx,
                                           accumulate));
        return outputs{{"dx", m.get(dx)}};
      });
    t.add("gated_gelu_forward", label, [=](const backend& b) {
      device_tensors m(b);
      const tensor h = m.out(shape);
      require_ok(ops::gated_gelu_forward(b.ctx, m.in(f64(shape, s, -d.range, d.range)), m.in(f64(shape, s + 3)), h));
      return outputs{{"h", m.get(h)}};
    });
    t.add("gated_gelu_backward", label, [=](const backend& b) {
      device_tensors m(b);
      const tensor dgate = m.out(shape), dup = m.out(shape);
      require_ok(ops::gated_gelu_backward(b.ctx, m.in(f64(shape, s, -d.range, d.range)), m.in(f64(shape, s + 3)),
                                          m.in(f64(shape, s + 4)), dgate, dup));
      return outputs{{"dgate", m.get(dgate)}, {"dup", m.get(dup)}};
    });
    t.add("gated_gelu_fused_forward", cat("rows ", d.rows, ", gate_up width ", 2 * d.cols, ", |x| <= ", d.range),
          [=](const backend& b) {
            device_tensors m(b);
            const tensor h = m.out(shape);
            require_ok(ops::gated_gelu_fused_forward(b.ctx, m.in(f64(fused, s + 5, -d.range, d.range)), h));
            return outputs{{"h", m.get(h)}};
          });
    t.add("gated_gelu_fused_backward", cat("rows ", d.rows, ", gate_up width ", 2 * d.cols, ", |x| <= ", d.range),
          [=](const backend& b) {
            device_tensors m(b);
            const tensor dgu = m.out(fused);
            require_ok(ops::gated_gelu_fused_backward(b.ctx, m.in(f64(fused, s + 5, -d.range, d.range)),
                                                      m.in(f64(shape, s + 6)), dgu));
            return outputs{{"dgate_up", m.get(dgu)}};
          });
  }
}

void softcap_cases(case_table& t) {
  struct dims {
    std::int64_t rows, cols;
    double cap, range;
  };
  for (const dims d : {dims{1, 1, 30, 10}, dims{7, 17, 30, 100}, dims{17, 65, 1, 3}, dims{65, 33, 30, 1000}}) {
    const std::string label = cat("rows ", d.rows, ", cols ", d.cols, ", cap ", d.cap, ", |x| <= ", d.range);
    const std::uint64_t s = t.seed();
    const shape_t shape{d.rows, d.cols};
    for (const bool in_place : {false, true}) {
      t.add("softcap_forward", label + (in_place ? ", in place" : ""), [=](const backend& b) {
        device_tensors m(b);
        const tensor x = m.in(f64(shape, s, -d.range, d.range)), y = in_place ? x : m.out(shape);
        require_ok(ops::softcap_forward(b.ctx, x, d.cap, y));
        return outputs{{"y", m.get(y)}};
      });
      t.add("softcap_backward", label + (in_place ? ", in place" : ""), [=](const backend& b) {
        device_tensors m(b);
        const tensor dy = m.in(f64(shape, s + 1)), dx = in_place ? dy : m.out(shape);
        require_ok(ops::softcap_backward(b.ctx, m.in(f64(shape, s, -d.range, d.range)), d.cap, dy, dx));
        return outputs{{"dx", m.get(dx)}};
      });
    }
  }
}

void per_layer_input_cases(case_table& t) {
  struct combine_dims {
    std::int64_t n, w;
  };
  for (const combine_dims cd : {combine_dims{1, 1}, combine_dims{7, 17}, combine_dims{65, 32}}) {
    const std::int64_t n = cd.n, w = cd.w;
    const std::string label = cat("N ", n, ", width ", w);
    const std::uint64_t s = t.seed();
    for (const bool in_place : {false, true})
      t.add("ple_combine_forward", label + (in_place ? ", in place into c" : ""), [=](const backend& b) {
        device_tensors m(b);
        const tensor c = m.in(f64({n, w}, s)), ple = in_place ? c : m.out({n, w});
        require_ok(ops::ple_combine_forward(b.ctx, c, m.in(f64({n, w}, s + 1)), ple));
        return outputs{{"ple", m.get(ple)}};
      });
    for (const int variant : {0, 1, 2})  // both written, dt skipped, dc written in place over dple
      t.add("ple_combine_backward",
            label + (variant == 0   ? ", dc and dt"
                     : variant == 1 ? ", dc only"
                                    : ", dc in place over dple"),
            [=](const backend& b) {
              device_tensors m(b);
              const tensor dple = m.in(f64({n, w}, s + 2));
              const tensor dc = variant == 2 ? dple : m.out({n, w}), dt = variant == 1 ? tensor{} : m.out({n, w});
              require_ok(ops::ple_combine_backward(b.ctx, dple, dc, dt));
              outputs o{{"dc", m.get(dc)}};
              if (variant != 1) o.push_back({"dt", m.get(dt)});
              return o;
            });
  }
  struct dims {
    std::int64_t n, layers, p, layer;
  };
  for (const dims d : {dims{1, 1, 1, 0}, dims{7, 3, 17, 2}, dims{65, 4, 8, 1}}) {
    const std::string label = cat("N ", d.n, ", layers ", d.layers, ", P ", d.p, ", layer ", d.layer);
    const std::uint64_t s = t.seed();
    t.add("ple_gate_forward", label, [=](const backend& b) {
      device_tensors m(b);
      const tensor g = m.out({d.n, d.p});
      require_ok(ops::ple_gate_forward(b.ctx, m.in(f64({d.n, d.p}, s, -4, 4)), m.in(f64({d.n, d.layers, d.p}, s + 1)),
                                       d.layer, g));
      return outputs{{"g", m.get(g)}};
    });
    t.add("ple_gate_backward", label, [=](const backend& b) {
      device_tensors m(b);
      // d_ple starts random: the slices of other layers must come back untouched.
      const tensor da = m.out({d.n, d.p}), d_ple = m.in(f64({d.n, d.layers, d.p}, s + 2));
      require_ok(ops::ple_gate_backward(b.ctx, m.in(f64({d.n, d.p}, s, -4, 4)), m.in(f64({d.n, d.layers, d.p}, s + 1)),
                                        d.layer, m.in(f64({d.n, d.p}, s + 3)), da, d_ple));
      return outputs{{"da", m.get(da)}, {"d_ple", m.get(d_ple)}};
    });
  }
}

struct attention_dims {
  std::vector<std::int32_t> lengths;
  std::int64_t heads, kv_heads, d, window;
  double scaling;
};

const std::vector<attention_dims>& attention_shapes() {
  static const std::vector<attention_dims> shapes{
      {{1}, 1, 1, 2, 0, 1.0},
      {{7}, 2, 2, 8, 0, 1.0},
      {{5, 0, 1, 7}, 4, 2, 16, 0, 1.0},    // GQA, an empty sequence
      {{5, 0, 1, 7}, 4, 2, 16, 3, 0.25},   // sliding window
      {{0, 17, 0, 33}, 8, 1, 32, 8, 1.0},  // MQA, empty first and middle sequences, window
      {{65}, 2, 1, 16, 0, 0.25},
      {{17, 1}, 3, 3, 4, 1, 1.0},  // window 1: each query sees itself only
      // Gemma 4's head dims, with sequences that end inside and across the CUDA kernels' tiles:
      {{130, 1, 77, 200}, 4, 2, 256, 0, 0.0625},     // sliding layers' d = 256, full causal
      {{130, 1, 77, 200}, 4, 1, 256, 50, 0.0625},    // a window shorter than the sequences
      {{130, 1, 77, 200}, 2, 1, 256, 1000, 0.0625},  // a window longer than every sequence
      {{97, 160}, 4, 1, 512, 0, 0.044},              // full layers' d = 512
      {{97, 160}, 2, 2, 512, 64, 0.044},
  };
  return shapes;
}

std::string attention_label(const attention_dims& a) {
  return cat(lengths_string(a.lengths), ", H ", a.heads, ", G ", a.kv_heads, ", d ", a.d,
             a.window ? cat(", window ", a.window) : std::string(", full"), ", scaling ", a.scaling);
}

/// `x` ([tokens, heads, d]) with element [j, h, 0] set to value(j) in every head.
host_buffer with_first_column(host_buffer x, const std::function<double(std::int64_t)>& value) {
  const std::int64_t n = x.shape()[0], heads = x.shape()[1], d = x.shape()[2];
  const std::span<double> v = x.span<double>();
  for (std::int64_t j = 0; j < n; ++j)
    for (std::int64_t h = 0; h < heads; ++h) v[static_cast<std::size_t>((j * heads + h) * d)] = value(j);
  return x;
}

/// The queries' first column in attention cases with a rise (attention_cases).
constexpr double rising_query_column = 16;
/// The backward's element tolerance (float32) with a rise: dk's first column adds q0 · scaling · dS
/// over a row's queries, terms 16 times those of the random columns, of random sign, so its
/// rounding error is 16 times theirs; the table's atol (1e-5, for terms of unit scale) scales with
/// them. The CUDA float32 kernels' sums in another order than the CPU's missed the default by up
/// to 1.9e-5 in 1 to 4 of about 10^5 elements (on an H100).
constexpr tolerance rising_backward_tol{1e-4, rising_query_column * 1e-5};
/// Its bfloat16 tolerance: each dS is rounded to bfloat16 before dS·Q, and the first column's
/// terms 16 times the random columns' left one element 0.024 off with a 150 window on an H100
/// (0.0645 against 0.0880), past the backend's atol of 2e-2.
constexpr tolerance rising_backward_bf16_tol{2e-2, 3e-2};

/// Attention cases of `shapes`. rise > 0: every query's first column is 16 and every key's first
/// column grows so that a score gains `rise` (log2 units of the scaled score) per token, so each
/// row's scores rise along its keys and the row's running max moves mid-row, by more than the CUDA
/// kernels' lazy rescaling margin (2^8) over some key tiles and by less over others (the random
/// columns' scores are a fraction of a unit: without the rise a row's max settles in its first
/// tile). The rise sits in q more than in k: dq's first column sums dS · k over a row's keys, whose
/// terms cancel (Σ dS = 0), and keys as large as the rise needs at q = 1 (hundreds) left float32's
/// rounding of those terms above the table's rtol of 1e-4 in a few elements.
void attention_cases(case_table& t, const std::vector<attention_dims>& shapes, double rise = 0) {
  for (const attention_dims& a : shapes) {
    const std::uint64_t s = t.seed();
    const std::int64_t n = total(a.lengths);
    const shape_t qs{n, a.heads, a.d}, ks{n, a.kv_heads, a.d};
    const ops::attention_options options{a.scaling, a.window};
    const host_buffer cu = offsets_of(a.lengths);
    constexpr double q0 = rising_query_column;
    const double per_token = rise / (a.scaling * std::numbers::log2e * q0);  // the keys' first column's step
    const auto query = [=](std::uint64_t seed) {
      return rise > 0 ? with_first_column(f64(qs, seed), [](std::int64_t) { return q0; }) : f64(qs, seed);
    };
    const auto key = [=](std::uint64_t seed) {
      return rise > 0 ? with_first_column(f64(ks, seed), [=](std::int64_t j) { return per_token * static_cast<double>(j); })
                      : f64(ks, seed);
    };
    const std::string label = attention_label(a) + (rise > 0 ? cat(", keys rising ", rise, " a token") : std::string());
    t.add("attention_forward", label, [=](const backend& b) {
      device_tensors m(b);
      const tensor out = m.out(qs), lse = m.stat({n, a.heads});
      require_ok(ops::attention_forward(b.ctx, m.in(query(s)), m.in(key(s + 1)), m.in(f64(ks, s + 2)), m.raw(cu),
                                        out, lse, options));
      return outputs{{"out", m.get(out)}, {"lse", m.get(lse)}};
    });
    // The backward with and without the forward's output (with it, the row term Σ dO·o comes
    // from it; without, a backend recomputes it).
    for (const bool accumulate : {false, true})
      for (const bool with_out : {false, true})
        t.add("attention_backward",
              label + (accumulate ? ", accumulate dq" : "") + (with_out ? ", forward output given" : ""),
              [=](const backend& b) {
                device_tensors m(b);
                const tensor q = m.in(query(s)), k = m.in(key(s + 1)), v = m.in(f64(ks, s + 2)), c = m.raw(cu);
                const tensor out = m.out(qs), lse = m.stat({n, a.heads});
                require_ok(ops::attention_forward(b.ctx, q, k, v, c, out, lse, options));
                const tensor dq = accumulate ? m.in(f64(qs, s + 3)) : m.out(qs);
                const tensor dk = m.in(f64(ks, s + 4)), dv = m.in(f64(ks, s + 5));  // accumulated
                require_ok(ops::attention_backward(b.ctx, q, k, v, c, lse, m.in(f64(qs, s + 6)), dq, dk, dv, options,
                                                   accumulate, with_out ? out : tensor{}));
                return outputs{{"dq", m.get(dq)}, {"dk", m.get(dk)}, {"dv", m.get(dv)}};
              },
              default_nmse, rise > 0 ? rising_backward_tol : default_tol,
              rise > 0 ? std::optional<tolerance>(rising_backward_bf16_tol) : std::nullopt);
  }
}

/// A paged KV cache: sequence s holds positions [0, context[s]) in blocks of `block` positions,
/// and this call's rows are its last fresh[s] positions.
struct paged_layout {
  std::vector<std::int32_t> context, fresh;
  std::int64_t block, heads, kv_heads, d, window;
  double scaling;
};

const std::vector<paged_layout>& paged_shapes() {
  static const std::vector<paged_layout> shapes{
      {{1}, {1}, 1, 1, 1, 2, 0, 1.0},
      {{5, 1, 17}, {1, 1, 1}, 4, 4, 2, 16, 0, 1.0},     // decoding, GQA
      {{9, 33}, {4, 7}, 8, 2, 1, 8, 0, 0.5},            // chunked prefill, MQA
      {{20}, {3}, 4, 3, 3, 4, 5, 1.0},                  // window 5: logical blocks 0..2 unmapped (-1)
      {{7, 12, 65}, {2, 0, 5}, 16, 8, 2, 32, 0, 0.25},  // a sequence without new rows
      {{17, 40}, {17, 9}, 3, 2, 2, 6, 7, 1.0},          // a whole prompt as rows, window, odd block
  };
  return shapes;
}

std::string paged_label(const paged_layout& l) {
  std::string c = "context {", f = "new rows {";
  for (std::size_t i = 0; i < l.context.size(); ++i) {
    c += cat(i ? ", " : "", l.context[i]);
    f += cat(i ? ", " : "", l.fresh[i]);
  }
  return cat(c, "}, ", f, "}, block ", l.block, ", H ", l.heads, ", G ", l.kv_heads, ", d ", l.d,
             l.window ? cat(", window ", l.window) : std::string(", full"), ", scaling ", l.scaling);
}

struct paged_inputs {
  host_buffer table, cu, positions;
  std::int64_t rows, blocks;
};

/// The block table (physical blocks scrambled, three spare blocks nobody maps, blocks wholly
/// before every row's window left at -1), the row offsets and the rows' positions.
paged_inputs make_paged(const paged_layout& l, std::uint64_t seed) {
  const auto seqs = static_cast<std::int64_t>(l.context.size());
  std::int64_t cols = 1, used = 0, rows = 0;
  for (const std::int32_t c : l.context) {
    cols = std::max<std::int64_t>(cols, (c + l.block - 1) / l.block);
    used += (c + l.block - 1) / l.block;
  }
  for (const std::int32_t f : l.fresh) rows += f;
  const std::int64_t blocks = used + 3;
  std::vector<std::int32_t> ids(static_cast<std::size_t>(blocks));
  std::iota(ids.begin(), ids.end(), 0);
  std::mt19937_64 gen(seed);
  for (std::size_t i = ids.size() - 1; i > 0; --i) std::swap(ids[i], ids[static_cast<std::size_t>(gen() % (i + 1))]);
  paged_inputs in{host_buffer(dtype::int32, {seqs, cols}), host_buffer(dtype::int32, {seqs + 1}),
                  host_buffer(dtype::int32, {rows}), rows, blocks};
  std::int32_t* table = in.table.data<std::int32_t>();
  std::fill(table, table + seqs * cols, -1);
  std::size_t next = 0;
  std::int32_t row = 0;
  for (std::int64_t s = 0; s < seqs; ++s) {
    const std::int32_t context = l.context[static_cast<std::size_t>(s)], fresh = l.fresh[static_cast<std::size_t>(s)];
    const std::int64_t first_row = context - fresh;
    const std::int64_t visible = l.window > 0 && fresh > 0 ? std::max<std::int64_t>(0, first_row - l.window + 1) : 0;
    for (std::int64_t b = 0; b < (context + l.block - 1) / l.block; ++b)
      if ((b + 1) * l.block > visible) table[s * cols + b] = ids[next++];
    in.cu.data<std::int32_t>()[s] = row;
    for (std::int32_t r = 0; r < fresh; ++r)
      in.positions.data<std::int32_t>()[row++] = static_cast<std::int32_t>(first_row + r);
  }
  in.cu.data<std::int32_t>()[seqs] = row;
  return in;
}

/// Decode steps at the head dims of Gemma 4 (bfloat16 on CUDA: the decode kernel's blocks of 8
/// rows), over several key tiles, with and without a window.
const std::vector<paged_layout>& paged_decode_shapes() {
  static const std::vector<paged_layout> shapes{
      {{300, 77, 129}, {1, 1, 1}, 16, 8, 1, 256, 100, 0.0625},
      {{300, 77, 129}, {1, 1, 1}, 16, 8, 1, 512, 0, 0.0625},
      {{40, 9}, {2, 1}, 8, 4, 2, 256, 0, 0.0625},  // two rows of a sequence in one block
  };
  return shapes;
}

void paged_attention_cases(case_table& t, const std::vector<paged_layout>& shapes) {
  for (const paged_layout& l : shapes) {
    const std::uint64_t s = t.seed();
    const paged_inputs p = make_paged(l, s);
    const shape_t cache{p.blocks, l.block, l.kv_heads, l.d}, qs{p.rows, l.heads, l.d}, kv{p.rows, l.kv_heads, l.d};
    const ops::attention_options options{l.scaling, l.window};
    t.add("paged_kv_write", paged_label(l), [=](const backend& b) {
      device_tensors m(b);
      // The caches start random: the slots of other positions must come back untouched.
      const tensor kc = m.in(f64(cache, s + 1)), vc = m.in(f64(cache, s + 2));
      const ops::paged_rows rows{m.raw(p.table), m.raw(p.cu), m.raw(p.positions)};
      require_ok(ops::paged_kv_write(b.ctx, m.in(f64(kv, s + 3)), m.in(f64(kv, s + 4)), rows, kc, vc));
      return outputs{{"k_cache", m.get(kc)}, {"v_cache", m.get(vc)}};
    });
    for (const bool write_first : {false, true})
      t.add("paged_attention_forward", paged_label(l) + (write_first ? ", after paged_kv_write of the rows" : ""),
            [=](const backend& b) {
              device_tensors m(b);
              const tensor kc = m.in(f64(cache, s + 1)), vc = m.in(f64(cache, s + 2));
              const ops::paged_rows rows{m.raw(p.table), m.raw(p.cu), m.raw(p.positions)};
              if (write_first)
                require_ok(ops::paged_kv_write(b.ctx, m.in(f64(kv, s + 3)), m.in(f64(kv, s + 4)), rows, kc, vc));
              const tensor out = m.out(qs), lse = m.stat({p.rows, l.heads});
              require_ok(ops::paged_attention_forward(b.ctx, m.in(f64(qs, s + 5)), kc, vc, rows, out, lse, options));
              return outputs{{"out", m.get(out)}, {"lse", m.get(lse)}};
            });
  }
}

struct expert_dims {
  std::int64_t n, h, e, im, k;
};

/// moe_experts_forward over inputs drawn from seed s (s + 1 .. s + 4) and the experts `idx`.
void experts_forward_case(case_table& t, const std::string& label, const expert_dims& d, std::uint64_t s,
                          const host_buffer& idx) {
  const shape_t gu{d.e, 2 * d.im, d.h}, dn{d.e, d.h, d.im};
  t.add("moe_experts_forward", label, [=](const backend& b) {
    device_tensors m(b);
    const tensor out = m.out({d.n, d.h});
    require_ok(ops::moe_experts_forward(b.ctx, m.in(f64({d.n, d.h}, s + 1)), m.in(f64(gu, s + 2, -0.5, 0.5)),
                                        m.in(f64(dn, s + 3, -0.5, 0.5)), m.in(f64({d.n, d.k}, s + 4, 0, 1)),
                                        m.raw(idx), out));
    return outputs{{"out", m.get(out)}};
  });
}

void moe_cases(case_table& t) {
  struct router_dims {
    std::int64_t n, h, e, k;
  };
  for (const router_dims d :
       {router_dims{1, 4, 2, 1}, router_dims{7, 16, 8, 2}, router_dims{17, 33, 16, 4}, router_dims{65, 8, 4, 4}}) {
    const std::string label = cat("N ", d.n, ", H ", d.h, ", E ", d.e, ", K ", d.k);
    const std::uint64_t s = t.seed();
    const router_inputs r = make_router_inputs(d.n, d.h, d.e, d.k, s);
    t.add("moe_router_forward", label, [=](const backend& b) {
      device_tensors m(b);
      const tensor w = m.out({d.n, d.k}), idx = m.out_raw({d.n, d.k}, dtype::int32);
      const tensor ren = m.out({d.n, d.k}), inv = m.stat({d.n});
      require_ok(
          ops::moe_router_forward(b.ctx, m.in(r.x), m.in(r.scale), m.in(r.proj), m.in(r.per_expert), w, idx, ren, inv));
      return outputs{
          {"weights", m.get(w)}, {"indices", m.get(idx), true}, {"renormalized", m.get(ren)}, {"inv_rms", m.get(inv)}};
    });
    for (const bool accumulate : {false, true})
      t.add("moe_router_backward", label + (accumulate ? ", accumulate dx" : ""), [=](const backend& b) {
        device_tensors m(b);
        const tensor x = m.in(r.x), sc = m.in(r.scale), proj = m.in(r.proj), pe = m.in(r.per_expert);
        const tensor w = m.out({d.n, d.k}), idx = m.out_raw({d.n, d.k}, dtype::int32);
        const tensor ren = m.out({d.n, d.k}), inv = m.stat({d.n});
        require_ok(ops::moe_router_forward(b.ctx, x, sc, proj, pe, w, idx, ren, inv));
        const tensor dx = accumulate ? m.in(f64({d.n, d.h}, s + 4)) : m.out({d.n, d.h});
        const tensor dproj = m.in(f64({d.e, d.h}, s + 5)), dsc = m.in(f64({d.h}, s + 6)), dpe = m.in(f64({d.e}, s + 7));
        require_ok(ops::moe_router_backward(b.ctx, x, sc, proj, pe, idx, ren, inv, m.in(f64({d.n, d.k}, s + 8)), dx,
                                            dproj, dsc, dpe, accumulate));
        return outputs{{"dx", m.get(dx)},
                       {"dproj", m.get(dproj)},
                       {"drouter_scale", m.get(dsc)},
                       {"dper_expert_scale", m.get(dpe)}};
      });
  }
  for (const expert_dims d : {expert_dims{1, 4, 2, 3, 1}, expert_dims{7, 16, 4, 8, 2}, expert_dims{17, 8, 8, 5, 3},
                              expert_dims{65, 12, 3, 7, 2}}) {
    const std::string label = cat("N ", d.n, ", H ", d.h, ", E ", d.e, ", Im ", d.im, ", K ", d.k);
    const std::uint64_t s = t.seed();
    // Random experts per slot: some tokens list an expert twice, some experts get no token.
    const host_buffer idx = random_indices({d.n, d.k}, s, 0, static_cast<std::int32_t>(d.e));
    const shape_t gu{d.e, 2 * d.im, d.h}, dn{d.e, d.h, d.im};
    experts_forward_case(t, label, d, s, idx);
    for (const bool accumulate : {false, true})
      t.add("moe_experts_backward", label + (accumulate ? ", accumulate dy" : ""), [=](const backend& b) {
        device_tensors m(b);
        const tensor dy = accumulate ? m.in(f64({d.n, d.h}, s + 5)) : m.out({d.n, d.h});
        const tensor dgu = m.in(f64(gu, s + 6)), ddn = m.in(f64(dn, s + 7)), dw = m.out({d.n, d.k});
        require_ok(ops::moe_experts_backward(b.ctx, m.in(f64({d.n, d.h}, s + 1)), m.in(f64(gu, s + 2, -0.5, 0.5)),
                                             m.in(f64(dn, s + 3, -0.5, 0.5)), m.in(f64({d.n, d.k}, s + 4, 0, 1)),
                                             m.raw(idx), m.in(f64({d.n, d.h}, s + 8)), dy, dgu, ddn, dw, accumulate));
        return outputs{{"dy", m.get(dy)}, {"dgate_up", m.get(dgu)}, {"ddown", m.get(ddn)}, {"dweights", m.get(dw)}};
      });
  }
}

/// The experts' forward on both of CUDA's layouts (gpu/ops/cuda/moe.cu, moe_padded.cu): a few tokens padded, at the
/// small pad (an even routing) and at the pad of every token (one expert taking them all), and more
/// tokens than the padded layout takes, sorted.
void moe_layout_cases(case_table& t) {
  for (const auto& [d, skewed] : {std::pair{expert_dims{200, 16, 8, 8, 1}, false}, std::pair{expert_dims{200, 16, 8, 8, 2}, true},
                                  std::pair{expert_dims{ops::moe_capturable_tokens + 88, 16, 8, 8, 2}, false}}) {
    const std::string label = cat("N ", d.n, ", H ", d.h, ", E ", d.e, ", Im ", d.im, ", K ", d.k,
                                  skewed ? ", slot 0 of every token at expert 5" : "");
    const std::uint64_t s = t.seed();
    const host_buffer idx = random_indices({d.n, d.k}, s, 0, static_cast<std::int32_t>(d.e));
    if (skewed)
      for (std::int64_t i = 0; i < d.n; ++i) idx.data<std::int32_t>()[i * d.k] = 5;
    experts_forward_case(t, label, d, s, idx);
  }
}

struct scoring_dims {
  std::int64_t rows, v;
  ops::sampling_params params;
};

std::string scoring_label(const scoring_dims& d) {
  return cat("rows ", d.rows, ", V ", d.v, ", T ", d.params.temperature,
             d.params.top_k ? cat(", top_k ", d.params.top_k) : std::string(),
             d.params.top_p < 1 ? cat(", top_p ", d.params.top_p) : std::string());
}

const std::vector<scoring_dims>& scoring_shapes() {
  static const std::vector<scoring_dims> shapes{
      {1, 1, {1.0, 0, 1.0}},   {7, 17, {1.0, 0, 1.0}},   {17, 65, {0.7, 0, 1.0}}, {17, 65, {1.0, 5, 1.0}},
      {17, 65, {1.3, 0, 0.9}}, {65, 33, {0.6, 10, 0.8}}, {7, 17, {1.0, 1, 1.0}},  {65, 7, {2.0, 0, 0.5}},
      {200, 33, {0.9, 7, 0.95}},  // more rows than one CUDA sampling launch carries coordinates for
  };
  return shapes;
}

/// Rows of a large vocabulary, logits in [-40, 40] (neighbours about 0.004 apart): with top-k 50
/// the CUDA filter gathers its few candidates in shared memory; with top-k 4200 (more than the
/// 4096 it can hold) it cuts by histograms over the row instead.
const std::vector<scoring_dims>& wide_scoring_shapes() {
  static const std::vector<scoring_dims> shapes{
      {4, 20000, {0.7, 50, 0.9}}, {4, 20000, {1.0, 4200, 1.0}}, {4, 20000, {0.8, 4200, 0.9}}};
  return shapes;
}

/// Rows of a vocabulary the CUDA backward takes with a cluster of blocks a row (no filters, more
/// than 131072 tokens): 40 rows of 200000 (the last block of a cluster gets no part of the row,
/// the one before it a short part), and the full 262144 of Gemma 4.
const std::vector<scoring_dims>& cluster_scoring_shapes() {
  static const std::vector<scoring_dims> shapes{{40, 200000, {0.7, 0, 1.0}}, {3, 262144, {1.0, 0, 1.0}}};
  return shapes;
}

void logprobs_cases(case_table& t, const std::vector<scoring_dims>& shapes, double spread = 5) {
  for (const scoring_dims& d : shapes) {
    const std::uint64_t s = t.seed();
    const host_buffer logits = f64({d.rows, d.v}, s, -spread, spread);
    // Random targets: some fall outside top-k / top-p (logprob -inf, no gradient).
    const host_buffer targets = random_indices({d.rows}, s + 1, 0, static_cast<std::int32_t>(d.v));
    // Rows whose kept set is at least 1e-4 from flipping (all, for these seeds; the check says so).
    const std::vector<char> rows = unambiguous_rows(logits, d.params, false);
    for (const bool entropy : {false, true})
      t.add("logprobs_forward", scoring_label(d) + (entropy ? ", entropy" : ""), [=](const backend& b) {
        device_tensors m(b);
        const tensor lp = m.out({d.rows}), h = entropy ? m.out({d.rows}) : tensor{};
        require_ok(ops::logprobs_forward(b.ctx, m.in(logits), m.raw(targets), d.params, lp, h));
        outputs o{{"logprobs", m.get(lp), false, 0, rows}};
        if (entropy) o.push_back({"entropy", m.get(h), false, 0, rows});
        return o;
      });
    for (const bool accumulate : {false, true})
      t.add("logprobs_backward", scoring_label(d) + (accumulate ? ", accumulate" : ""), [=](const backend& b) {
        device_tensors m(b);
        const tensor dl = accumulate ? m.in(f64({d.rows, d.v}, s + 2)) : m.out({d.rows, d.v});
        require_ok(ops::logprobs_backward(b.ctx, m.in(logits), m.raw(targets), d.params, m.in(f64({d.rows}, s + 3)), dl,
                                          accumulate));
        return outputs{{"dlogits", m.get(dl), false, 0, rows}};
      });
  }
}

std::vector<scoring_dims> sampling_shapes() {
  std::vector<scoring_dims> shapes = scoring_shapes();
  shapes.push_back({17, 33, {0.0, 0, 1.0}});  // greedy
  shapes.push_back({65, 17, {0.0, 4, 0.7}});  // greedy with filters (they never drop the argmax)
  shapes.push_back({65, 65, {1.0, 0, 0.95}});
  return shapes;
}

void sampling_cases(case_table& t, const std::vector<scoring_dims>& shapes, double spread = 4) {
  for (const scoring_dims& d : shapes) {
    const std::uint64_t s = t.seed();
    const host_buffer logits = f64({d.rows, d.v}, s, -spread, spread);
    const std::vector<char> rows = unambiguous_rows(logits, d.params, true);
    t.add("sampling_forward", scoring_label(d), [=](const backend& b) {
      device_tensors m(b);
      const tensor tokens = m.out_raw({d.rows}, dtype::int32), lp = m.out({d.rows});
      require_ok(ops::sampling_forward(b.ctx, m.in(logits), d.params, coordinates_for(d.rows), tokens, lp));
      return outputs{{"tokens", m.get(tokens), true, 0, rows}, {"logprobs", m.get(lp), false, 0, rows}};
    });
    // The same draws with the coordinates in the backend's memory (a captured step's form).
    host_buffer packed(dtype::int32, {d.rows, 8});
    const std::vector<rng_coordinates> at = coordinates_for(d.rows);
    std::memcpy(packed.data<std::int32_t>(), at.data(), at.size() * sizeof(rng_coordinates));
    t.add("sampling_forward", scoring_label(d) + ", coordinates on the device", [=](const backend& b) {
      device_tensors m(b);
      const tensor tokens = m.out_raw({d.rows}, dtype::int32), lp = m.out({d.rows});
      require_ok(ops::sampling_forward(b.ctx, m.in(logits), d.params, m.raw(packed), tokens, lp));
      return outputs{{"tokens", m.get(tokens), true, 0, rows}, {"logprobs", m.get(lp), false, 0, rows}};
    });
  }
}

void adamw_cases(case_table& t) {
  enum class storage { f32, bf16_moments, bf16_master_and_copy, f32_copy, bf16_weights_and_gradient };
  struct variant {
    storage kind;
    const char* name;
  };
  for (const variant v : {variant{storage::f32, "float32 state"}, variant{storage::bf16_moments, "bfloat16 moments"},
                          variant{storage::bf16_master_and_copy, "bfloat16 master and model copy"},
                          variant{storage::f32_copy, "float32 state, float32 model copy"},
                          variant{storage::bf16_weights_and_gradient, "float32 master, bfloat16 model copy and gradient"}})
    for (const std::int64_t n : {1, 7, 65, 1000})
      for (const std::int64_t first_step : {1, 10}) {
        const std::uint64_t s = t.seed();
        const bool bf16_moments = v.kind == storage::bf16_moments;
        const bool bf16_master = v.kind == storage::bf16_master_and_copy;
        const bool bf16_grad = v.kind == storage::bf16_weights_and_gradient;
        // bfloat16 storage rounds with relative error <= 2^-9 at every store; over the case's three
        // steps a moment's roundings add up to ~3 · 2^-9, i.e. NMSE up to ~3.4e-5 against the
        // float64 reference, which never rounds: 1e-4 for stored bfloat16 tensors, and bfloat16's
        // element tolerance for the whole case. The float32 master of a bfloat16-moment run drifts
        // by ~lr · 2^-9 per step through the rounded moments it reads back: 1e-8.
        const double bf16_nmse = 1e-4;
        const tolerance tol = bf16_moments || bf16_master || bf16_grad ? tolerance_for(dtype::bfloat16) : default_tol;
        // The later steps also take a clipping factor.
        const ops::adamw_hyper hyper{1e-2, 0.9, 0.999, 1e-8, 0.1, first_step, first_step == 1 ? 1.0 : 0.37};
        t.add(
            "adamw_step", cat(v.name, ", n ", n, ", steps ", first_step, "..", first_step + 2, ", grad scale ", hyper.grad_scale),
            [=](const backend& b) {
              device_tensors m(b);
              const dtype moment = bf16_moments ? dtype::bfloat16 : dtype::float32;
              const dtype master = bf16_master ? dtype::bfloat16 : dtype::float32;
              const tensor p = m.in_stored(f64({n}, s), master);
              const tensor m1 = m.in_stored(f64({n}, s + 1, -0.1, 0.1), moment);
              const tensor m2 = m.in_stored(f64({n}, s + 2, 0, 0.01), moment);  // second moments are >= 0
              // The copy: bfloat16 on every path (the reference path allows it), or float32 (float64 on the reference).
              const tensor copy = bf16_master || bf16_grad       ? m.out_raw({n}, dtype::bfloat16)
                                  : v.kind == storage::f32_copy ? m.out({n})
                                                                : tensor{};
              for (std::int64_t k = 0; k < 3; ++k) {
                ops::adamw_hyper h = hyper;
                h.step = first_step + k;
                require_ok(
                    ops::adamw_step(b.ctx, p,
                                    bf16_grad ? m.in_stored(f64({n}, s + 3 + static_cast<std::uint64_t>(k)), dtype::bfloat16)
                                              : m.in(f64({n}, s + 3 + static_cast<std::uint64_t>(k))),
                                    m1, m2, h, copy));
              }
              outputs o{{"param", m.get(p), false,
                         bf16_master    ? bf16_nmse
                         : bf16_moments ? 1e-8
                                        : 0},
                        {"exp_avg", m.get(m1), false, bf16_moments ? bf16_nmse : 0},
                        {"exp_avg_sq", m.get(m2), false, bf16_moments ? bf16_nmse : 0}};
              if (!copy.empty()) o.push_back({"model_copy", m.get(copy), false, bf16_master || bf16_grad ? bf16_nmse : 0});
              return o;
            },
            default_nmse, tol);
      }
}

struct pg_setting {
  const char* name;
  ops::pg_loss_settings settings;
  double prev_noise;  ///< lp_prev = lp_cur + U(-prev_noise, prev_noise): how far ratios stray from 1
};

std::vector<pg_setting> pg_settings() {
  std::vector<pg_setting> v;
  v.push_back({"DAPO defaults (tis [0, 2], dual clip 10), token-level", {}, 0.4});
  ops::pg_loss_settings s;
  s.kl_beta = 0.1;
  v.push_back({"KL beta 0.1, score-function form, clamps 20 / 10", s, 0.4});
  s.use_on_policy_kl_approximation = true;
  s.kl_on_policy_weight_grad = true;
  s.kl_beta = 0.05;
  v.push_back({"KL beta 0.05, on-policy approximation with weight gradient", s, 0.4});
  s = {};
  s.token_level_loss = false;
  s.importance = ops::importance_correction::icepop;
  s.is_ratio_min = 0.5;
  v.push_back({"sequence-level, icepop [0.5, 2]", s, 0.4});
  s = {};
  s.importance = ops::importance_correction::seq_mask_tis;
  s.is_ratio_min = 0.8;
  s.is_ratio_max = 1.25;
  v.push_back({"seq-mask-tis [0.8, 1.25]", s, 0.4});
  s = {};
  s.importance = ops::importance_correction::plain;
  s.ratio_clip_c = std::nullopt;
  v.push_back({"plain importance weights, no dual clip", s, 0.4});
  s = {};
  s.importance = ops::importance_correction::off;
  s.force_on_policy_ratio = true;
  v.push_back({"correction off, force_on_policy_ratio (no lp_prev)", s, 0.4});
  v.push_back({"wide ratios: low, high and dual clips fire", {}, 3.0});
  return v;
}

struct pg_inputs {
  host_buffer cur, prev, gen, adv, mask, ref, offsets;
  double tokens_global, sequences_global;
};

pg_inputs make_pg_inputs(const std::vector<std::int32_t>& lengths, double prev_noise, std::uint64_t s) {
  const std::int64_t n = total(lengths);
  pg_inputs in{f64({n}, s, -3, -0.01),
               f64({n}, s + 1, -prev_noise, prev_noise),
               f64({n}, s + 2, -0.8, 0.8),
               f64({n}, s + 3, -2, 2),
               f64({n}, s + 4, 0, 1),
               f64({n}, s + 5, -3, 3),
               offsets_of(lengths),
               0,
               0};
  double masked = 0;
  for (std::int64_t i = 0; i < n; ++i) {
    at(in.prev)[i] += at(in.cur)[i];
    at(in.gen)[i] += at(in.prev)[i];
    at(in.ref)[i] += at(in.cur)[i];
    at(in.mask)[i] = at(in.mask)[i] < 0.75 ? 1.0 : 0.0;
    masked += at(in.mask)[i];
  }
  in.tokens_global = masked + 3;  // other micro-batches hold more tokens
  in.sequences_global = static_cast<double>(lengths.size()) + 1;
  return in;
}

/// The op's view of the inputs on one backend.
ops::pg_loss_inputs pg_view(device_tensors& m, const pg_inputs& in, const ops::pg_loss_settings& s) {
  ops::pg_loss_inputs v;
  v.lp_cur = m.in(in.cur);
  if (!s.force_on_policy_ratio) v.lp_prev = m.in(in.prev);
  v.lp_gen = m.in(in.gen);
  v.advantages = m.in(in.adv);
  v.mask = m.in(in.mask);
  if (s.kl_beta > 0) v.lp_ref = m.in(in.ref);
  v.seq_offsets = m.raw(in.offsets);
  v.global_token_count = in.tokens_global;
  v.global_sequence_count = in.sequences_global;
  return v;
}

host_buffer scalar(double v) { return host_buffer::of<double>({1}, {v}); }

void pg_loss_cases(case_table& t) {
  const std::vector<std::vector<std::int32_t>> batches{{1}, {3, 0, 5, 9}, {20, 0, 45}};
  for (const pg_setting& setting : pg_settings())
    for (const auto& lengths : batches) {
      const std::uint64_t s = t.seed();
      const pg_inputs in = make_pg_inputs(lengths, setting.prev_noise, s);
      const ops::pg_loss_settings settings = setting.settings;
      const std::string label = cat(setting.name, ", ", lengths_string(lengths));
      t.add("pg_loss_forward", label, [=](const backend& b) {
        device_tensors m(b);
        const tensor loss = m.out({1});
        ops::pg_loss_metrics x;
        require_ok(ops::pg_loss_forward(b.ctx, pg_view(m, in, settings), settings, loss, &x));
        // Counts exactly; every floating metric as its own output, so its NMSE is its relative error.
        const std::vector<double> counts{
            static_cast<double>(x.token_count),        static_cast<double>(x.sequence_count),
            static_cast<double>(x.clipped_low),        static_cast<double>(x.clipped_high),
            static_cast<double>(x.clipped_dual),       static_cast<double>(x.is_truncated_tokens),
            static_cast<double>(x.is_masked_sequences)};
        return outputs{{"loss", m.get(loss)},
                       {"metric counts", host_buffer::of<double>({7}, counts), true},
                       {"pg_loss", scalar(x.pg_loss)},
                       {"kl_penalty", scalar(x.kl_penalty)},
                       {"ratio_sum", scalar(x.ratio_sum)},
                       {"ratio_min", scalar(x.ratio_min)},
                       {"ratio_max", scalar(x.ratio_max)},
                       {"ratio_clamped_sum", scalar(x.ratio_clamped_sum)},
                       {"ratio_clamped_min", scalar(x.ratio_clamped_min)},
                       {"ratio_clamped_max", scalar(x.ratio_clamped_max)},
                       {"importance_weight_sum", scalar(x.importance_weight_sum)},
                       {"mult_prob_error_sum", scalar(x.mult_prob_error_sum)},
                       {"gen_kl_error_sum", scalar(x.gen_kl_error_sum)},
                       {"approx_entropy_sum", scalar(x.approx_entropy_sum)}};
      });
      for (const bool accumulate : {false, true})
        t.add("pg_loss_backward", label + (accumulate ? ", dloss 0.5, accumulate" : ""), [=](const backend& b) {
          device_tensors m(b);
          const auto n = static_cast<std::int64_t>(in.cur.numel());
          const tensor d = accumulate ? m.in(f64({n}, s + 9)) : m.out({n});
          require_ok(
              ops::pg_loss_backward(b.ctx, pg_view(m, in, settings), settings, accumulate ? 0.5 : 1.0, d, accumulate));
          return outputs{{"d_lp_cur", m.get(d)}};
        });
    }
}

void elementwise_cases(case_table& t) {
  struct dims {
    std::int64_t rows, cols;
  };
  for (const dims d : {dims{1, 1}, dims{7, 17}, dims{65, 33}}) {
    const std::int64_t r = d.rows, c = d.cols;
    const std::string label = cat("rows ", r, ", cols ", c);
    const std::uint64_t s = t.seed();
    const shape_t shape{r, c};
    for (const bool in_place : {false, true}) {
      const std::string suffix = in_place ? ", in place" : "";
      t.add("add_forward", label + suffix, [=](const backend& b) {
        device_tensors m(b);
        const tensor a = m.in(f64(shape, s)), y = in_place ? a : m.out(shape);
        require_ok(ops::add_forward(b.ctx, a, m.in(f64(shape, s + 1)), y));
        return outputs{{"y", m.get(y)}};
      });
      t.add("scale_forward", label + ", s 1/sqrt(3)" + suffix, [=](const backend& b) {
        device_tensors m(b);
        const tensor x = m.in(f64(shape, s)), y = in_place ? x : m.out(shape);
        require_ok(ops::scale_forward(b.ctx, x, 1.0 / std::sqrt(3.0), y));
        return outputs{{"y", m.get(y)}};
      });
      t.add("scale_by_forward", label + suffix, [=](const backend& b) {
        device_tensors m(b);
        const tensor x = m.in(f64(shape, s)), y = in_place ? x : m.out(shape);
        require_ok(ops::scale_by_forward(b.ctx, x, m.in(f64({1}, s + 2, 0.1, 2)), y));
        return outputs{{"y", m.get(y)}};
      });
    }
    for (const int variant : {0, 1, 2})  // dx and ds, dx only, ds only
      t.add("scale_by_backward",
            label + (variant == 0   ? ", dx and ds"
                     : variant == 1 ? ", dx only"
                                    : ", ds only"),
            [=](const backend& b) {
              device_tensors m(b);
              const tensor dx = variant == 2 ? tensor{} : m.out(shape);
              const tensor ds = variant == 1 ? tensor{} : m.in(f64({1}, s + 3));  // accumulates
              require_ok(ops::scale_by_backward(b.ctx, m.in(f64(shape, s)), m.in(f64({1}, s + 2, 0.1, 2)),
                                                m.in(f64(shape, s + 4)), dx, ds));
              outputs o;
              if (variant != 2) o.push_back({"dx", m.get(dx)});
              if (variant != 1) o.push_back({"ds", m.get(ds)});
              return o;
            });
  }
}

void sum_squares_cases(case_table& t) {
  // Lengths across the CUDA kernel's 16384-element chunks; ranges empty, overlapping, out of
  // order, one element, a whole tensor, and ones that start and end inside a chunk; ranges of
  // more chunks than the totals' block has threads (258 chunks, and 256 chunks' elements over 257).
  constexpr std::int64_t chunk = 16384, many = 257 * chunk + 5;
  struct dims {
    std::int64_t n;
    std::vector<ops::element_range> ranges;
  };
  for (const dims& d : {dims{1, {{0, 1}}}, dims{7, {{0, 7}, {3, 0}, {2, 3}, {0, 7}}},
                        dims{40000, {{0, 40000}, {16383, 2}, {100, 16384}, {39999, 1}, {5, 0}, {20000, 20000}, {0, 16384}}},
                        dims{many, {{0, many}, {7, 256 * chunk}}}}) {
    const std::uint64_t s = t.seed();
    const auto S = static_cast<std::int64_t>(d.ranges.size());
    t.add("sum_squares", cat("n ", d.n, ", ", S, " ranges"), [=](const backend& b) {
      device_tensors m(b);
      const tensor x = m.in(f64({d.n}, s, -3, 3));
      host_buffer sums(dtype::float64, {S});
      require_ok(ops::sum_squares(b.ctx, x, d.ranges, sums.span<double>()));
      return outputs{{"sums", sums}};
    });
  }
}

const std::vector<op_case>& case_list() {
  static const std::vector<op_case> cases = [] {
    case_table t;
    linear_cases(t, {{1, 1, 1}, {7, 17, 5}, {17, 65, 33}, {65, 16, 7}});
    embedding_cases(t);
    rmsnorm_cases(t, {{1, 1, 1}, {7, 17, 1}, {17, 64, 30}, {65, 7, 0.01}});
    rope_cases(t);
    gated_mlp_cases(t);
    softcap_cases(t);
    per_layer_input_cases(t);
    attention_cases(t, attention_shapes());
    paged_attention_cases(t, paged_shapes());
    moe_cases(t);
    logprobs_cases(t, scoring_shapes());
    sampling_cases(t, sampling_shapes());
    adamw_cases(t);
    pg_loss_cases(t);
    elementwise_cases(t);
    sum_squares_cases(t);
    // Last, so that the seeds of the cases above stay those they were tuned with.
    residual_norm_cases(t);
    norm_rope_cases(t, norm_rope_shapes);
    paged_attention_cases(t, paged_decode_shapes());
    logprobs_cases(t, wide_scoring_shapes(), 40);
    sampling_cases(t, wide_scoring_shapes(), 40);
    logprobs_cases(t, cluster_scoring_shapes(), 40);
    // Many rows of 256, 128 and 1536 (E2B's q norm, a narrow float32 row, the residual stream):
    // the CUDA backward's blocks run more iterations than they have copy stages.
    rmsnorm_cases(t, {{20000, 256, 3}, {9000, 128, 3}, {5000, 1536, 3}});
    // Sums longer than a float32 product's k block on CUDA (256 terms): the forward's k of 600
    // (two blocks and a part), the weight gradient's k of 300 tokens (A transposed).
    linear_cases(t, {{300, 600, 24}});
    moe_layout_cases(t);
    // The narrow CUDA backward's grid of 396 blocks (three an SM): rows of 256 and 128 enough that
    // its blocks again run more iterations than they have copy stages; rows of 1792 keep the
    // forward's eight slots a thread in the table beside the six of 1536.
    rmsnorm_cases(t, {{40000, 256, 3}, {40000, 128, 3}, {300, 1792, 3}});
    // Scores rising along the keys, 5 log2 units every 64 (a d-256 key tile of the CUDA kernels;
    // 2.5 every d-512 tile of 32): the lazy rescaling moves a row's max mid-row on some tiles and
    // keeps it on others.
    attention_cases(t,
                    {{{130, 1, 77, 200}, 4, 1, 256, 0, 0.0625},
                     {{130, 1, 77, 200}, 4, 1, 256, 150, 0.0625},
                     {{97, 160}, 4, 1, 512, 0, 0.044}},
                    5.0 / 64);
    norm_rope_cases(t, norm_rope_many_rows);
    return t.cases;
  }();
  return cases;
}

/// Every public op of gpu/ops/*.h (check_sampling_params is a parameter check, not an op: no
/// context, no tensors). The coverage test requires a case for each.
const std::vector<std::string>& op_names() {
  static const std::vector<std::string> names{
      // clang-format off
      "linear_forward", "linear_backward",
      "embedding_forward", "embedding_backward",
      "rmsnorm_forward", "rmsnorm_backward", "residual_norm_forward", "rmsnorm_rope_forward",
      "rope_inv_freq", "rope_tables", "rope_forward", "rope_backward",
      "gelu_tanh_forward", "gelu_tanh_backward", "gated_gelu_forward", "gated_gelu_backward",
      "gated_gelu_fused_forward", "gated_gelu_fused_backward",
      "softcap_forward", "softcap_backward",
      "ple_combine_forward", "ple_combine_backward", "ple_gate_forward", "ple_gate_backward",
      "attention_forward", "attention_backward",
      "paged_kv_write", "paged_attention_forward",
      "moe_router_forward", "moe_router_backward", "moe_experts_forward", "moe_experts_backward",
      "logprobs_forward", "logprobs_backward",
      "sampling_forward",
      "adamw_step",
      "pg_loss_forward", "pg_loss_backward",
      "add_forward", "scale_forward", "scale_by_forward", "scale_by_backward",
      "sum_squares",
      // clang-format on
  };
  return names;
}

// ---------------------------------------------------------------------------------------------
// Independent formula checks of the float64 reference.

const exec_context ref = exec_context::cpu();

struct formula_check {
  std::string op, label;
  std::function<void()> check;
};

std::ostream& operator<<(std::ostream& o, const formula_check& c) { return o << c.op << " [" << c.label << "]"; }

host_buffer zeros(const shape_t& s) { return host_buffer(dtype::float64, s); }

void linear_formulas(std::vector<formula_check>& f) {
  struct dims {
    std::int64_t n, in, out;
  };
  for (const dims dd : {dims{1, 1, 1}, dims{7, 17, 5}, dims{17, 65, 33}})
    f.push_back({"linear_forward / linear_backward", cat("N ", dd.n, ", in ", dd.in, ", out ", dd.out), [dd] {
                   const std::int64_t n = dd.n, in = dd.in, out = dd.out;
                   const auto x = f64({n, in}, 1), w = f64({out, in}, 2), dy = f64({n, out}, 3);
                   const auto y = zeros({n, out}), dx = zeros({n, in}), dw = zeros({out, in});
                   require_ok(ops::linear_forward(ref, x, w, y));
                   require_ok(ops::linear_backward(ref, x, w, dy, dx, dw));
                   const auto ey = zeros({n, out}), edx = zeros({n, in}), edw = zeros({out, in});
                   for (std::int64_t i = 0; i < n; ++i)
                     for (std::int64_t j = 0; j < out; ++j)
                       for (std::int64_t k = 0; k < in; ++k) {
                         at(ey)[i * out + j] += at(x)[i * in + k] * at(w)[j * in + k];
                         at(edx)[i * in + k] += at(dy)[i * out + j] * at(w)[j * in + k];
                         at(edw)[j * in + k] += at(dy)[i * out + j] * at(x)[i * in + k];
                       }
                   expect_formula(y, ey, "y");
                   expect_formula(dx, edx, "dx");
                   expect_formula(dw, edw, "dw");
                 }});
}

void embedding_formulas(std::vector<formula_check>& f) {
  f.push_back({"embedding_forward / embedding_backward", "tokens 17, vocab 5, columns [16, 24) of 24, padding 0", [] {
                 const std::int64_t tokens = 17, vocab = 5, tw = 24, width = 8, cb = 16;
                 const auto ids = random_indices({tokens}, 4, 0, vocab);
                 const auto table = f64({vocab, tw}, 5), dout = f64({tokens, width}, 6);
                 const auto out = zeros({tokens, width}), dtab = zeros({vocab, tw});
                 require_ok(ops::embedding_forward(ref, ids, table, 1.5, out, cb));
                 require_ok(ops::embedding_backward(ref, ids, dout, 1.5, dtab, 0, cb));
                 const auto eo = zeros({tokens, width}), ed = zeros({vocab, tw});
                 for (std::int64_t t = 0; t < tokens; ++t) {
                   const std::int32_t id = ids.data<std::int32_t>()[t];
                   for (std::int64_t j = 0; j < width; ++j) {
                     at(eo)[t * width + j] = at(table)[id * tw + cb + j] * 1.5;
                     if (id != 0) at(ed)[id * tw + cb + j] += 1.5 * at(dout)[t * width + j];
                   }
                 }
                 expect_formula(out, eo, "out");
                 expect_formula(dtab, ed, "d_table");
               }});
}

/// (mean of the squares of row i of a [rows][d] buffer + 1e-6)^(-1/2), in double: the formulas'
/// inverse RMS.
double inverse_rms_formula(const host_buffer& v, std::int64_t i, std::int64_t d) {
  double sq = 0;
  for (std::int64_t j = 0; j < d; ++j) sq += at(v)[i * d + j] * at(v)[i * d + j];
  return 1.0 / std::sqrt(sq / static_cast<double>(d) + 1e-6);
}

void rmsnorm_formulas(std::vector<formula_check>& f) {
  struct dims {
    std::int64_t rows, d;
  };
  for (const dims dd : {dims{1, 1}, dims{7, 17}, dims{65, 64}})
    for (const bool weight : {true, false})
      f.push_back({"rmsnorm_forward", cat("rows ", dd.rows, ", d ", dd.d, weight ? ", weight" : ", scale-less"), [=] {
                     const std::int64_t rows = dd.rows, d = dd.d;
                     const auto x = f64({rows, d}, 7, -3, 3), w = f64({d}, 8, 0.5, 1.5);
                     const auto y = zeros({rows, d}), r = zeros({rows});
                     require_ok(ops::rmsnorm_forward(ref, x, weight ? tensor(w) : tensor{}, 1e-6, y, r));
                     const auto ey = zeros({rows, d}), er = zeros({rows});
                     for (std::int64_t i = 0; i < rows; ++i) {
                       at(er)[i] = inverse_rms_formula(x, i, d);
                       for (std::int64_t j = 0; j < d; ++j)
                         at(ey)[i * d + j] = at(x)[i * d + j] * at(er)[i] * (weight ? at(w)[j] : 1.0);
                     }
                     expect_formula(y, ey, "y");
                     expect_formula(r, er, "inv_rms");
                   }});
}

void residual_norm_formulas(std::vector<formula_check>& f) {
  f.push_back({"residual_norm_forward", "rows 7, d 17, branch, scale, next norm", [] {
                 const std::int64_t rows = 7, d = 17;
                 const auto x = f64({rows, d}, 51, -3, 3), w = f64({d}, 52, 0.5, 1.5), res = f64({rows, d}, 53, -2, 2);
                 const auto sc = f64({1}, 54, 0.25, 2), nw = f64({d}, 55, 0.5, 1.5);
                 ops::residual_norm_io io;
                 io.x = x;
                 io.w = w;
                 io.residual = res;
                 const auto out = zeros({rows, d}), inv = zeros({rows}), br = zeros({rows, d}), pre = zeros({rows, d}),
                            next = zeros({rows, d}), next_inv = zeros({rows});
                 io.out = out;
                 io.inv_rms = inv;
                 io.branch = br;
                 io.scale = sc;
                 io.pre_scale = pre;
                 io.next_w = nw;
                 io.next = next;
                 io.next_inv_rms = next_inv;
                 require_ok(ops::residual_norm_forward(ref, io, 1e-6));
                 const auto eo = zeros({rows, d}), ei = zeros({rows}), eb = zeros({rows, d}), ep = zeros({rows, d}),
                            en = zeros({rows, d}), eni = zeros({rows});
                 for (std::int64_t i = 0; i < rows; ++i) {
                   at(ei)[i] = inverse_rms_formula(x, i, d);
                   for (std::int64_t j = 0; j < d; ++j) {
                     const std::int64_t k = i * d + j;
                     at(eb)[k] = at(x)[k] * at(ei)[i] * at(w)[j];
                     at(ep)[k] = at(res)[k] + at(eb)[k];
                     at(eo)[k] = at(ep)[k] * at(sc)[0];
                   }
                   at(eni)[i] = inverse_rms_formula(eo, i, d);
                   for (std::int64_t j = 0; j < d; ++j) at(en)[i * d + j] = at(eo)[i * d + j] * at(eni)[i] * at(nw)[j];
                 }
                 expect_formula(out, eo, "out");
                 expect_formula(inv, ei, "inv_rms");
                 expect_formula(br, eb, "branch");
                 expect_formula(pre, ep, "pre_scale");
                 expect_formula(next, en, "next");
                 expect_formula(next_inv, eni, "next_inv_rms");
               }});
}

void rope_formulas(std::vector<formula_check>& f) {
  for (const rope_setting& r : rope_settings)
    for (const std::int64_t d : {2, 64, 512})
      f.push_back({"rope_inv_freq", cat(r.name, ", head_dim ", d), [=] {
                     host_buffer got(dtype::float32, {d / 2});
                     require_ok(ops::rope_inv_freq(ref, r.p, d, got));
                     const auto want = inv_freq_formula(r.p, d);
                     // A float32 result: float32's limits.
                     expect_formula(got, host_buffer::of<double>({d / 2}, want), "inv_freq", 1e-13,
                                    tolerance_for(dtype::float32));
                   }});
  f.push_back({"rope_tables / rope_forward / rope_backward", "tokens 17, heads 3, d 64, proportional prf 0.25", [] {
                 const rope_setting& r = rope_settings[2];
                 const auto positions = random_indices({17}, 9, 0, 8192);
                 const auto inv = as_float(inv_freq_formula(r.p, 64));
                 const auto c = zeros({17, 64}), s = zeros({17, 64});
                 require_ok(ops::rope_tables(ref, positions, float_buffer(inv), c, s));
                 const auto [ec, es] = tables_formula(positions, inv);
                 expect_formula(c, ec, "cos");
                 expect_formula(s, es, "sin");
                 const auto x = f64({17, 3, 64}, 10), y = zeros({17, 3, 64}), dx = zeros({17, 3, 64});
                 require_ok(ops::rope_forward(ref, x, ec, es, y));
                 expect_formula(y, rotate_pairs(x, ec, es, false), "y");
                 require_ok(ops::rope_backward(ref, x, ec, es, dx));
                 expect_formula(dx, rotate_pairs(x, ec, es, true), "dx (rotation by -theta)");
               }});
}

void norm_rope_formulas(std::vector<formula_check>& f) {
  f.push_back({"rmsnorm_rope_forward", "tokens 5, heads 3, d 8", [] {
                 const norm_rope_dims d{5, 3, 8, 4096, 2};
                 const auto [c, sn] = norm_rope_tables(d, 61);
                 const auto x = f64({d.tokens, d.heads, d.d}, 62, -3, 3), w = f64({d.d}, 63, 0.5, 1.5);
                 const auto y = zeros({d.tokens, d.heads, d.d}), r = zeros({d.tokens * d.heads});
                 require_ok(ops::rmsnorm_rope_forward(ref, x, w, 1e-6, c, sn, y, r));
                 const auto ey = zeros({d.tokens, d.heads, d.d}), er = zeros({d.tokens * d.heads});
                 const std::int64_t h = d.d / 2;
                 for (std::int64_t row = 0; row < d.tokens * d.heads; ++row) {
                   const std::int64_t t = row / d.heads;
                   at(er)[row] = inverse_rms_formula(x, row, d.d);
                   std::vector<double> n(static_cast<std::size_t>(d.d));
                   for (std::int64_t j = 0; j < d.d; ++j) n[static_cast<std::size_t>(j)] = at(x)[row * d.d + j] * at(er)[row] * at(w)[j];
                   for (std::int64_t j = 0; j < h; ++j) {
                     const double a = n[static_cast<std::size_t>(j)], bb = n[static_cast<std::size_t>(j + h)];
                     at(ey)[row * d.d + j] = a * at(c)[t * d.d + j] - bb * at(sn)[t * d.d + j];
                     at(ey)[row * d.d + j + h] = bb * at(c)[t * d.d + j + h] + a * at(sn)[t * d.d + j + h];
                   }
                 }
                 expect_formula(y, ey, "y");
                 expect_formula(r, er, "inv_rms");
               }});
}

void gated_mlp_formulas(std::vector<formula_check>& f) {
  f.push_back(
      {"gelu_tanh / gated_gelu / gated_gelu_fused, forward and backward", "rows 7, cols 17, |x| <= 6", [] {
         const std::int64_t n = 7, w = 17;
         const auto x = f64({n, w}, 11, -6, 6), up = f64({n, w}, 12), dy = f64({n, w}, 13);
         const auto y = zeros({n, w}), dx = zeros({n, w}), h = zeros({n, w}), dg = zeros({n, w}), du = zeros({n, w});
         require_ok(ops::gelu_tanh_forward(ref, x, y));
         require_ok(ops::gelu_tanh_backward(ref, x, dy, dx));
         require_ok(ops::gated_gelu_forward(ref, x, up, h));
         require_ok(ops::gated_gelu_backward(ref, x, up, dy, dg, du));
         const auto gu = zeros({n, 2 * w}), hf = zeros({n, w}), dgu = zeros({n, 2 * w});
         for (std::int64_t i = 0; i < n; ++i)
           for (std::int64_t j = 0; j < w; ++j) {
             at(gu)[i * 2 * w + j] = at(x)[i * w + j];
             at(gu)[i * 2 * w + w + j] = at(up)[i * w + j];
           }
         require_ok(ops::gated_gelu_fused_forward(ref, gu, hf));
         require_ok(ops::gated_gelu_fused_backward(ref, gu, dy, dgu));
         const auto ey = zeros({n, w}), edx = zeros({n, w}), eh = zeros({n, w}), edg = zeros({n, w}),
                    edu = zeros({n, w}), edgu = zeros({n, 2 * w});
         for (std::int64_t i = 0; i < n * w; ++i) {
           const double g = at(x)[i], u = at(up)[i], d = at(dy)[i];
           at(ey)[i] = gelu(g);
           at(edx)[i] = gelu_derivative(g) * d;
           at(eh)[i] = gelu(g) * u;
           at(edg)[i] = d * u * gelu_derivative(g);
           at(edu)[i] = d * gelu(g);
           at(edgu)[(i / w) * 2 * w + i % w] = at(edg)[i];
           at(edgu)[(i / w) * 2 * w + w + i % w] = at(edu)[i];
         }
         expect_formula(y, ey, "gelu y");
         expect_formula(dx, edx, "gelu dx");
         expect_formula(h, eh, "gated h");
         expect_formula(dg, edg, "gated dgate");
         expect_formula(du, edu, "gated dup");
         expect_formula(hf, eh, "fused h");
         expect_formula(dgu, edgu, "fused dgate_up");
       }});
}

void softcap_formulas(std::vector<formula_check>& f) {
  for (const double cap : {1.0, 30.0})
    f.push_back({"softcap_forward / softcap_backward", cat("rows 7, cols 17, cap ", cap, ", |x| <= 4 cap"), [=] {
                   const auto x = f64({7, 17}, 14, -4 * cap, 4 * cap), dy = f64({7, 17}, 15);
                   const auto y = zeros({7, 17}), dx = zeros({7, 17}), ey = zeros({7, 17}), edx = zeros({7, 17});
                   require_ok(ops::softcap_forward(ref, x, cap, y));
                   require_ok(ops::softcap_backward(ref, x, cap, dy, dx));
                   for (std::int64_t i = 0; i < x.numel(); ++i) {
                     const double th = std::tanh(at(x)[i] / cap);
                     at(ey)[i] = cap * th;
                     at(edx)[i] = at(dy)[i] * (1 - th * th);
                   }
                   expect_formula(y, ey, "y");
                   expect_formula(dx, edx, "dx");
                 }});
}

void per_layer_input_formulas(std::vector<formula_check>& f) {
  f.push_back({"ple_combine / ple_gate, forward and backward", "N 7, layers 3, P 17, layer 1", [] {
                 const std::int64_t n = 7, l = 3, p = 17, layer = 1;
                 const auto c = f64({n, l * p}, 16), tk = f64({n, l * p}, 17), ple = zeros({n, l * p});
                 require_ok(ops::ple_combine_forward(ref, c, tk, ple));
                 const auto dc = zeros({n, l * p}), dt = zeros({n, l * p});
                 require_ok(ops::ple_combine_backward(ref, c, dc, dt));  // c as dple
                 const auto eple = zeros({n, l * p}), edc = zeros({n, l * p});
                 for (std::int64_t i = 0; i < n * l * p; ++i) {
                   at(eple)[i] = (at(c)[i] + at(tk)[i]) / std::sqrt(2.0);
                   at(edc)[i] = at(c)[i] / std::sqrt(2.0);
                 }
                 expect_formula(ple, eple, "ple");
                 expect_formula(dc, edc, "dc");
                 expect_formula(dt, edc, "dt");
                 const auto a = f64({n, p}, 18, -4, 4), dg = f64({n, p}, 19);
                 const host_buffer ple3 = converted(eple, dtype::float64);
                 const tensor ple_view = ple3.view().reshaped({n, l, p});
                 const auto g = zeros({n, p}), da = zeros({n, p}), dple = f64({n, l, p}, 20);
                 const host_buffer dple_before = converted(dple, dtype::float64);
                 require_ok(ops::ple_gate_forward(ref, a, ple_view, layer, g));
                 require_ok(ops::ple_gate_backward(ref, a, ple_view, layer, dg, da, dple));
                 const auto eg = zeros({n, p}), eda = zeros({n, p});
                 const host_buffer edple = converted(dple_before, dtype::float64);
                 for (std::int64_t t = 0; t < n; ++t)
                   for (std::int64_t j = 0; j < p; ++j) {
                     const double av = at(a)[t * p + j], pl = at(ple3)[(t * l + layer) * p + j], d = at(dg)[t * p + j];
                     at(eg)[t * p + j] = gelu(av) * pl;
                     at(eda)[t * p + j] = gelu_derivative(av) * pl * d;
                     at(edple)[(t * l + layer) * p + j] = gelu(av) * d;  // other layers: untouched
                   }
                 expect_formula(g, eg, "g");
                 expect_formula(da, eda, "da");
                 expect_formula(dple, edple, "d_ple");
               }});
}

void attention_formulas(std::vector<formula_check>& f) {
  // attention_test.cpp checks a naive masked softmax over the whole packed batch; this one goes
  // sequence by sequence, so the two share no masking code.
  for (const attention_dims& a : attention_shapes())
    f.push_back(
        {"attention_forward", attention_label(a), [=] {
           const std::int64_t n = total(a.lengths), h = a.heads, g = a.kv_heads, d = a.d;
           const auto q = f64({n, h, d}, 21), k = f64({n, g, d}, 22), v = f64({n, g, d}, 23);
           const auto out = zeros({n, h, d}), lse = zeros({n, h});
           require_ok(ops::attention_forward(ref, q, k, v, offsets_of(a.lengths), out, lse, {a.scaling, a.window}));
           const auto eo = zeros({n, h, d}), el = zeros({n, h});
           std::int64_t begin = 0;
           for (const std::int32_t len : a.lengths) {
             for (std::int64_t i = 0; i < len; ++i)
               for (std::int64_t hd = 0; hd < h; ++hd) {
                 const std::int64_t kv = hd / (h / g);
                 const std::int64_t lo = a.window > 0 ? std::max<std::int64_t>(0, i - a.window + 1) : 0;
                 std::vector<double> score;
                 for (std::int64_t j = lo; j <= i; ++j) {
                   double dot = 0;
                   for (std::int64_t c = 0; c < d; ++c)
                     dot += at(q)[((begin + i) * h + hd) * d + c] * at(k)[((begin + j) * g + kv) * d + c];
                   score.push_back(dot * a.scaling);
                 }
                 const double mx = *std::max_element(score.begin(), score.end());
                 double z = 0;
                 for (double sc : score) z += std::exp(sc - mx);
                 at(el)[(begin + i) * h + hd] = mx + std::log(z);
                 for (std::int64_t j = lo; j <= i; ++j)
                   for (std::int64_t c = 0; c < d; ++c)
                     at(eo)[((begin + i) * h + hd) * d + c] += std::exp(score[static_cast<std::size_t>(j - lo)] - mx) /
                                                               z * at(v)[((begin + j) * g + kv) * d + c];
               }
             begin += len;
           }
           expect_formula(out, eo, "out");
           expect_formula(lse, el, "lse");
         }});
}

void paged_attention_formulas(std::vector<formula_check>& f) {
  for (const paged_layout& l : paged_shapes())
    f.push_back({"paged_kv_write / paged_attention_forward", paged_label(l), [=] {
                   const paged_inputs p = make_paged(l, 50);
                   const std::int64_t h = l.heads, g = l.kv_heads, d = l.d, bs = l.block, cols = p.table.shape()[1];
                   const auto kc = f64({p.blocks, bs, g, d}, 51), vc = f64({p.blocks, bs, g, d}, 52);
                   const auto k = f64({p.rows, g, d}, 53), v = f64({p.rows, g, d}, 54), q = f64({p.rows, h, d}, 55);
                   const host_buffer ekc = converted(kc, dtype::float64), evc = converted(vc, dtype::float64);
                   const ops::paged_rows rows{p.table, p.cu, p.positions};
                   require_ok(ops::paged_kv_write(ref, k, v, rows, kc, vc));
                   const auto out = zeros({p.rows, h, d}), lse = zeros({p.rows, h});
                   require_ok(ops::paged_attention_forward(ref, q, kc, vc, rows, out, lse, {l.scaling, l.window}));
                   const std::int32_t* table = p.table.data<std::int32_t>();
                   const std::int32_t* pos = p.positions.data<std::int32_t>();
                   const std::int32_t* cu = p.cu.data<std::int32_t>();
                   // The cache offset of position j of sequence s, kv head kv, through the table.
                   auto slot = [&](std::int64_t s, std::int64_t j, std::int64_t kv) {
                     return ((table[s * cols + j / bs] * bs + j % bs) * g + kv) * d;
                   };
                   for (std::int64_t s = 0; s + 1 < p.cu.numel(); ++s)
                     for (std::int64_t r = cu[s]; r < cu[s + 1]; ++r)
                       for (std::int64_t kv = 0; kv < g; ++kv)
                         for (std::int64_t c = 0; c < d; ++c) {
                           at(ekc)[slot(s, pos[r], kv) + c] = at(k)[(r * g + kv) * d + c];
                           at(evc)[slot(s, pos[r], kv) + c] = at(v)[(r * g + kv) * d + c];
                         }
                   expect_formula(kc, ekc, "k_cache");
                   expect_formula(vc, evc, "v_cache");
                   const auto eo = zeros({p.rows, h, d}), el = zeros({p.rows, h});
                   for (std::int64_t s = 0; s + 1 < p.cu.numel(); ++s)
                     for (std::int64_t r = cu[s]; r < cu[s + 1]; ++r)
                       for (std::int64_t hd = 0; hd < h; ++hd) {
                         const std::int64_t kv = hd / (h / g), last = pos[r];
                         const std::int64_t lo = l.window > 0 ? std::max<std::int64_t>(0, last - l.window + 1) : 0;
                         std::vector<double> score;
                         for (std::int64_t j = lo; j <= last; ++j) {
                           double dot = 0;
                           for (std::int64_t c = 0; c < d; ++c)
                             dot += at(q)[(r * h + hd) * d + c] * at(ekc)[slot(s, j, kv) + c];
                           score.push_back(dot * l.scaling);
                         }
                         const double mx = *std::max_element(score.begin(), score.end());
                         double z = 0;
                         for (double sc : score) z += std::exp(sc - mx);
                         at(el)[r * h + hd] = mx + std::log(z);
                         for (std::int64_t j = lo; j <= last; ++j)
                           for (std::int64_t c = 0; c < d; ++c)
                             at(eo)[(r * h + hd) * d + c] += std::exp(score[static_cast<std::size_t>(j - lo)] - mx) /
                                                             z * at(evc)[slot(s, j, kv) + c];
                       }
                   expect_formula(out, eo, "out");
                   expect_formula(lse, el, "lse");
                 }});
}

void moe_formulas(std::vector<formula_check>& f) {
  f.push_back({"moe_router_forward", "N 17, H 33, E 16, K 4", [] {
                 const std::int64_t n = 17, h = 33, e = 16, k = 4;
                 const router_inputs r = make_router_inputs(n, h, e, k, 24);
                 const auto w = zeros({n, k}), ren = zeros({n, k}), inv = zeros({n});
                 host_buffer idx(dtype::int32, {n, k});
                 require_ok(ops::moe_router_forward(ref, r.x, r.scale, r.proj, r.per_expert, w, idx, ren, inv));
                 const auto ew = zeros({n, k}), eren = zeros({n, k}), einv = zeros({n}), eidx = zeros({n, k});
                 for (std::int64_t t = 0; t < n; ++t) {
                   const auto p = router_probs(at(r.x) + t * h, at(r.scale), at(r.proj), h, e, 1e-6, at(einv) + t);
                   const auto order = ranked(p);
                   double sum = 0;
                   for (std::int64_t s = 0; s < k; ++s)
                     sum += p[static_cast<std::size_t>(order[static_cast<std::size_t>(s)])];
                   for (std::int64_t s = 0; s < k; ++s) {
                     const std::int64_t ex = order[static_cast<std::size_t>(s)];
                     at(eidx)[t * k + s] = static_cast<double>(ex);
                     at(eren)[t * k + s] = p[static_cast<std::size_t>(ex)] / sum;
                     at(ew)[t * k + s] = at(eren)[t * k + s] * at(r.per_expert)[ex];
                   }
                 }
                 compare(output{"indices", converted(idx, dtype::float64), true}, output{"indices", eidx, true}, 0, {});
                 expect_formula(w, ew, "weights");
                 expect_formula(ren, eren, "renormalized");
                 expect_formula(inv, einv, "inv_rms");
               }});
  f.push_back(
      {"moe_experts_forward", "N 17, H 8, E 8, Im 5, K 3 (some tokens list an expert twice)", [] {
         const std::int64_t n = 17, h = 8, e = 8, im = 5, k = 3;
         const auto y = f64({n, h}, 25), gu = f64({e, 2 * im, h}, 26, -0.5, 0.5), dn = f64({e, h, im}, 27, -0.5, 0.5);
         const auto w = f64({n, k}, 28, 0, 1), out = zeros({n, h}), eo = zeros({n, h});
         const auto idx = random_indices({n, k}, 29, 0, e);
         require_ok(ops::moe_experts_forward(ref, y, gu, dn, w, idx, out));
         for (std::int64_t t = 0; t < n; ++t)
           for (std::int64_t s = 0; s < k; ++s) {
             const std::int64_t ex = idx.data<std::int32_t>()[t * k + s];
             std::vector<double> act(static_cast<std::size_t>(im));
             for (std::int64_t j = 0; j < im; ++j) {
               double g = 0, u = 0;
               for (std::int64_t i = 0; i < h; ++i) {
                 g += at(gu)[(ex * 2 * im + j) * h + i] * at(y)[t * h + i];
                 u += at(gu)[(ex * 2 * im + im + j) * h + i] * at(y)[t * h + i];
               }
               act[static_cast<std::size_t>(j)] = gelu(g) * u;
             }
             for (std::int64_t i = 0; i < h; ++i) {
               double o = 0;
               for (std::int64_t j = 0; j < im; ++j)
                 o += at(dn)[(ex * h + i) * im + j] * act[static_cast<std::size_t>(j)];
               at(eo)[t * h + i] += at(w)[t * k + s] * o;
             }
           }
         expect_formula(out, eo, "out");
       }});
}

void scoring_formulas(std::vector<formula_check>& f) {
  for (const scoring_dims& d : scoring_shapes())
    f.push_back({"logprobs_forward / logprobs_backward", scoring_label(d), [=] {
                   const auto logits = f64({d.rows, d.v}, 30, -5, 5), dlp = f64({d.rows}, 31);
                   const auto targets = random_indices({d.rows}, 32, 0, static_cast<std::int32_t>(d.v));
                   const auto lp = zeros({d.rows}), ent = zeros({d.rows}), dl = zeros({d.rows, d.v});
                   require_ok(ops::logprobs_forward(ref, logits, targets, d.params, lp, ent));
                   require_ok(ops::logprobs_backward(ref, logits, targets, d.params, dlp, dl));
                   const auto elp = zeros({d.rows}), eent = zeros({d.rows}), edl = zeros({d.rows, d.v});
                   for (std::int64_t r = 0; r < d.rows; ++r) {
                     const filtered fr = filter_formula(at(logits) + r * d.v, d.v, d.params);
                     const std::int32_t target = targets.data<std::int32_t>()[r];
                     at(elp)[r] = fr.logprob[static_cast<std::size_t>(target)];
                     at(eent)[r] = fr.entropy;
                     if (!std::isfinite(at(elp)[r])) continue;  // a masked target gets no gradient
                     for (std::int64_t j = 0; j < d.v; ++j) {
                       const double lpj = fr.logprob[static_cast<std::size_t>(j)];
                       if (!std::isfinite(lpj)) continue;
                       at(edl)[r * d.v + j] =
                           ((j == target ? 1.0 : 0.0) - std::exp(lpj)) * at(dlp)[r] / d.params.temperature;
                     }
                   }
                   expect_formula(lp, elp, "logprobs");
                   expect_formula(ent, eent, "entropy");
                   expect_formula(dl, edl, "dlogits");
                 }});
  std::vector<scoring_dims> shapes = scoring_shapes();
  shapes.push_back({17, 33, {0.0, 0, 1.0}});
  shapes.push_back({65, 17, {0.0, 4, 0.7}});
  for (const scoring_dims& d : shapes)
    f.push_back({"sampling_forward", scoring_label(d), [=] {
                   const auto logits = f64({d.rows, d.v}, 33, -4, 4), lp = zeros({d.rows});
                   host_buffer tokens(dtype::int32, {d.rows});
                   const auto coords = coordinates_for(d.rows);
                   require_ok(ops::sampling_forward(ref, logits, d.params, coords, tokens, lp));
                   const bool greedy = d.params.temperature == 0;
                   ops::sampling_params q = d.params;
                   if (greedy) q.temperature = 1.0;
                   const auto et = zeros({d.rows}), elp = zeros({d.rows});
                   for (std::int64_t r = 0; r < d.rows; ++r) {
                     const filtered fr = filter_formula(at(logits) + r * d.v, d.v, q);
                     const std::int64_t token =
                         greedy ? fr.first : draw_formula(fr, coords[static_cast<std::size_t>(r)]).token;
                     at(et)[r] = static_cast<double>(token);
                     at(elp)[r] = fr.logprob[static_cast<std::size_t>(token)];
                   }
                   const std::vector<char> rows = unambiguous_rows(logits, d.params, true);
                   compare(output{"tokens", converted(tokens, dtype::float64), true, 0, rows},
                           output{"tokens", et, true, 0, rows}, 0, {});
                   compare(output{"logprobs", converted(lp, dtype::float64), false, 0, rows},
                           output{"logprobs", elp, false, 0, rows}, 1e-20, tolerance_for(dtype::float64));
                 }});
}

void adamw_formulas(std::vector<formula_check>& f) {
  f.push_back({"adamw_step", "n 65, steps 10..12, lr 1e-2, weight decay 0.1", [] {
                 const std::int64_t n = 65;
                 const auto p = f64({n}, 34), m1 = f64({n}, 35, -0.1, 0.1), m2 = f64({n}, 36, 0, 0.01);
                 const auto ep = converted(p, dtype::float64), em1 = converted(m1, dtype::float64),
                            em2 = converted(m2, dtype::float64);
                 for (std::int64_t k = 0; k < 3; ++k) {
                   const ops::adamw_hyper h{1e-2, 0.9, 0.999, 1e-8, 0.1, 10 + k};
                   const auto g = f64({n}, 37 + static_cast<std::uint64_t>(k));
                   require_ok(ops::adamw_step(ref, p, g, m1, m2, h));
                   for (std::int64_t i = 0; i < n; ++i) {
                     const double gi = at(g)[i];
                     at(em1)[i] = 0.9 * at(em1)[i] + 0.1 * gi;
                     at(em2)[i] = 0.999 * at(em2)[i] + 0.001 * gi * gi;
                     const double mh = at(em1)[i] / (1 - std::pow(0.9, static_cast<double>(h.step)));
                     const double vh = at(em2)[i] / (1 - std::pow(0.999, static_cast<double>(h.step)));
                     at(ep)[i] = at(ep)[i] - 1e-2 * (mh / (std::sqrt(vh) + 1e-8) + 0.1 * at(ep)[i]);
                   }
                 }
                 expect_formula(p, ep, "param");
                 expect_formula(m1, em1, "exp_avg");
                 expect_formula(m2, em2, "exp_avg_sq");
               }});
}

/// The clipped loss and its gradient as DESIGN.md section 9 and pg_loss.h state them, token by
/// token in double; returns {loss, d_lp_cur} for dloss = 1.
std::pair<double, host_buffer> pg_formula(const pg_inputs& in, const ops::pg_loss_settings& s) {
  const std::int64_t n = in.cur.numel(), seqs = in.offsets.numel() - 1;
  const auto* o = in.offsets.data<std::int32_t>();
  const host_buffer grad = zeros({n});
  double loss = 0;
  for (std::int64_t q = 0; q < seqs; ++q) {
    double masked = 0, log_ratio = 0;
    for (std::int64_t i = o[q]; i < o[q + 1]; ++i)
      if (at(in.mask)[i] != 0) {
        masked += 1;
        const double prev = s.force_on_policy_ratio ? at(in.cur)[i] : at(in.prev)[i];
        log_ratio += prev - at(in.gen)[i];
      }
    if (masked == 0) continue;
    const double geo = std::exp(log_ratio / masked);
    const bool seq_kept = geo >= s.is_ratio_min && geo <= s.is_ratio_max;
    const double norm = s.token_level_loss ? in.tokens_global : masked * in.sequences_global;
    for (std::int64_t i = o[q]; i < o[q + 1]; ++i) {
      if (at(in.mask)[i] == 0) continue;
      const double x = at(in.cur)[i], a = at(in.adv)[i], gen = at(in.gen)[i];
      const double prev = s.force_on_policy_ratio ? x : at(in.prev)[i];
      const double r = std::exp(x - prev);
      const double rc = s.force_on_policy_ratio ? r : std::clamp(r, 1 - s.ratio_clip_min, 1 + s.ratio_clip_max);
      double l = -a * r, dl = -a * r;
      if (-a * rc > l) l = -a * rc, dl = 0;
      if (s.ratio_clip_c && a < 0 && -a * *s.ratio_clip_c < l) l = -a * *s.ratio_clip_c, dl = 0;
      const double raw = std::exp(prev - gen);
      double w = 1;
      switch (s.importance) {
        case ops::importance_correction::off:
          w = 1;
          break;
        case ops::importance_correction::plain:
          w = raw;
          break;
        case ops::importance_correction::tis:
          w = std::clamp(raw, s.is_ratio_min, s.is_ratio_max);
          break;
        case ops::importance_correction::icepop:
          w = raw >= s.is_ratio_min && raw <= s.is_ratio_max ? raw : 0;
          break;
        case ops::importance_correction::seq_mask_tis:
          w = seq_kept ? raw : 0;
          break;
      }
      double kl = 0, dkl = 0;
      if (s.kl_beta > 0) {
        double u = at(in.ref)[i] - x, du = -1;
        if (std::abs(u) > s.kl_input_clamp) u = std::clamp(u, -s.kl_input_clamp, s.kl_input_clamp), du = 0;
        double k3 = std::exp(u) - 1 - u, dk3 = (std::exp(u) - 1) * du;
        if (std::abs(k3) > s.kl_output_clamp) k3 = std::clamp(k3, -s.kl_output_clamp, s.kl_output_clamp), dk3 = 0;
        if (s.use_on_policy_kl_approximation) {
          const double fw = std::exp(x - gen);
          kl = fw * k3;
          dkl = fw * dk3 + (s.kl_on_policy_weight_grad ? fw * k3 : 0);
        } else {
          kl = k3;         // f = exp(x - sg(x)): value 1
          dkl = k3 + dk3;  // and derivative 1
        }
      }
      loss += (w * l + s.kl_beta * kl) / norm;
      at(grad)[i] = (w * dl + s.kl_beta * dkl) / norm;
    }
  }
  return {loss, grad};
}

void pg_loss_formulas(std::vector<formula_check>& f) {
  for (const pg_setting& setting : pg_settings())
    f.push_back({"pg_loss_forward / pg_loss_backward", cat(setting.name, ", lengths {20, 0, 45}"), [=] {
                   const pg_inputs in = make_pg_inputs({20, 0, 45}, setting.prev_noise, 40);
                   ops::pg_loss_inputs view;
                   view.lp_cur = in.cur;
                   if (!setting.settings.force_on_policy_ratio) view.lp_prev = in.prev;
                   view.lp_gen = in.gen;
                   view.advantages = in.adv;
                   view.mask = in.mask;
                   view.lp_ref = in.ref;
                   view.seq_offsets = in.offsets;
                   view.global_token_count = in.tokens_global;
                   view.global_sequence_count = in.sequences_global;
                   const auto loss = zeros({1}), grad = zeros({in.cur.numel()});
                   require_ok(ops::pg_loss_forward(ref, view, setting.settings, loss));
                   require_ok(ops::pg_loss_backward(ref, view, setting.settings, 1.0, grad));
                   const auto [want_loss, want_grad] = pg_formula(in, setting.settings);
                   expect_formula(loss, scalar(want_loss), "loss");
                   expect_formula(grad, want_grad, "d_lp_cur");
                 }});
}

void elementwise_formulas(std::vector<formula_check>& f) {
  f.push_back(
      {"add / scale / scale_by, forward and backward", "rows 7, cols 17", [] {
         const auto a = f64({7, 17}, 41), bb = f64({7, 17}, 42), s = f64({1}, 43, 0.1, 2), dy = f64({7, 17}, 44);
         const auto y1 = zeros({7, 17}), y2 = zeros({7, 17}), y3 = zeros({7, 17}), dx = zeros({7, 17});
         const auto ds = host_buffer::of<double>({1}, {0.25});
         require_ok(ops::add_forward(ref, a, bb, y1));
         require_ok(ops::scale_forward(ref, a, -0.75, y2));
         require_ok(ops::scale_by_forward(ref, a, s, y3));
         require_ok(ops::scale_by_backward(ref, a, s, dy, dx, ds));
         const auto e1 = zeros({7, 17}), e2 = zeros({7, 17}), e3 = zeros({7, 17}), edx = zeros({7, 17});
         double eds = 0.25;
         for (std::int64_t i = 0; i < a.numel(); ++i) {
           at(e1)[i] = at(a)[i] + at(bb)[i];
           at(e2)[i] = at(a)[i] * -0.75;
           at(e3)[i] = at(a)[i] * at(s)[0];
           at(edx)[i] = at(dy)[i] * at(s)[0];
           eds += at(dy)[i] * at(a)[i];
         }
         expect_formula(y1, e1, "add y");
         expect_formula(y2, e2, "scale y");
         expect_formula(y3, e3, "scale_by y");
         expect_formula(dx, edx, "scale_by dx");
         expect_formula(ds, scalar(eds), "scale_by ds");
       }});
}

const std::vector<formula_check>& formula_list() {
  static const std::vector<formula_check> checks = [] {
    std::vector<formula_check> f;
    linear_formulas(f);
    embedding_formulas(f);
    rmsnorm_formulas(f);
    residual_norm_formulas(f);
    rope_formulas(f);
    norm_rope_formulas(f);
    gated_mlp_formulas(f);
    softcap_formulas(f);
    per_layer_input_formulas(f);
    attention_formulas(f);
    paged_attention_formulas(f);
    moe_formulas(f);
    scoring_formulas(f);
    adamw_formulas(f);
    pg_loss_formulas(f);
    elementwise_formulas(f);
    return f;
  }();
  return checks;
}

// ---------------------------------------------------------------------------------------------
// Device refusals.

/// A view of `b` that claims to live on `dev` (never dereferenced when dev is not the CPU: the
/// device check comes first).
tensor on(const host_buffer& b, device dev) { return tensor::contiguous(b.data<void>(), b.type(), b.shape(), dev); }

struct refusal {
  std::string op;
  std::function<status(const exec_context&, device)> call;  ///< every tensor on the given device
};

std::vector<refusal> refusals() {
  const host_buffer m22(dtype::float32, {2, 2}), v2(dtype::float32, {2}), v1(dtype::float32, {1});
  const host_buffer q(dtype::float32, {2, 1, 2}), lse(dtype::float32, {2, 1}), i2(dtype::int32, {2}),
      i21(dtype::int32, {2, 1}), cu = offsets_of({2}), gu(dtype::float32, {2, 2, 2}), dn(dtype::float32, {2, 2, 1}),
                                 ple(dtype::float32, {2, 1, 2}), cache(dtype::float32, {1, 2, 1, 2}),
                                 table(dtype::int32, {1, 1});
  const host_buffer pos = host_buffer::of<std::int32_t>({2}, {0, 1});
  return {
      {"linear_forward",
       [=](const exec_context& c, device d) { return ops::linear_forward(c, on(m22, d), on(m22, d), on(m22, d)); }},
      {"embedding_forward",
       [=](const exec_context& c, device d) {
         return ops::embedding_forward(c, on(i2, d), on(m22, d), 1.0, on(m22, d));
       }},
      {"rmsnorm_backward",
       [=](const exec_context& c, device d) {
         return ops::rmsnorm_backward(c, on(m22, d), on(v2, d), on(v2, d), on(m22, d), on(m22, d), on(v2, d));
       }},
      {"residual_norm_forward",
       [=](const exec_context& c, device d) {
         const host_buffer x(dtype::float32, {2, 2}), residual(dtype::float32, {2, 2}), out(dtype::float32, {2, 2});
         ops::residual_norm_io io;
         io.x = on(x, d);
         io.w = on(v2, d);
         io.residual = on(residual, d);
         io.out = on(out, d);
         return ops::residual_norm_forward(c, io, 1e-6);
       }},
      {"rmsnorm_rope_forward",
       [=](const exec_context& c, device d) {
         return ops::rmsnorm_rope_forward(c, on(q, d), on(v2, d), 1e-6, on(m22, d), on(m22, d), on(q, d));
       }},
      {"rope_inv_freq", [=](const exec_context& c, device d) { return ops::rope_inv_freq(c, {}, 4, on(v2, d)); }},
      {"rope_tables", [=](const exec_context& c,
                          device d) { return ops::rope_tables(c, on(i2, d), on(v1, d), on(m22, d), on(m22, d)); }},
      {"gelu_tanh_forward",
       [=](const exec_context& c, device d) { return ops::gelu_tanh_forward(c, on(m22, d), on(m22, d)); }},
      {"softcap_backward",
       [=](const exec_context& c, device d) {
         return ops::softcap_backward(c, on(m22, d), 30.0, on(m22, d), on(m22, d));
       }},
      {"ple_gate_forward", [=](const exec_context& c,
                               device d) { return ops::ple_gate_forward(c, on(m22, d), on(ple, d), 0, on(m22, d)); }},
      {"attention_forward",
       [=](const exec_context& c, device d) {
         return ops::attention_forward(c, on(q, d), on(q, d), on(q, d), on(cu, d), on(q, d), on(lse, d));
       }},
      {"paged_attention_forward",
       [=](const exec_context& c, device d) {
         return ops::paged_attention_forward(c, on(q, d), on(cache, d), on(cache, d),
                                             {on(table, d), on(cu, d), on(pos, d)}, on(q, d), on(lse, d));
       }},
      {"moe_experts_forward",
       [=](const exec_context& c, device d) {
         return ops::moe_experts_forward(c, on(m22, d), on(gu, d), on(dn, d), on(v2, d).reshaped({2, 1}), on(i21, d),
                                         on(m22, d));
       }},
      {"logprobs_forward",
       [=](const exec_context& c, device d) { return ops::logprobs_forward(c, on(m22, d), on(i2, d), {}, on(v2, d)); }},
      {"sampling_forward",
       [=](const exec_context& c, device d) {
         return ops::sampling_forward(c, on(m22, d), {}, coordinates_for(2), on(i2, d), on(v2, d));
       }},
      {"adamw_step", [=](const exec_context& c,
                         device d) { return ops::adamw_step(c, on(v2, d), on(v2, d), on(v2, d), on(v2, d), {}); }},
      {"pg_loss_backward",
       [=](const exec_context& c, device d) {
         ops::pg_loss_inputs in;
         in.lp_cur = in.lp_prev = in.lp_gen = in.advantages = in.mask = on(v2, d);
         in.seq_offsets = on(cu, d);
         in.global_token_count = 1;
         return ops::pg_loss_backward(c, in, {}, 1.0, on(v2, d));
       }},
      {"scale_by_backward",
       [=](const exec_context& c, device d) {
         return ops::scale_by_backward(c, on(m22, d), on(v1, d), on(m22, d), on(m22, d), on(v1, d));
       }},
  };
}

// ---------------------------------------------------------------------------------------------
// Limits of the bfloat16 backend (the file comment says why).

struct limits {
  double nmse;
  tolerance tol;
};

/// Ops the bfloat16 backend leaves to the float32 one: their floating tensors are float32 on
/// every backend (the loss), or their cases choose every dtype themselves (AdamW's float32 and
/// bfloat16 master weights and moments), so a second run would repeat the first.
const std::set<std::string>& float32_only_ops() {
  static const std::set<std::string> ops{"pg_loss_forward", "pg_loss_backward", "adamw_step"};
  return ops;
}

/// The bfloat16 backend's limits of a case: its own tolerance where it sets one (with the reason).
limits bf16_limits(const op_case& c) { return {1e-4, c.bf16_tol.value_or(tolerance{2e-2, 2e-2})}; }

}  // namespace

BOOST_AUTO_TEST_SUITE(backend_ops)

BOOST_DATA_TEST_CASE(every_backend_matches_the_float64_reference_on_every_case,
                     bdata::make(backends()) * bdata::make(case_list()), b, c) {
  BOOST_TEST_CONTEXT("backend " << b.name << ", op " << c.op << ", case " << c.label) {
    BOOST_TEST_REQUIRE((b.compute == dtype::float32 || b.compute == dtype::bfloat16),
                       "this table has limits for float32 and bfloat16 compute only, not " << to_string(b.compute));
    const bool bf16 = b.compute == dtype::bfloat16;
    if (bf16 && float32_only_ops().count(c.op)) {
      BOOST_TEST_MESSAGE(c.op << " stores float32 on every backend: run by the float32 backend");
      return;
    }
    const limits lim = bf16 ? bf16_limits(c) : limits{c.max_nmse, c.tol};
    const outputs want = c.run(reference_of(b));
    const outputs got = c.run(b);
    BOOST_TEST_REQUIRE(got.size() == want.size());
    BOOST_TEST_REQUIRE(!want.empty());
    for (std::size_t i = 0; i < want.size(); ++i) {
      const std::int64_t compared =
          want[i].rows.empty() ? 1 : std::count(want[i].rows.begin(), want[i].rows.end(), char{1});
      BOOST_TEST(compared > 0, want[i].name << ": no row is unambiguous enough to compare");
      // A per-output limit (an ill-conditioned output, explained at its case) holds on bfloat16
      // too when it is looser than the backend's.
      const double nmse = want[i].max_nmse > 0 ? (bf16 ? std::max(want[i].max_nmse, lim.nmse) : want[i].max_nmse)
                                               : lim.nmse;
      compare(got[i], want[i], nmse, lim.tol);
    }
  }
}

BOOST_DATA_TEST_CASE(the_float64_reference_matches_an_independent_formula, bdata::make(formula_list()), f) {
  BOOST_TEST_CONTEXT("op " << f.op << ", case " << f.label) { f.check(); }
}

BOOST_AUTO_TEST_CASE(every_op_has_a_case_and_every_case_names_a_listed_op) {
  std::set<std::string> covered;
  for (const op_case& c : case_list()) {
    covered.insert(c.op);
    BOOST_TEST((std::find(op_names().begin(), op_names().end(), c.op) != op_names().end()),
               "case " << c << " names an op missing from op_names()");
  }
  for (const std::string& op : op_names()) BOOST_TEST(covered.count(op) == 1u, op << " has no case in the table");
  BOOST_TEST_MESSAGE(case_list().size() << " cases over " << covered.size() << " ops, " << formula_list().size()
                                        << " independent formula checks");
#ifdef TANDEM_SOURCE_DIR
  // The public headers: every `status name(const exec_context& ...` is an op that op_names() must list.
  const std::filesystem::path dir = std::filesystem::path(TANDEM_SOURCE_DIR) / "gpu" / "ops";
  if (!std::filesystem::is_directory(dir)) {
    BOOST_TEST_MESSAGE("no " << dir << " to scan; the header scan is skipped");
    return;
  }
  const std::regex declaration(R"(status\s+(\w+)\s*\(\s*const\s+exec_context\s*&)");
  std::set<std::string> declared;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    // dispatch.h's on_backend and dispatch_float are the ops' dispatch helpers, not ops.
    if (entry.path().extension() != ".h" || entry.path().filename() == "dispatch.h") continue;
    std::ifstream in(entry.path());
    const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    for (auto it = std::sregex_iterator(text.begin(), text.end(), declaration); it != std::sregex_iterator(); ++it)
      declared.insert((*it)[1].str());
  }
  BOOST_TEST(!declared.empty());
  for (const std::string& op : declared)
    BOOST_TEST((std::find(op_names().begin(), op_names().end(), op) != op_names().end()),
               op << " is declared in gpu/ops/ but missing from op_names()");
  for (const std::string& op : op_names())
    BOOST_TEST(declared.count(op) == 1u, op << " is not declared in gpu/ops/*.h");
#endif
}

BOOST_DATA_TEST_CASE(residual_norm_forward_gives_the_bits_of_the_norm_the_add_the_scale_and_the_next_norm_in_turn,
                     bdata::make(backends()), b) {
  for (const residual_dims& d : residual_shapes)
    for (const residual_options& o : residual_variants) {
      BOOST_TEST_CONTEXT("backend " << b.name << ", " << residual_label(d.rows, d.d, o)) {
        const outputs fused = run_residual_norm(b, d.rows, d.d, o, 77);
        const outputs in_turn = run_residual_norm_in_turn(b, d.rows, d.d, o, 77);
        BOOST_TEST_REQUIRE(fused.size() == in_turn.size());
        for (std::size_t i = 0; i < fused.size(); ++i) {
          BOOST_TEST_REQUIRE(fused[i].name == in_turn[i].name);
          const host_buffer& a = fused[i].value;
          const host_buffer& e = in_turn[i].value;
          BOOST_TEST_REQUIRE(a.numel() == e.numel());
          std::int64_t differ = 0;
          for (std::int64_t k = 0; k < a.numel(); ++k) differ += std::memcmp(at(a) + k, at(e) + k, sizeof(double)) != 0;
          BOOST_TEST(differ == 0, fused[i].name << ": " << differ << " of " << a.numel() << " elements differ");
        }
      }
    }
}

BOOST_DATA_TEST_CASE(rmsnorm_rope_forward_gives_the_bits_of_the_norm_then_the_rotation, bdata::make(backends()), b) {
  std::vector<norm_rope_dims> shapes(std::begin(norm_rope_shapes), std::end(norm_rope_shapes));
  shapes.insert(shapes.end(), std::begin(norm_rope_many_rows), std::end(norm_rope_many_rows));
  for (const norm_rope_dims& d : shapes)
    for (const bool in_place : {false, true}) {
      BOOST_TEST_CONTEXT("backend " << b.name << ", " << norm_rope_label(d) << (in_place ? ", in place" : "")) {
        const outputs fused = run_norm_rope(b, d, in_place, false, 91);
        const outputs in_turn = run_norm_rope(b, d, in_place, true, 91);
        for (std::size_t i = 0; i < fused.size(); ++i) {
          const host_buffer& a = fused[i].value;
          const host_buffer& e = in_turn[i].value;
          BOOST_TEST_REQUIRE(a.numel() == e.numel());
          std::int64_t differ = 0;
          for (std::int64_t k = 0; k < a.numel(); ++k) differ += std::memcmp(at(a) + k, at(e) + k, sizeof(double)) != 0;
          BOOST_TEST(differ == 0, fused[i].name << ": " << differ << " of " << a.numel() << " elements differ");
        }
      }
    }
}

BOOST_AUTO_TEST_CASE(a_tensor_on_another_device_than_the_context_is_refused_naming_the_op) {
  exec_context cuda_ctx = exec_context::cpu();
  cuda_ctx.dev = device::cuda(0);
  for (const refusal& r : refusals()) {
    // CPU tensors, a CUDA context.
    const status a = r.call(cuda_ctx, device::cpu());
    BOOST_TEST_CONTEXT(r.op << " with CPU tensors on a cuda:0 context: " << a.message()) {
      BOOST_TEST((a.code() == status_code::invalid_argument));
      BOOST_TEST(a.message().rfind(r.op + ": ", 0) == 0u);
      BOOST_TEST(a.message().find("is on cpu, but the call runs on cuda:0") != std::string::npos);
    }
    // cuda:0 tensors, the CPU context.
    const status b = r.call(exec_context::cpu(), device::cuda(0));
    BOOST_TEST_CONTEXT(r.op << " with cuda:0 tensors on the CPU context: " << b.message()) {
      BOOST_TEST((b.code() == status_code::invalid_argument));
      BOOST_TEST(b.message().rfind(r.op + ": ", 0) == 0u);
      BOOST_TEST(b.message().find("is on cuda:0, but the call runs on cpu") != std::string::npos);
    }
  }
}

BOOST_AUTO_TEST_SUITE_END()
