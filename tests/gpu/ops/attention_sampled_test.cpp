// The CUDA attention backward on a batch large enough that its tensor-core dK/dV pass runs one
// block (d 256) or one cluster of two blocks (d 512) per key tile (no split of a tile's work, so the
// blocks add their bf16 results straight into dk and dv, a path the op table's small shapes never
// reach: they always split), checked against a
// float64 reference computed on the host at sampled positions: the first, second, last and middle
// keys of each sequence and those around the 64-key tiles' edges, for every kv head, and the same
// positions as queries for dq, for every query head.
//
// 8192 tokens in three sequences, 8 query heads on 4 kv heads, head dims 256 and 512, bf16: 131 key
// tiles x 4 kv heads = 524 units, more than three per SM (d 256) or per pair of SMs (d 512) on an
// H200 (132 SMs), so one split. The
// reference takes q, k, v, dout and the forward's out and lse from the device (the forward is
// checked by the op table), so it checks the backward alone.
#include <boost/test/data/test_case.hpp>
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "support/cuda_buffers.h"
#include "support/cuda_context.h"
#include "gpu/core/exec_context.h"
#include "gpu/ops/attention.h"

using namespace tandem::gpu;
using tandem::test::cuda::device_buffer;
namespace bdata = boost::unit_test::data;

// A named namespace: the data test case's lambdas capture these types (-Wsubobject-linkage).
namespace attention_sampled {

void require_ok(const status& s) { BOOST_REQUIRE_MESSAGE(s.is_ok(), s.message()); }

constexpr std::int64_t H = 8, G = 4;
const std::vector<std::int32_t> lengths{4999, 64, 3129};

/// A [tokens, heads, d] tensor read back as float64, row (t, h) at (t · heads + h) · d.
struct rows {
  std::vector<double> v;
  std::int64_t heads, d;
  const double* at(std::int64_t t, std::int64_t h) const { return v.data() + (t * heads + h) * d; }
};

double dot(const double* a, const double* b, std::int64_t d) {
  double s = 0;
  for (std::int64_t c = 0; c < d; ++c) s += a[c] * b[c];
  return s;
}

/// Positions sampled in a sequence of length n: its ends, its middle and the 64-key tiles' edges.
std::vector<std::int64_t> sampled_positions(std::int64_t n) {
  std::set<std::int64_t> p;
  for (std::int64_t x : {std::int64_t{0}, std::int64_t{1}, std::int64_t{63}, std::int64_t{64}, std::int64_t{65}, n / 2,
                         n - 65, n - 64, n - 1})
    if (x >= 0 && x < n) p.insert(x);
  return {p.begin(), p.end()};
}

/// Sum of squared errors and of squared references, and the largest error and reference.
struct error_sums {
  double err2 = 0, ref2 = 0, max_err = 0, max_ref = 0;
  void add(const double* got, const double* want, std::int64_t d) {
    for (std::int64_t c = 0; c < d; ++c) {
      const double e = got[c] - want[c];
      err2 += e * e;
      ref2 += want[c] * want[c];
      max_err = std::max(max_err, std::abs(e));
      max_ref = std::max(max_ref, std::abs(want[c]));
    }
  }
};

void check(const std::string& what, const error_sums& e) {
  BOOST_TEST_MESSAGE(what << ": NMSE " << e.err2 / e.ref2 << ", max error " << e.max_err << " of max " << e.max_ref);
  BOOST_TEST(e.ref2 > 0, what << ": the reference is all zeros");
  BOOST_TEST(e.err2 / e.ref2 <= 1e-4, what << ": NMSE " << e.err2 / e.ref2 << " above 1e-4");
  BOOST_TEST(e.max_err <= 0.02 * e.max_ref, what << ": max error " << e.max_err << " above 2% of " << e.max_ref);
}

}  // namespace attention_sampled

using namespace attention_sampled;

BOOST_AUTO_TEST_SUITE(cuda_attention_sampled)

BOOST_DATA_TEST_CASE(a_backward_with_one_block_per_key_tile_matches_a_float64_reference_at_sampled_positions,
                     bdata::make(std::vector<std::int64_t>{0, 1000}) * bdata::make(std::vector<std::int64_t>{256, 512}),
                     window, D) {
  const exec_context ctx = tandem::test::cuda::test_context();
  std::vector<std::int32_t> cu{0};
  for (auto n : lengths) cu.push_back(cu.back() + n);
  const std::int64_t T = cu.back();
  const double scale = 1.0 / std::sqrt(static_cast<double>(D));
  device_buffer q(dtype::bfloat16, {T, H, D}), k(dtype::bfloat16, {T, G, D}), v(dtype::bfloat16, {T, G, D});
  device_buffer dout(dtype::bfloat16, {T, H, D}), out(dtype::bfloat16, {T, H, D}), lse(dtype::float32, {T, H});
  device_buffer dq(dtype::bfloat16, {T, H, D}), dk(dtype::bfloat16, {T, G, D}), dv(dtype::bfloat16, {T, G, D});
  device_buffer cu_seqlens(dtype::int32, {static_cast<std::int64_t>(cu.size())});
  q.fill_uniform(11);
  k.fill_uniform(12);
  v.fill_uniform(13);
  dout.fill_uniform(14);
  dk.upload_floats(std::vector<float>(static_cast<std::size_t>(T * G * D), 0.f));  // dk and dv are added to
  dv.upload_floats(std::vector<float>(static_cast<std::size_t>(T * G * D), 0.f));
  cu_seqlens.upload_ints(cu);
  ops::attention_options o;
  o.scaling = scale;
  o.sliding_window = window;
  require_ok(ops::attention_forward(ctx, q.view(), k.view(), v.view(), cu_seqlens.view(), out.view(), lse.view(), o));
  require_ok(ops::attention_backward(ctx, q.view(), k.view(), v.view(), cu_seqlens.view(), lse.view(), dout.view(),
                                     dq.view(), dk.view(), dv.view(), o, false, out.view()));

  const rows hq{q.floats_at(0, T * H * D), H, D}, hk{k.floats_at(0, T * G * D), G, D}, hv{v.floats_at(0, T * G * D), G, D};
  const rows hdo{dout.floats_at(0, T * H * D), H, D}, hout{out.floats_at(0, T * H * D), H, D};
  const rows gdq{dq.floats_at(0, T * H * D), H, D}, gdk{dk.floats_at(0, T * G * D), G, D};
  const rows gdv{dv.floats_at(0, T * G * D), G, D};
  const std::vector<double> hlse = lse.floats_at(0, T * H);
  // whether query position i sees key position j of the same sequence
  const auto sees = [&](std::int64_t i, std::int64_t j) { return j <= i && (window <= 0 || j > i - window); };
  const auto p_ds = [&](std::int64_t ti, std::int64_t h, std::int64_t tj, double& p, double& ds) {
    const std::int64_t g = h / (H / G);
    p = std::exp(scale * dot(hq.at(ti, h), hk.at(tj, g), D) - hlse[static_cast<std::size_t>(ti * H + h)]);
    ds = p * (dot(hdo.at(ti, h), hv.at(tj, g), D) - dot(hdo.at(ti, h), hout.at(ti, h), D));
  };

  error_sums edk, edv, edq;
  std::vector<double> rk(static_cast<std::size_t>(D)), rv(static_cast<std::size_t>(D)), rq(static_cast<std::size_t>(D));
  for (std::size_t s = 0; s + 1 < cu.size(); ++s) {
    const std::int64_t start = cu[s], n = cu[s + 1] - cu[s];
    for (const std::int64_t j : sampled_positions(n)) {
      for (std::int64_t g = 0; g < G; ++g) {  // dk, dv of key j
        std::fill(rk.begin(), rk.end(), 0.0);
        std::fill(rv.begin(), rv.end(), 0.0);
        for (std::int64_t h = g * (H / G); h < (g + 1) * (H / G); ++h)
          for (std::int64_t i = j; i < n; ++i) {
            if (!sees(i, j)) break;
            double p, ds;
            p_ds(start + i, h, start + j, p, ds);
            const double* qi = hq.at(start + i, h);
            const double* doi = hdo.at(start + i, h);
            for (std::int64_t c = 0; c < D; ++c) {
              rv[c] += p * doi[c];
              rk[c] += scale * ds * qi[c];
            }
          }
        edk.add(gdk.at(start + j, g), rk.data(), D);
        edv.add(gdv.at(start + j, g), rv.data(), D);
      }
      for (std::int64_t h = 0; h < H; ++h) {  // dq of query j
        std::fill(rq.begin(), rq.end(), 0.0);
        for (std::int64_t jj = 0; jj <= j; ++jj) {
          if (!sees(j, jj)) continue;
          double p, ds;
          p_ds(start + j, h, start + jj, p, ds);
          const double* kj = hk.at(start + jj, h / (H / G));
          for (std::int64_t c = 0; c < D; ++c) rq[c] += scale * ds * kj[c];
        }
        edq.add(gdq.at(start + j, h), rq.data(), D);
      }
    }
  }
  check("dk", edk);
  check("dv", edv);
  check("dq", edq);
}

BOOST_AUTO_TEST_SUITE_END()
