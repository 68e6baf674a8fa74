// AdamW step: exact hand-computed steps, bias correction, decoupled decay, bfloat16 storage of
// moments and master weights, float32 against the float64 reference, argument errors.
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <utility>
#include <vector>

#include "gpu/core/convert.h"
#include "gpu/core/half.h"
#include "gpu/ops/adamw.h"
#include "support/op_harness.h"

#include "gpu/core/exec_context.h"

namespace {
// Every op of this file runs on the CPU, on the calling thread.
const tandem::gpu::exec_context ctx = tandem::gpu::exec_context::cpu();
// A context on a GPU, for the checks that refuse what no backend runs yet.
const tandem::gpu::exec_context cuda_ctx{tandem::gpu::device::cuda(0), {}, nullptr};
}  // namespace

using namespace tandem::gpu;
using namespace tandem::test;
using tandem::gpu::ops::adamw_hyper;

namespace {

/// The stored value of every element of a float32 buffer rounded to bfloat16 (kept in float32).
void round_to_bfloat16(const host_buffer& b) {
  for (std::int64_t i = 0; i < b.numel(); ++i) b.data<float>()[i] = to_float(to_bfloat16(b.data<float>()[i]));
}

/// A buffer whose elements are uniform in [lo, hi), in dtype `type` (rounded on the way in).
host_buffer random_in(dtype type, std::int64_t n, std::uint64_t seed, double lo, double hi) {
  return converted(random_buffer(dtype::float64, {n}, seed, lo, hi), type);
}

}  // namespace

BOOST_AUTO_TEST_SUITE(adamw_test)

BOOST_AUTO_TEST_CASE(one_step_by_hand_gives_exact_numbers_in_float32_and_float64) {
  // beta1 0.5, beta2 0.75, eps 0, lr 0.5, wd 0.5, step 1: every intermediate is a dyadic rational.
  // element 0: g 2, m 0, v 0, p 3:   m = 1, v = 1, m_hat = 2, v_hat = 4; p = 3*0.75 - 0.5*(2/2) = 1.75
  // element 1: g -4, m 2, v 16, p -1: m = -1, v = 16, m_hat = -2, v_hat = 64; p = -0.75 - 0.5*(-2/8) = -0.625
  const adamw_hyper hyper{.lr = 0.5, .beta1 = 0.5, .beta2 = 0.75, .eps = 0.0, .weight_decay = 0.5, .step = 1};
  for (dtype type : {dtype::float32, dtype::float64}) {
    const auto p = converted(host_buffer::of<double>({2}, {3.0, -1.0}), type);
    const auto g = converted(host_buffer::of<double>({2}, {2.0, -4.0}), type);
    const auto m = converted(host_buffer::of<double>({2}, {0.0, 2.0}), type);
    const auto v = converted(host_buffer::of<double>({2}, {0.0, 16.0}), type);
    BOOST_REQUIRE(ops::adamw_step(ctx, p, g, m, v, hyper).is_ok());
    BOOST_TEST(value_at(p, 0) == 1.75);
    BOOST_TEST(value_at(p, 1) == -0.625);
    BOOST_TEST(value_at(m, 0) == 1.0);
    BOOST_TEST(value_at(m, 1) == -1.0);
    BOOST_TEST(value_at(v, 0) == 1.0);
    BOOST_TEST(value_at(v, 1) == 16.0);
  }
}

BOOST_AUTO_TEST_CASE(bias_correction_at_steps_one_and_two_follows_the_formulas) {
  const double lr = 1e-2, b1 = 0.9, b2 = 0.999, eps = 1e-8, wd = 0.1;
  const double p0 = 0.7, g1 = 0.3, g2 = -0.05;
  const auto p = host_buffer::of<double>({1}, {p0});
  host_buffer m(dtype::float64, {1}), v(dtype::float64, {1});
  adamw_hyper hyper{.lr = lr, .beta1 = b1, .beta2 = b2, .eps = eps, .weight_decay = wd, .step = 1};

  BOOST_REQUIRE(ops::adamw_step(ctx, p, host_buffer::of<double>({1}, {g1}), m, v, hyper).is_ok());
  // Step 1: m_hat = g, v_hat = g^2, so the update is g / (|g| + eps), almost sign(g).
  const double p1 = p0 * (1 - lr * wd) - lr * (g1 / (std::abs(g1) + eps));
  BOOST_TEST(value_at(p, 0) == p1, boost::test_tools::tolerance(1e-14));
  BOOST_TEST(value_at(m, 0) == (1 - b1) * g1, boost::test_tools::tolerance(1e-14));
  BOOST_TEST(value_at(v, 0) == (1 - b2) * g1 * g1, boost::test_tools::tolerance(1e-14));

  hyper.step = 2;
  BOOST_REQUIRE(ops::adamw_step(ctx, p, host_buffer::of<double>({1}, {g2}), m, v, hyper).is_ok());
  const double m2 = b1 * (1 - b1) * g1 + (1 - b1) * g2;
  const double v2 = b2 * (1 - b2) * g1 * g1 + (1 - b2) * g2 * g2;
  const double m_hat = m2 / (1 - b1 * b1), v_hat = v2 / (1 - b2 * b2);
  const double p2 = p1 * (1 - lr * wd) - lr * (m_hat / (std::sqrt(v_hat) + eps));
  BOOST_TEST(value_at(p, 0) == p2, boost::test_tools::tolerance(1e-14));
  BOOST_TEST(value_at(m, 0) == m2, boost::test_tools::tolerance(1e-14));
  BOOST_TEST(value_at(v, 0) == v2, boost::test_tools::tolerance(1e-14));
  // Without the correction the step-2 update would be m2 / sqrt(v2): noticeably different.
  BOOST_TEST(std::abs(m_hat / std::sqrt(v_hat) - m2 / std::sqrt(v2)) > 1e-2);
}

BOOST_AUTO_TEST_CASE(weight_decay_is_decoupled_from_the_moments) {
  const adamw_hyper hyper{.lr = 0.1, .beta1 = 0.9, .beta2 = 0.999, .eps = 1e-8, .weight_decay = 0.5, .step = 3};
  // A zero gradient: moments stay 0 (no L2 term leaks into them) and p shrinks by exactly 1 - lr*wd.
  const auto p = host_buffer::of<float>({3}, {1.0f, -2.5f, 0.375f});
  host_buffer m(dtype::float32, {3}), v(dtype::float32, {3}), g(dtype::float32, {3});
  BOOST_REQUIRE(ops::adamw_step(ctx, p, g, m, v, hyper).is_ok());
  const float decay = static_cast<float>(1.0 - 0.1 * 0.5);
  BOOST_TEST(value_at(p, 0) == static_cast<double>(1.0f * decay));
  BOOST_TEST(value_at(p, 1) == static_cast<double>(-2.5f * decay));
  BOOST_TEST(value_at(p, 2) == static_cast<double>(0.375f * decay));
  for (int i = 0; i < 3; ++i) BOOST_TEST(value_at(m, i) == 0.0);
  for (int i = 0; i < 3; ++i) BOOST_TEST(value_at(v, i) == 0.0);
  // Different weights with the same gradient get the same moments.
  const auto pa = host_buffer::of<double>({1}, {5.0}), pb = host_buffer::of<double>({1}, {-3.0});
  host_buffer ma(dtype::float64, {1}), va(dtype::float64, {1}), mb(dtype::float64, {1}), vb(dtype::float64, {1});
  const auto g1 = host_buffer::of<double>({1}, {0.25});
  BOOST_REQUIRE(ops::adamw_step(ctx, pa, g1, ma, va, hyper).is_ok());
  BOOST_REQUIRE(ops::adamw_step(ctx, pb, g1, mb, vb, hyper).is_ok());
  BOOST_TEST(value_at(ma, 0) == value_at(mb, 0));
  BOOST_TEST(value_at(va, 0) == value_at(vb, 0));
}

BOOST_AUTO_TEST_CASE(bfloat16_moments_equal_the_float32_run_rounded_after_every_step) {
  const std::int64_t n = 257;
  const auto p_bf = random_in(dtype::float32, n, 1, -1, 1);  // float32 master, bfloat16 moments
  const auto p_f32 = converted(p_bf, dtype::float32);
  host_buffer m_bf(dtype::bfloat16, {n}), v_bf(dtype::bfloat16, {n}), m_f32(dtype::float32, {n}),
      v_f32(dtype::float32, {n});
  adamw_hyper hyper{.lr = 3e-3, .beta1 = 0.9, .beta2 = 0.95, .eps = 1e-8, .weight_decay = 0.1, .step = 1};
  for (; hyper.step <= 5; ++hyper.step) {
    const auto g = random_in(dtype::float32, n, 100 + static_cast<std::uint64_t>(hyper.step), -0.5, 0.5);
    BOOST_REQUIRE(ops::adamw_step(ctx, p_bf, g, m_bf, v_bf, hyper).is_ok());
    BOOST_REQUIRE(ops::adamw_step(ctx, p_f32, g, m_f32, v_f32, hyper).is_ok());
    round_to_bfloat16(m_f32);
    round_to_bfloat16(v_f32);
  }
  std::int64_t differ = 0;
  for (std::int64_t i = 0; i < n; ++i) {
    differ += value_at(m_bf, i) != value_at(m_f32, i);
    differ += value_at(v_bf, i) != value_at(v_f32, i);
    differ += value_at(p_bf, i) != value_at(p_f32, i);
  }
  BOOST_TEST(differ == 0);
  // And the rounding matters: an unrounded float32 run ends elsewhere.
  const auto p_plain = random_in(dtype::float32, n, 1, -1, 1);
  host_buffer m_plain(dtype::float32, {n}), v_plain(dtype::float32, {n});
  for (hyper.step = 1; hyper.step <= 5; ++hyper.step) {
    const auto g = random_in(dtype::float32, n, 100 + static_cast<std::uint64_t>(hyper.step), -0.5, 0.5);
    BOOST_REQUIRE(ops::adamw_step(ctx, p_plain, g, m_plain, v_plain, hyper).is_ok());
  }
  differ = 0;
  for (std::int64_t i = 0; i < n; ++i) differ += value_at(p_plain, i) != value_at(p_bf, i);
  BOOST_TEST(differ > 0);
}

BOOST_AUTO_TEST_CASE(float32_steps_match_the_float64_reference) {
  const std::int64_t n = 300;
  const auto p64 = random_buffer(dtype::float64, {n}, 7);
  const auto m64 = random_buffer(dtype::float64, {n}, 8, -0.1, 0.1);
  const auto v64 = random_buffer(dtype::float64, {n}, 9, 1e-4, 1e-2);
  const auto p32 = converted(p64, dtype::float32), m32 = converted(m64, dtype::float32),
             v32 = converted(v64, dtype::float32);
  adamw_hyper hyper{.lr = 1e-2, .beta1 = 0.9, .beta2 = 0.999, .eps = 1e-8, .weight_decay = 0.1, .step = 4};
  for (; hyper.step <= 6; ++hyper.step) {
    const auto g = random_buffer(dtype::float64, {n}, 20 + static_cast<std::uint64_t>(hyper.step), -0.3, 0.3);
    BOOST_REQUIRE(ops::adamw_step(ctx, p64, g, m64, v64, hyper).is_ok());
    BOOST_REQUIRE(ops::adamw_step(ctx, p32, converted(g, dtype::float32), m32, v32, hyper).is_ok());
  }
  expect_close(p32, p64, tolerance_for(dtype::float32), "param");
  expect_close(m32, m64, tolerance_for(dtype::float32), "exp_avg");
  expect_close(v32, v64, tolerance_for(dtype::float32), "exp_avg_sq");
}

BOOST_AUTO_TEST_CASE(bfloat16_master_weights_stay_within_bfloat16_tolerance_of_float32_over_ten_steps) {
  const std::int64_t n = 512;
  const auto p_bf = random_in(dtype::bfloat16, n, 11, -1, 1);
  const auto p_f32 = converted(p_bf, dtype::float32);  // the same starting values
  const auto start = converted(p_bf, dtype::float32);
  host_buffer m_bf(dtype::float32, {n}), v_bf(dtype::float32, {n}), m_f32(dtype::float32, {n}),
      v_f32(dtype::float32, {n});
  host_buffer copy_bf(dtype::bfloat16, {n}), copy_f32(dtype::bfloat16, {n});
  adamw_hyper hyper{.lr = 1e-2, .beta1 = 0.9, .beta2 = 0.999, .eps = 1e-8, .weight_decay = 0.1, .step = 1};
  for (; hyper.step <= 10; ++hyper.step) {
    const auto g = random_in(dtype::float32, n, 200 + static_cast<std::uint64_t>(hyper.step), -1, 1);
    BOOST_REQUIRE(ops::adamw_step(ctx, p_bf, g, m_bf, v_bf, hyper, copy_bf).is_ok());
    BOOST_REQUIRE(ops::adamw_step(ctx, p_f32, g, m_f32, v_f32, hyper, copy_f32).is_ok());
  }
  expect_close(p_bf, p_f32, tolerance_for(dtype::bfloat16), "bfloat16 master vs float32 master");
  // The moments do not depend on the weights, so both runs share them exactly.
  for (std::int64_t i = 0; i < n; ++i) BOOST_TEST_REQUIRE(value_at(m_bf, i) == value_at(m_f32, i));
  // The bfloat16 run really moved (updates of ~lr are not all lost to rounding).
  std::int64_t moved = 0;
  for (std::int64_t i = 0; i < n; ++i) moved += value_at(p_bf, i) != value_at(start, i);
  BOOST_TEST(moved > n * 9 / 10);
  // Copies: the bfloat16 master's copy is the master itself; the float32 master's is its rounding.
  for (std::int64_t i = 0; i < n; ++i) {
    BOOST_TEST_REQUIRE(copy_bf.data<bfloat16>()[i].bits == p_bf.data<bfloat16>()[i].bits);
    BOOST_TEST_REQUIRE(copy_f32.data<bfloat16>()[i].bits == to_bfloat16(p_f32.data<float>()[i]).bits);
  }
}

BOOST_AUTO_TEST_CASE(the_model_copy_is_the_stored_master_value_converted_to_the_copy_dtype) {
  const auto p = random_buffer(dtype::float64, {33}, 40);
  const auto g = random_buffer(dtype::float64, {33}, 41);
  host_buffer m(dtype::float64, {33}), v(dtype::float64, {33}), copy(dtype::float32, {33});
  BOOST_REQUIRE(ops::adamw_step(ctx, p, g, m, v, adamw_hyper{}, copy).is_ok());
  for (std::int64_t i = 0; i < 33; ++i)
    BOOST_TEST_REQUIRE(copy.data<float>()[i] == static_cast<float>(p.data<double>()[i]));
  // A bfloat16 master's float32 copy holds the rounded master exactly, not the unrounded update.
  const auto p_bf = random_in(dtype::bfloat16, 33, 42, -1, 1);
  host_buffer m32(dtype::float32, {33}), v32(dtype::float32, {33}), copy32(dtype::float32, {33});
  BOOST_REQUIRE(ops::adamw_step(ctx, p_bf, converted(g, dtype::float32), m32, v32, adamw_hyper{.lr = 1e-2}, copy32).is_ok());
  for (std::int64_t i = 0; i < 33; ++i) BOOST_TEST_REQUIRE(value_at(copy32, i) == value_at(p_bf, i));
}

BOOST_AUTO_TEST_CASE(the_gradient_scale_multiplies_the_gradient_before_the_moments) {
  // A power of two scales exactly: the step on grad with scale 1/4 is the step on grad / 4.
  const std::int64_t n = 33;
  const host_buffer grad = random_in(dtype::float32, n, 7, -1, 1), quarter(dtype::float32, {n});
  for (std::int64_t i = 0; i < n; ++i) quarter.data<float>()[i] = grad.data<float>()[i] / 4;
  std::vector<host_buffer> runs;
  for (const auto& [g, scale] : {std::pair{&grad, 0.25}, std::pair{&quarter, 1.0}}) {
    host_buffer p = random_in(dtype::float32, n, 1, -1, 1), m = random_in(dtype::float32, n, 2, -0.1, 0.1),
                v = random_in(dtype::float32, n, 3, 0, 0.01);
    BOOST_REQUIRE(ops::adamw_step(ctx, p, *g, m, v, adamw_hyper{.step = 3, .grad_scale = scale}).is_ok());
    for (host_buffer* b : {&p, &m, &v}) runs.push_back(std::move(*b));
  }
  for (int k = 0; k < 3; ++k)
    BOOST_TEST(std::memcmp(runs[k].data<float>(), runs[k + 3].data<float>(), static_cast<std::size_t>(n) * 4) == 0, "tensor " << k);
  // And a scale that is not 1 changes the step.
  host_buffer p = random_in(dtype::float32, n, 1, -1, 1), m = random_in(dtype::float32, n, 2, -0.1, 0.1),
              v = random_in(dtype::float32, n, 3, 0, 0.01);
  BOOST_REQUIRE(ops::adamw_step(ctx, p, grad, m, v, adamw_hyper{.step = 3}).is_ok());
  BOOST_TEST(std::memcmp(p.data<float>(), runs[0].data<float>(), static_cast<std::size_t>(n) * 4) != 0);
}

BOOST_AUTO_TEST_CASE(bad_arguments_are_refused_with_messages_naming_the_tensor_or_setting) {
  host_buffer p(dtype::float32, {3, 4}), g(dtype::float32, {3, 5}), m(dtype::float32, {12}), v(dtype::float32, {12});
  host_buffer g12(dtype::float32, {12}), m16(dtype::float16, {12}), g64(dtype::float64, {12});
  auto message = [](const status& s) {
    BOOST_TEST((s.code() == status_code::invalid_argument));
    return s.message();
  };
  BOOST_TEST(message(ops::adamw_step(ctx, p, g, m, v, {})) ==
             "adamw_step: grad: expected 12 contiguous elements (like param), got F32 [3, 5] cpu");
  BOOST_TEST(message(ops::adamw_step(ctx, p, g12, m, host_buffer(dtype::float32, {11}), {})) ==
             "adamw_step: exp_avg_sq: expected 12 contiguous elements (like param), got F32 [11] cpu");
  BOOST_TEST(message(ops::adamw_step(ctx, p, g12, m, v, {}, host_buffer(dtype::bfloat16, {13}))) ==
             "adamw_step: model_copy: expected 12 contiguous elements (like param), got BF16 [13] cpu");
  BOOST_TEST(message(ops::adamw_step(ctx, p, g12, m, v, adamw_hyper{.step = 0})) ==
             "adamw_step: step must be >= 1, got 0");
  BOOST_TEST(message(ops::adamw_step(ctx, p, g12, m, v, adamw_hyper{.lr = std::nan("")})) ==
             "adamw_step: lr must be finite, got nan");
  BOOST_TEST(message(ops::adamw_step(ctx, p, g12, m, v, adamw_hyper{.lr = INFINITY})) ==
             "adamw_step: lr must be finite, got inf");
  BOOST_TEST(message(ops::adamw_step(ctx, p, g12, m, v, adamw_hyper{.beta2 = 1.0})) ==
             "adamw_step: beta2 must be in [0, 1), got 1");
  BOOST_TEST(message(ops::adamw_step(ctx, p, g12, m, v, adamw_hyper{.grad_scale = 0})) ==
             "adamw_step: grad_scale must be finite and > 0, got 0");
  BOOST_TEST(message(ops::adamw_step(ctx, p, g12, m, v, adamw_hyper{.grad_scale = INFINITY})) ==
             "adamw_step: grad_scale must be finite and > 0, got inf");
  BOOST_TEST(message(ops::adamw_step(ctx, p, g12, m16, v, {})) ==
             "adamw_step: exp_avg: expected dtype float32 or bfloat16, got F16 [12] cpu");
  BOOST_TEST(message(ops::adamw_step(ctx, p, g64, m, v, {})) ==
             "adamw_step: param: expected dtype float64 (grad is float64), got F32 [3, 4] cpu");
  BOOST_TEST(message(ops::adamw_step(ctx, p, host_buffer(dtype::float16, {12}), m, v, {})) ==
             "adamw_step: grad: expected dtype float32, bfloat16 or float64, got F16 [12] cpu");
  BOOST_TEST(message(ops::adamw_step(ctx, tensor{}, g12, m, v, {})) ==
             "adamw_step: param: expected a contiguous tensor, got no tensor");
  // Nothing was written by the refused calls.
  for (std::int64_t i = 0; i < 12; ++i) BOOST_TEST_REQUIRE(value_at(p, i) == 0.0);
}

BOOST_AUTO_TEST_CASE(mixed_devices_and_float64_on_a_cuda_device_are_refused_naming_the_op) {
  host_buffer p(dtype::float64, {4}), g(dtype::float64, {4}), m(dtype::float64, {4}), v(dtype::float64, {4});
  auto on_cuda = [](const host_buffer& b) { return tensor(b.data<double>(), dtype::float64, {4}, device::cuda(0)); };
  const status mixed = ops::adamw_step(ctx, p, on_cuda(g), m, v, {});
  BOOST_TEST(mixed.message() == "adamw_step: grad is on cuda:0, the other operands on cpu");
  expect_cuda_refuses_float64(ops::adamw_step(cuda_ctx, on_cuda(p), on_cuda(g), on_cuda(m), on_cuda(v), {}), "adamw_step");
}

BOOST_AUTO_TEST_CASE(a_bfloat16_gradient_takes_the_step_of_its_exactly_widened_float32_values) {
  // bfloat16 weights train with their own gradient's dtype; the step widens it first.
  const std::vector<float> grads{0.5f, -1.25f, 3.0e-3f, -7.0f, 0.0f, 1.0f};
  host_buffer g16(dtype::bfloat16, {6}), g32(dtype::float32, {6});
  convert_elements(grads.data(), dtype::float32, g16.data<void>(), dtype::bfloat16, 6);
  convert_elements(g16.data<void>(), dtype::bfloat16, g32.data<float>(), dtype::float32, 6);
  const auto start = host_buffer::of<float>({6}, {1, 2, 3, 4, 5, 6});
  host_buffer pa(dtype::float32, {6}), pb(dtype::float32, {6}), ma(dtype::float32, {6}), mb(dtype::float32, {6}), va(dtype::float32, {6}),
      vb(dtype::float32, {6});
  std::copy_n(start.data<float>(), 6, pa.data<float>());
  std::copy_n(start.data<float>(), 6, pb.data<float>());
  const adamw_hyper h{1e-2, 0.9, 0.999, 1e-8, 0.1, 1};
  BOOST_REQUIRE(ops::adamw_step(ctx, pa, g16, ma, va, h).is_ok());
  BOOST_REQUIRE(ops::adamw_step(ctx, pb, g32, mb, vb, h).is_ok());
  for (std::int64_t i = 0; i < 6; ++i) {
    BOOST_TEST(pa.data<float>()[i] == pb.data<float>()[i]);
    BOOST_TEST(ma.data<float>()[i] == mb.data<float>()[i]);
    BOOST_TEST(va.data<float>()[i] == vb.data<float>()[i]);
  }
  BOOST_TEST(pa.data<float>()[0] != 1.0f, "the step moved the weights");
}

BOOST_AUTO_TEST_SUITE_END()
