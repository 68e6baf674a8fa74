// Tensors past 2^31 elements on the CUDA backend: Gemma 4 E2B's per-layer embedding table is
// [262144, 35 · 256] = 2,348,810,240 elements. Its lookup, its gradient and its AdamW update must
// address every element with 64-bit offsets: the rows checked here lie past element 2^31 (and one
// straddles it), where a 32-bit index would wrap to the table's start.
#include <boost/test/unit_test.hpp>

#include <cmath>
#include <cstdint>
#include <vector>

#include "support/cuda_buffers.h"
#include "support/cuda_context.h"
#include "gpu/core/exec_context.h"
#include "gpu/core/half.h"
#include "gpu/core/host_buffer.h"
#include "gpu/ops/adamw.h"
#include "gpu/ops/embedding.h"

using namespace tandem::gpu;
using tandem::test::cuda::device_buffer;

namespace {

void require_ok(const status& s) { BOOST_REQUIRE_MESSAGE(s.is_ok(), s.message()); }

constexpr std::int64_t vocab = 262144, width = 35 * 256;  // 2,348,810,240 elements
constexpr std::int64_t boundary_row = (std::int64_t{1} << 31) / width;  // holds element 2^31

double bf16(double v) { return to_float(to_bfloat16(static_cast<float>(v))); }

std::vector<float> row_values(std::int64_t row) {
  std::vector<float> v(static_cast<std::size_t>(width));
  for (std::int64_t j = 0; j < width; ++j) v[static_cast<std::size_t>(j)] = static_cast<float>(((row + 3 * j) % 97) - 48) / 64.f;
  return v;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(cuda_large_tensors)

BOOST_AUTO_TEST_CASE(a_table_past_two_to_the_31_elements_is_looked_up_and_gets_its_gradient_at_its_last_rows) {
  static_assert(vocab * width > (std::int64_t{1} << 31));
  const exec_context ctx = tandem::test::cuda::test_context();
  device_buffer table(dtype::bfloat16, {vocab, width});
  const std::vector<std::int64_t> rows{vocab - 1, boundary_row, 7};
  for (std::int64_t r : rows) table.upload_floats_at(r * width, row_values(r));

  // Lookup: ids {last, boundary, 7, last}, scale 16 (exact in bfloat16: a power of two).
  const std::vector<std::int32_t> id_values{static_cast<std::int32_t>(vocab - 1), static_cast<std::int32_t>(boundary_row), 7,
                                            static_cast<std::int32_t>(vocab - 1)};
  device_buffer ids(dtype::int32, {4}), out(dtype::bfloat16, {4, width});
  ids.upload_ints(id_values);
  require_ok(ops::embedding_forward(ctx, ids.view(), table.view(), 16.0, out.view()));
  for (std::size_t t = 0; t < id_values.size(); ++t) {
    const std::vector<double> got = out.floats_at(static_cast<std::int64_t>(t) * width, width);
    const std::vector<float> want = row_values(id_values[t]);
    std::int64_t bad = 0;
    for (std::int64_t j = 0; j < width; ++j) bad += got[static_cast<std::size_t>(j)] != bf16(16.0 * want[static_cast<std::size_t>(j)]);
    BOOST_TEST(bad == 0, "token " << t << " (row " << id_values[t] << "): " << bad << " of " << width << " elements wrong");
  }

  // Gradient: d_table[id] += 16 · dout[t]; the last row appears twice (tokens 0 and 3).
  device_buffer dout(dtype::bfloat16, {4, width}), d_table(dtype::bfloat16, {vocab, width});
  std::vector<float> dout_host(static_cast<std::size_t>(4 * width));
  for (std::size_t i = 0; i < dout_host.size(); ++i) dout_host[i] = static_cast<float>(static_cast<int>(i % 13) - 6) / 8.f;
  dout.upload_floats(dout_host);
  require_ok(ops::embedding_backward(ctx, ids.view(), dout.view(), 16.0, d_table.view()));
  const auto dv = [&](std::size_t t, std::int64_t j) { return static_cast<double>(dout_host[t * static_cast<std::size_t>(width) + static_cast<std::size_t>(j)]); };
  struct expect_row {
    std::int64_t row;
    std::vector<std::size_t> tokens;
  };
  for (const expect_row& e : {expect_row{vocab - 1, {0, 3}}, expect_row{boundary_row, {1}}, expect_row{7, {2}},
                              expect_row{vocab - 2, {}}}) {
    const std::vector<double> got = d_table.floats_at(e.row * width, width);
    std::int64_t bad = 0;
    for (std::int64_t j = 0; j < width; ++j) {
      double sum = 0;
      for (std::size_t t : e.tokens) sum += 16.0 * dv(t, j);  // small multiples of 1/8 times 16: exact
      bad += got[static_cast<std::size_t>(j)] != sum;
    }
    BOOST_TEST(bad == 0, "d_table row " << e.row << ": " << bad << " of " << width << " elements wrong");
  }
}

BOOST_AUTO_TEST_CASE(an_adamw_step_over_more_than_two_to_the_31_elements_updates_the_last_ones) {
  const exec_context ctx = tandem::test::cuda::test_context();
  const std::int64_t n = vocab * width;
  device_buffer param(dtype::bfloat16, {n}), grad(dtype::float32, {n}), m(dtype::bfloat16, {n}), v(dtype::bfloat16, {n});
  // Known values at the end and around element 2^31; zero elsewhere (a zero gradient still moves
  // nothing but the decay).
  const std::int64_t span = 4096;
  const std::vector<std::int64_t> starts{n - span, (std::int64_t{1} << 31) - span / 2};
  std::vector<float> p0(span), g0(span);
  for (std::int64_t i = 0; i < span; ++i) {
    p0[static_cast<std::size_t>(i)] = static_cast<float>((i % 29) - 14) / 16.f;
    g0[static_cast<std::size_t>(i)] = static_cast<float>((i % 31) - 15) / 32.f;
  }
  for (std::int64_t s : starts) {
    param.upload_floats_at(s, p0);
    grad.upload_floats_at(s, g0);
  }
  ops::adamw_hyper h;
  h.lr = 1e-2;
  h.weight_decay = 0.1;
  require_ok(ops::adamw_step(ctx, param.view(), grad.view(), m.view(), v.view(), h));

  // The CPU reference on the same values in the same dtypes.
  host_buffer hp(dtype::bfloat16, {span}), hg(dtype::float32, {span}), hm(dtype::bfloat16, {span}), hv(dtype::bfloat16, {span});
  for (std::int64_t i = 0; i < span; ++i) {
    hp.data<bfloat16>()[i] = to_bfloat16(p0[static_cast<std::size_t>(i)]);
    hg.data<float>()[i] = g0[static_cast<std::size_t>(i)];
  }
  require_ok(ops::adamw_step(exec_context::cpu(), hp.view(), hg.view(), hm.view(), hv.view(), h));
  for (std::int64_t s : starts) {
    BOOST_TEST_CONTEXT("elements from " << s) {
      const std::vector<double> gp = param.floats_at(s, span), gm = m.floats_at(s, span), gv = v.floats_at(s, span);
      std::int64_t bad = 0;
      for (std::int64_t i = 0; i < span; ++i) {
        // One bfloat16 step apart at most: CUDA fuses multiply-adds, the CPU does not.
        const auto off = [](double a, double b) { return std::fabs(a - b) > std::fabs(b) * (1.0 / 128) + 1e-30; };
        bad += off(gp[static_cast<std::size_t>(i)], to_float(hp.data<bfloat16>()[i])) ||
               off(gm[static_cast<std::size_t>(i)], to_float(hm.data<bfloat16>()[i])) ||
               off(gv[static_cast<std::size_t>(i)], to_float(hv.data<bfloat16>()[i]));
      }
      BOOST_TEST(bad == 0, bad << " of " << span << " elements differ from the CPU's update");
    }
  }
  // An untouched element far from both spans: only the decay moved it (0 stays 0).
  BOOST_TEST(param.floats_at(n / 2, 1)[0] == 0.0);
}

BOOST_AUTO_TEST_SUITE_END()
