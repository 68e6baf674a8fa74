// RoPE: default and proportional inverse frequencies, cos/sin tables from positions, the NeoX
// half-split rotation by hand, float32 against the float64 reference, backward = inverse rotation
// (and finite differences), zero-frequency pass-through, refused arguments.
#include <boost/test/unit_test.hpp>

#include <cmath>
#include <cstdint>
#include <vector>

#include "gpu/ops/rope.h"
#include "support/op_harness.h"

#include "gpu/core/exec_context.h"

namespace {
// Every op of this file runs on the CPU, on the calling thread.
const tandem::gpu::exec_context ctx = tandem::gpu::exec_context::cpu();
}  // namespace

using namespace tandem::gpu;
using namespace tandem::test;

namespace {

// inv_freq [d/2] for `p`, required to succeed.
host_buffer inv_freq_of(const ops::rope_parameters& p, std::int64_t d) {
  host_buffer inv(dtype::float32, {d / 2});
  BOOST_REQUIRE(ops::rope_inv_freq(ctx, p, d, inv).is_ok());
  return inv;
}

// cos and sin [n, d] of `type` for positions, required to succeed.
struct tables {
  host_buffer cos, sin;
};
tables tables_of(const host_buffer& positions, const host_buffer& inv, dtype type) {
  const std::int64_t n = positions.numel(), d = 2 * inv.numel();
  tables t{host_buffer(type, {n, d}), host_buffer(type, {n, d})};
  BOOST_REQUIRE(ops::rope_tables(ctx, positions, inv, t.cos, t.sin).is_ok());
  return t;
}

const ops::rope_parameters sliding{ops::rope_kind::standard, 1e4, 1.0, 1.0};
const ops::rope_parameters full{ops::rope_kind::proportional, 1e6, 0.25, 1.0};

}  // namespace

BOOST_AUTO_TEST_SUITE(rope_test)

BOOST_AUTO_TEST_CASE(default_frequencies_are_one_over_theta_to_the_two_j_over_d) {
  const auto inv = inv_freq_of(sliding, 8);
  const std::vector<double> want = {1, 0.1, 0.01, 0.001};
  expect_close(inv, host_buffer::of<double>({4}, want), tolerance_for(dtype::float32), "inv_freq");
  const auto wide = inv_freq_of(sliding, 256);
  for (std::int64_t j = 0; j < 128; ++j)
    BOOST_TEST(value_at(wide, j) == 1 / std::pow(1e4, 2.0 * static_cast<double>(j) / 256),
               boost::test_tools::tolerance(2e-7));
}

BOOST_AUTO_TEST_CASE(proportional_frequencies_use_the_full_head_dim_and_zero_the_rest) {
  const auto inv = inv_freq_of(full, 32);  // R = int(0.25 · 32 // 2) = 4
  const auto plain = inv_freq_of({ops::rope_kind::standard, 1e6, 1.0, 1.0}, 32);
  for (std::int64_t j = 0; j < 16; ++j) {
    if (j < 4) {
      BOOST_TEST(value_at(inv, j) == 1 / std::pow(1e6, 2.0 * static_cast<double>(j) / 32),
                 boost::test_tools::tolerance(2e-7));
      BOOST_TEST(value_at(inv, j) == value_at(plain, j));  // the first R of a full-width RoPE
    } else {
      BOOST_TEST(value_at(inv, j) == 0.0);
    }
  }
  const auto halved = inv_freq_of({ops::rope_kind::proportional, 1e6, 0.25, 2.0}, 32);
  for (std::int64_t j = 0; j < 16; ++j) BOOST_TEST(value_at(halved, j) == value_at(inv, j) / 2);
  const auto published = inv_freq_of(full, 512);  // (0.25 · 512) // 2 = 64 frequencies
  BOOST_TEST(value_at(published, 63) > 0.0);
  BOOST_TEST(value_at(published, 64) == 0.0);
}

BOOST_AUTO_TEST_CASE(tables_hold_cos_and_sin_of_float32_angles_twice_over) {
  const auto positions = host_buffer::of<std::int32_t>({3}, {0, 1, 262143});
  const auto inv = inv_freq_of(sliding, 8);
  const auto t64 = tables_of(positions, inv, dtype::float64);
  for (std::int64_t p = 0; p < 3; ++p)
    for (std::int64_t j = 0; j < 4; ++j) {
      const float angle = static_cast<float>(positions.data<std::int32_t>()[p]) * inv.data<float>()[j];
      for (std::int64_t k : {j, j + 4}) {
        BOOST_TEST(value_at(t64.cos, p * 8 + k) == std::cos(static_cast<double>(angle)));
        BOOST_TEST(value_at(t64.sin, p * 8 + k) == std::sin(static_cast<double>(angle)));
      }
    }
  BOOST_TEST(value_at(t64.cos, 0) == 1.0);
  BOOST_TEST(value_at(t64.sin, 0) == 0.0);
  // The float32 tables differ only by the rounding of cos/sin, even at the largest positions.
  const auto t32 = tables_of(positions, inv, dtype::float32);
  expect_close(t32.cos, t64.cos, {0, 1e-7}, "cos");
  expect_close(t32.sin, t64.sin, {0, 1e-7}, "sin");
}

BOOST_AUTO_TEST_CASE(the_rotation_pairs_dimension_j_with_j_plus_half) {
  const auto x = host_buffer::of<double>({1, 1, 4}, {1, 2, 3, 4});
  const auto cos = host_buffer::of<double>({1, 4}, {0.6, 1, 0.6, 1});
  const auto sin = host_buffer::of<double>({1, 4}, {0.8, 0, 0.8, 0});
  host_buffer y(dtype::float64, {1, 1, 4});
  BOOST_REQUIRE(ops::rope_forward(ctx, x, cos, sin, y).is_ok());
  // y0 = 1·0.6 − 3·0.8, y2 = 3·0.6 + 1·0.8; the zero-angle pair (1, 3) is unchanged.
  const std::vector<double> want = {0.6 - 2.4, 2, 1.8 + 0.8, 4};
  expect_close(y, host_buffer::of<double>({1, 1, 4}, want), {1e-15, 1e-15}, "y");
}

BOOST_AUTO_TEST_CASE(forward_in_float32_matches_the_float64_reference) {
  const auto positions = random_indices({5}, 1, 0, 4096);
  const auto inv = inv_freq_of(sliding, 16);
  const auto t64 = tables_of(positions, inv, dtype::float64), t32 = tables_of(positions, inv, dtype::float32);
  const auto x = random_buffer(dtype::float64, {5, 3, 16}, 2);
  host_buffer y64(dtype::float64, {5, 3, 16}), y32(dtype::float32, {5, 3, 16});
  BOOST_REQUIRE(ops::rope_forward(ctx, x, t64.cos, t64.sin, y64).is_ok());
  BOOST_REQUIRE(ops::rope_forward(ctx, converted(x, dtype::float32), t32.cos, t32.sin, y32).is_ok());
  expect_close(y32, y64, tolerance_for(dtype::float32), "y");
}

BOOST_AUTO_TEST_CASE(backward_is_the_inverse_rotation_and_matches_finite_differences) {
  const auto positions = host_buffer::of<std::int32_t>({4}, {0, 7, 100, 5000});
  const auto inv = inv_freq_of(sliding, 12);
  const auto t = tables_of(positions, inv, dtype::float64);
  const auto x = random_buffer(dtype::float64, {4, 2, 12}, 3);
  const auto g = random_buffer(dtype::float64, {4, 2, 12}, 4);
  host_buffer y(dtype::float64, {4, 2, 12}), back(dtype::float64, {4, 2, 12}), dx(dtype::float64, {4, 2, 12});
  BOOST_REQUIRE(ops::rope_forward(ctx, x, t.cos, t.sin, y).is_ok());
  BOOST_REQUIRE(ops::rope_backward(ctx, y, t.cos, t.sin, back).is_ok());
  expect_close(back, x, {1e-14, 1e-14}, "backward(forward(x))");
  auto loss = [&] {
    BOOST_REQUIRE(ops::rope_forward(ctx, x, t.cos, t.sin, y).is_ok());
    return weighted_sum(y, g);
  };
  BOOST_REQUIRE(ops::rope_backward(ctx, g, t.cos, t.sin, dx).is_ok());
  check_gradient("dx", x, loss, dx);
}

BOOST_AUTO_TEST_CASE(in_place_rotation_gives_the_out_of_place_result) {
  const auto positions = host_buffer::of<std::int32_t>({2}, {3, 9});
  const auto t = tables_of(positions, inv_freq_of(sliding, 8), dtype::float32);
  const auto x = random_buffer(dtype::float32, {2, 3, 8}, 5);
  host_buffer y(dtype::float32, {2, 3, 8}), dx(dtype::float32, {2, 3, 8});
  BOOST_REQUIRE(ops::rope_forward(ctx, x, t.cos, t.sin, y).is_ok());
  const auto original = converted(x, dtype::float32);
  BOOST_REQUIRE(ops::rope_forward(ctx, x, t.cos, t.sin, x).is_ok());
  expect_close(x, y, {0, 0}, "forward in place");
  BOOST_REQUIRE(ops::rope_backward(ctx, y, t.cos, t.sin, dx).is_ok());
  BOOST_REQUIRE(ops::rope_backward(ctx, x, t.cos, t.sin, x).is_ok());
  expect_close(x, dx, {0, 0}, "backward in place");
  expect_close(x, original, {1e-6, 1e-6}, "round trip");
}

BOOST_AUTO_TEST_CASE(zero_frequency_dimensions_of_proportional_rope_pass_through_unchanged) {
  const auto positions = host_buffer::of<std::int32_t>({3}, {5, 17, 1000});
  const auto inv = inv_freq_of(full, 32);
  const auto t = tables_of(positions, inv, dtype::float64);
  const auto x = random_buffer(dtype::float64, {3, 2, 32}, 6);
  host_buffer y(dtype::float64, {3, 2, 32}), dx(dtype::float64, {3, 2, 32});
  BOOST_REQUIRE(ops::rope_forward(ctx, x, t.cos, t.sin, y).is_ok());
  BOOST_REQUIRE(ops::rope_backward(ctx, x, t.cos, t.sin, dx).is_ok());
  for (std::int64_t row = 0; row < 6; ++row)
    for (std::int64_t k = 0; k < 32; ++k) {
      const std::int64_t i = row * 32 + k;
      if (k % 16 < 4) {  // pairs (j, j + 16), j < 4, rotate (every position here is non-zero)
        BOOST_TEST(value_at(y, i) != value_at(x, i));
        BOOST_TEST(value_at(dx, i) != value_at(x, i));
      } else {
        BOOST_TEST(value_at(y, i) == value_at(x, i));
        BOOST_TEST(value_at(dx, i) == value_at(x, i));
      }
    }
}

BOOST_AUTO_TEST_CASE(wrong_parameters_shapes_and_values_are_refused_naming_the_tensor) {
  host_buffer inv(dtype::float32, {4});
  BOOST_TEST(ops::rope_inv_freq(ctx, sliding, 7, inv).message() ==
             "rope_inv_freq: head_dim must be even and positive, got 7");
  BOOST_TEST(ops::rope_inv_freq(ctx, sliding, 10, inv).message() ==
             "rope_inv_freq: inv_freq: expected [5], got F32 [4] cpu");
  BOOST_TEST(ops::rope_inv_freq(ctx, {ops::rope_kind::proportional, 1e6, 1.5, 1.0}, 8, inv).message() ==
             "rope_inv_freq: partial_rotary_factor must lie in [0, 1], got 1.5");
  host_buffer cos(dtype::float32, {2, 8}), sin(dtype::float32, {2, 8}), sin64(dtype::float64, {2, 8});
  const auto negative = host_buffer::of<std::int32_t>({2}, {4, -3});
  BOOST_REQUIRE(ops::rope_inv_freq(ctx, sliding, 8, inv).is_ok());
  BOOST_TEST(ops::rope_tables(ctx, negative, inv, cos, sin).message() ==
             "rope_tables: positions: entry 1 holds -3, expected >= 0");
  BOOST_TEST(ops::rope_tables(ctx, host_buffer::of<std::int32_t>({2}, {0, 1}), inv, cos, sin64).message() ==
             "rope_tables: sin: expected dtype float32, got F64 [2, 8] cpu");
  host_buffer x(dtype::float32, {2, 3, 8}), y(dtype::float32, {2, 3, 8}), odd(dtype::float32, {2, 3, 7});
  host_buffer short_cos(dtype::float32, {1, 8});
  const status s = ops::rope_forward(ctx, x, short_cos, sin, y);
  BOOST_TEST((s.code() == status_code::invalid_argument));
  BOOST_TEST(s.message() == "rope_forward: cos: expected [2, 8], got F32 [1, 8] cpu");
  BOOST_TEST(ops::rope_backward(ctx, odd, cos, sin, odd).message() ==
             "rope_backward: dy: head dim 7 is odd (the half-split rotation pairs j with j + d/2)");
}

BOOST_AUTO_TEST_SUITE_END()
