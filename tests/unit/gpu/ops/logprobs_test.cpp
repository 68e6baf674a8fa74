// Scoring: target logprobs and entropy under temperature / top-k / top-p against the float64
// reference, a naive log-softmax and hand-computed values; the kept sets at their boundaries;
// the backward against finite differences; argument errors.
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <vector>

#include "gpu/ops/logprobs.h"
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

namespace {

const double ln2 = std::log(2.0);
const double inf = std::numeric_limits<double>::infinity();

/// Token ids of `row` ordered by the documented ranking: larger logit first, lower id on ties.
std::vector<std::int32_t> ranking(const host_buffer& logits, std::int64_t row) {
  const std::int64_t v = logits.shape()[1];
  std::vector<std::int32_t> ids(static_cast<std::size_t>(v));
  std::iota(ids.begin(), ids.end(), 0);
  std::stable_sort(ids.begin(), ids.end(),
                   [&](int a, int b) { return value_at(logits, row * v + a) > value_at(logits, row * v + b); });
  return ids;
}

/// Targets that the masks keep: the token ranked (r % 3) in each row.
host_buffer ranked_targets(const host_buffer& logits) {
  const std::int64_t rows = logits.shape()[0];
  host_buffer t(dtype::int32, {rows});
  for (std::int64_t r = 0; r < rows; ++r)
    t.data<std::int32_t>()[r] = ranking(logits, r)[static_cast<std::size_t>(r % 3)];
  return t;
}

/// The logprob of every token of a one-row float64 distribution (scored as V rows).
std::vector<double> all_logprobs(const std::vector<double>& row, const ops::sampling_params& params) {
  const auto v = static_cast<std::int64_t>(row.size());
  host_buffer logits(dtype::float64, {v, v}), targets(dtype::int32, {v}), lp(dtype::float64, {v});
  for (std::int64_t r = 0; r < v; ++r) {
    std::copy(row.begin(), row.end(), logits.data<double>() + r * v);
    targets.data<std::int32_t>()[r] = static_cast<std::int32_t>(r);
  }
  BOOST_REQUIRE(ops::logprobs_forward(ctx, logits, targets, params, lp).is_ok());
  return lp.to_vector<double>();
}

/// Ids whose logprob is finite: the kept set.
std::vector<std::int32_t> kept(const std::vector<double>& row, const ops::sampling_params& params) {
  const auto lp = all_logprobs(row, params);
  std::vector<std::int32_t> ids;
  for (std::size_t j = 0; j < lp.size(); ++j)
    if (std::isfinite(lp[j])) ids.push_back(static_cast<std::int32_t>(j));
    else BOOST_TEST(lp[j] == -inf);
  return ids;
}

std::vector<double> log_of(const std::vector<double>& p) {
  std::vector<double> out;
  for (double q : p) out.push_back(std::log(q));
  return out;
}

using ids = std::vector<std::int32_t>;

}  // namespace

BOOST_AUTO_TEST_SUITE(logprobs_test)

BOOST_AUTO_TEST_CASE(float32_logprobs_and_entropy_match_the_float64_reference_with_and_without_filtering) {
  const auto x = random_buffer(dtype::float64, {6, 50}, 11, -4.0, 4.0);
  const auto targets = ranked_targets(x);
  for (const ops::sampling_params params : {ops::sampling_params{1.0, 0, 1.0}, ops::sampling_params{0.7, 0, 1.0},
                                            ops::sampling_params{0.7, 10, 0.9}, ops::sampling_params{1.3, 0, 0.8}}) {
    host_buffer lp64(dtype::float64, {6}), h64(dtype::float64, {6});
    host_buffer lp32(dtype::float32, {6}), h32(dtype::float32, {6});
    BOOST_REQUIRE(ops::logprobs_forward(ctx, x, targets, params, lp64, h64).is_ok());
    BOOST_REQUIRE(ops::logprobs_forward(ctx, converted(x, dtype::float32), targets, params, lp32, h32).is_ok());
    for (std::int64_t r = 0; r < 6; ++r) BOOST_REQUIRE(std::isfinite(value_at(lp64, r)));
    expect_close(lp32, lp64, tolerance_for(dtype::float32), "logprobs");
    expect_close(h32, h64, tolerance_for(dtype::float32), "entropy");
  }
}

BOOST_AUTO_TEST_CASE(without_filtering_logprobs_and_entropy_equal_a_naive_log_softmax_at_the_temperature) {
  const auto x = random_buffer(dtype::float64, {4, 37}, 12, -10.0, 10.0);
  const auto targets = random_indices({4}, 13, 0, 37);
  for (double t : {1.0, 0.7, 2.5}) {
    host_buffer lp(dtype::float64, {4}), h(dtype::float64, {4});
    host_buffer want_lp(dtype::float64, {4}), want_h(dtype::float64, {4});
    BOOST_REQUIRE(ops::logprobs_forward(ctx, x, targets, {t, 0, 1.0}, lp, h).is_ok());
    for (std::int64_t r = 0; r < 4; ++r) {
      long double z = 0;
      for (int j = 0; j < 37; ++j) z += std::exp(static_cast<long double>(value_at(x, r * 37 + j)) / t);
      long double entropy = 0;
      for (int j = 0; j < 37; ++j) {
        const long double l = static_cast<long double>(value_at(x, r * 37 + j)) / t - std::log(z);
        entropy -= std::exp(l) * l;
      }
      const long double target = value_at(x, r * 37 + targets.data<std::int32_t>()[r]);
      set_value(want_lp, r, static_cast<double>(target / t - std::log(z)));
      set_value(want_h, r, static_cast<double>(entropy));
    }
    expect_close(lp, want_lp, tolerance_for(dtype::float64), "logprobs");
    expect_close(h, want_h, tolerance_for(dtype::float64), "entropy");
  }
}

BOOST_AUTO_TEST_CASE(huge_logits_are_safe_because_the_row_maximum_is_subtracted_first) {
  const auto x = random_buffer(dtype::float64, {3, 20}, 14, -1.0, 1.0);
  const auto shifted = converted(x, dtype::float64);
  for (std::int64_t i = 0; i < x.numel(); ++i) set_value(shifted, i, value_at(x, i) + 2000.0);  // exp(2000/0.5) = inf
  const auto targets = random_indices({3}, 15, 0, 20);
  host_buffer lp(dtype::float64, {3}), lp_shifted(dtype::float64, {3});
  BOOST_REQUIRE(ops::logprobs_forward(ctx, x, targets, {0.5, 0, 1.0}, lp).is_ok());
  BOOST_REQUIRE(ops::logprobs_forward(ctx, shifted, targets, {0.5, 0, 1.0}, lp_shifted).is_ok());
  expect_close(lp_shifted, lp, {1e-9, 1e-9}, "logprobs of shifted logits");
}

BOOST_AUTO_TEST_CASE(a_tiny_dyadic_case_gives_hand_computed_logprobs_and_entropy) {
  // Probabilities 1/2, 1/4, 1/8, 1/8 at T = 1 (every e_j and sum is exact in double).
  const std::vector<double> row{0.0, -ln2, -2 * ln2, -2 * ln2};
  const auto plain = all_logprobs(row, {1.0, 0, 1.0});
  const std::vector<double> want{std::log(0.5), std::log(0.25), std::log(0.125), std::log(0.125)};
  for (int j = 0; j < 4; ++j) BOOST_TEST(plain[j] == want[j], boost::test_tools::tolerance(1e-15));
  // T = 0.5 squares the odds: e = 1, 1/4, 1/16, 1/16, S = 11/8.
  BOOST_TEST(all_logprobs(row, {0.5, 0, 1.0})[1] == std::log(0.25 / 1.375), boost::test_tools::tolerance(1e-15));
  // top_p = 0.75 keeps {0, 1} renormalised to 2/3, 1/3.
  const auto filtered = all_logprobs(row, {1.0, 0, 0.75});
  BOOST_TEST(filtered[0] == std::log(2.0 / 3.0), boost::test_tools::tolerance(1e-15));
  BOOST_TEST(filtered[1] == std::log(1.0 / 3.0), boost::test_tools::tolerance(1e-15));
  BOOST_TEST(filtered[2] == -inf);
  BOOST_TEST(filtered[3] == -inf);
  // Entropy: (1/2)ln2 + (1/4)2ln2 + 2 (1/8)3ln2 = 1.75 ln2; of the top-p set: ln3 - (2/3)ln2.
  host_buffer x = host_buffer::of<double>({1, 4}, row), t = host_buffer::of<std::int32_t>({1}, {0});
  host_buffer lp(dtype::float64, {1}), h(dtype::float64, {1});
  BOOST_REQUIRE(ops::logprobs_forward(ctx, x, t, {1.0, 0, 1.0}, lp, h).is_ok());
  BOOST_TEST(value_at(h, 0) == 1.75 * ln2, boost::test_tools::tolerance(1e-15));
  BOOST_REQUIRE(ops::logprobs_forward(ctx, x, t, {1.0, 0, 0.75}, lp, h).is_ok());
  BOOST_TEST(value_at(h, 0) == std::log(3.0) - 2.0 / 3.0 * ln2, boost::test_tools::tolerance(1e-15));
  BOOST_REQUIRE(ops::logprobs_forward(ctx, x, t, {1.0, 1, 1.0}, lp, h).is_ok());
  BOOST_TEST(value_at(lp, 0) == 0.0);
  BOOST_TEST(value_at(h, 0) == 0.0);
}

BOOST_AUTO_TEST_CASE(top_p_keeps_the_shortest_prefix_whose_mass_reaches_p_with_the_boundary_inclusive) {
  const std::vector<double> dyadic{-2 * ln2, 0.0, -2 * ln2, -ln2};  // 1/8, 1/2, 1/8, 1/4: exact sums
  BOOST_TEST(kept(dyadic, {1.0, 0, 0.75}) == (ids{1, 3}), boost::test_tools::per_element());  // reaches 3/4: stop
  BOOST_TEST(kept(dyadic, {1.0, 0, 0.75 + 1e-9}) == (ids{0, 1, 3}), boost::test_tools::per_element());
  BOOST_TEST(kept(dyadic, {1.0, 0, 0.5}) == (ids{1}), boost::test_tools::per_element());
  BOOST_TEST(kept(dyadic, {1.0, 0, 0.5 + 1e-9}) == (ids{1, 3}), boost::test_tools::per_element());
  BOOST_TEST(kept(dyadic, {1.0, 0, 1e-9}) == (ids{1}), boost::test_tools::per_element());
  BOOST_TEST(kept(dyadic, {1.0, 0, 1.0}) == (ids{0, 1, 2, 3}), boost::test_tools::per_element());
  // The brief's example, 0.5 0.3 0.15 0.05: p = 0.8 lies on a boundary that rounding decides, so
  // test on either side of it.
  const auto brief = log_of({0.05, 0.3, 0.5, 0.15});
  BOOST_TEST(kept(brief, {1.0, 0, 0.79}) == (ids{1, 2}), boost::test_tools::per_element());
  BOOST_TEST(kept(brief, {1.0, 0, 0.81}) == (ids{1, 2, 3}), boost::test_tools::per_element());
  // Equal probabilities: the lower ids come first.
  BOOST_TEST(kept({0.0, 0.0, 0.0, 0.0}, {1.0, 0, 0.5}) == (ids{0, 1}), boost::test_tools::per_element());
  BOOST_TEST(kept({1.0, 3.0, 3.0, 3.0, 0.0}, {1.0, 0, 0.5}) == (ids{1, 2}), boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(top_p_applies_to_the_softmax_renormalised_over_the_top_k_set) {
  const std::vector<double> row{0.0, -ln2, -2 * ln2, -2 * ln2};  // 1/2 1/4 1/8 1/8; top-2: 2/3 1/3
  BOOST_TEST(kept(row, {1.0, 0, 0.6}) == (ids{0, 1}), boost::test_tools::per_element());  // 1/2 < 0.6
  BOOST_TEST(kept(row, {1.0, 2, 0.6}) == (ids{0}), boost::test_tools::per_element());     // 2/3 >= 0.6
  BOOST_TEST(kept(row, {1.0, 3, 0.99}) == (ids{0, 1, 2}), boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(top_k_keeps_exactly_k_tokens_and_breaks_ties_by_lower_id) {
  const std::vector<double> row{1.0, 3.0, 3.0, 3.0, 0.0, 2.0};
  BOOST_TEST(kept(row, {1.0, 1, 1.0}) == (ids{1}), boost::test_tools::per_element());
  BOOST_TEST(kept(row, {1.0, 2, 1.0}) == (ids{1, 2}), boost::test_tools::per_element());
  BOOST_TEST(kept(row, {0.3, 4, 1.0}) == (ids{1, 2, 3, 5}), boost::test_tools::per_element());
  for (int k : {0, 6, 100}) BOOST_TEST(kept(row, {1.0, k, 1.0}).size() == 6u);
  // Top-2 renormalises over two equal logits: log(1/2) each.
  BOOST_TEST(all_logprobs(row, {1.0, 2, 1.0})[2] == std::log(0.5), boost::test_tools::tolerance(1e-15));

  const auto x = random_buffer(dtype::float64, {1, 300}, 16, -3.0, 3.0);
  const auto keep = kept(x.to_vector<double>(), {0.7, 20, 1.0});
  auto top = ranking(x, 0);
  top.resize(20);
  std::sort(top.begin(), top.end());
  BOOST_TEST(keep == top, boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(backward_matches_finite_differences_with_and_without_temperature_and_with_fixed_masks) {
  const auto x = random_buffer(dtype::float64, {5, 12}, 17, -2.0, 2.0);
  const auto g = random_buffer(dtype::float64, {5}, 18);
  const auto targets = ranked_targets(x);
  for (const ops::sampling_params params : {ops::sampling_params{1.0, 0, 1.0}, ops::sampling_params{0.7, 0, 1.0},
                                            ops::sampling_params{0.7, 5, 0.9}, ops::sampling_params{1.3, 0, 0.6}}) {
    BOOST_TEST_CONTEXT("T " << params.temperature << " top_k " << params.top_k << " top_p " << params.top_p) {
      host_buffer lp(dtype::float64, {5}), dx(dtype::float64, {5, 12});
      auto loss = [&] {
        BOOST_REQUIRE(ops::logprobs_forward(ctx, x, targets, params, lp).is_ok());
        return weighted_sum(lp, g);
      };
      BOOST_REQUIRE(std::isfinite(loss()));
      BOOST_REQUIRE(ops::logprobs_backward(ctx, x, targets, params, g, dx).is_ok());
      check_gradient("dlogits", x, loss, dx);
      // Masked tokens get exactly 0; a row's gradient sums to 0 over its kept set.
      for (std::int64_t r = 0; r < 5; ++r) {
        std::vector<double> row(12);
        for (int j = 0; j < 12; ++j) row[j] = value_at(x, r * 12 + j);
        const auto lp_row = all_logprobs(row, params);
        double sum = 0;
        for (int j = 0; j < 12; ++j) {
          sum += value_at(dx, r * 12 + j);
          if (!std::isfinite(lp_row[j])) BOOST_TEST(value_at(dx, r * 12 + j) == 0.0);
        }
        BOOST_TEST(sum == 0.0, boost::test_tools::tolerance(1e-12));
      }
    }
  }
}

BOOST_AUTO_TEST_CASE(a_masked_target_scores_minus_infinity_and_gets_no_gradient) {
  const auto x = host_buffer::of<double>({2, 4}, {0.0, 1.0, 2.0, 3.0, 3.0, 2.0, 1.0, 0.0});
  const auto targets = host_buffer::of<std::int32_t>({2}, {0, 1});
  const auto g = host_buffer::of<double>({2}, {1.0, 1.0});
  host_buffer lp(dtype::float64, {2}), dx(dtype::float64, {2, 4});
  BOOST_REQUIRE(ops::logprobs_forward(ctx, x, targets, {1.0, 2, 1.0}, lp).is_ok());
  BOOST_TEST(value_at(lp, 0) == -inf);
  BOOST_TEST(std::isfinite(value_at(lp, 1)));
  BOOST_REQUIRE(ops::logprobs_backward(ctx, x, targets, {1.0, 2, 1.0}, g, dx).is_ok());
  for (int j = 0; j < 4; ++j) BOOST_TEST(value_at(dx, j) == 0.0);
  BOOST_TEST(value_at(dx, 4) != 0.0);
}

BOOST_AUTO_TEST_CASE(backward_writes_or_accumulates_and_float32_matches_float64) {
  const auto x = random_buffer(dtype::float64, {3, 30}, 19, -3.0, 3.0);
  const auto g = random_buffer(dtype::float64, {3}, 20);
  const auto targets = ranked_targets(x);
  const ops::sampling_params params{0.8, 10, 0.95};
  host_buffer dx(dtype::float64, {3, 30});
  BOOST_REQUIRE(ops::logprobs_backward(ctx, x, targets, params, g, dx).is_ok());
  const auto once = converted(dx, dtype::float64);
  BOOST_REQUIRE(ops::logprobs_backward(ctx, x, targets, params, g, dx).is_ok());  // written again: unchanged
  expect_close(dx, once, {0, 0}, "dlogits written twice");
  BOOST_REQUIRE(ops::logprobs_backward(ctx, x, targets, params, g, dx, true).is_ok());
  for (std::int64_t i = 0; i < once.numel(); ++i) set_value(once, i, 2 * value_at(once, i));
  expect_close(dx, once, tolerance_for(dtype::float64), "dlogits accumulated");
  host_buffer dx32(dtype::float32, {3, 30});
  BOOST_REQUIRE(ops::logprobs_backward(ctx, converted(x, dtype::float32), targets, params, converted(g, dtype::float32),
                                       dx32).is_ok());
  BOOST_REQUIRE(ops::logprobs_backward(ctx, x, targets, params, g, dx).is_ok());
  expect_close(dx32, dx, tolerance_for(dtype::float32), "dlogits float32");
}

BOOST_AUTO_TEST_CASE(argument_errors_are_refused_with_exact_messages) {
  host_buffer x(dtype::float32, {4, 300}), lp(dtype::float32, {4}), dx(dtype::float32, {4, 299});
  auto t = host_buffer::of<std::int32_t>({4}, {0, 300, 2, 3});
  auto message = [](const status& s) {
    BOOST_TEST((s.code() == status_code::invalid_argument));
    return s.message();
  };
  BOOST_TEST(message(ops::logprobs_forward(ctx, x, t, {}, lp)) ==
             "logprobs_forward: targets: id 300 at row 1 is outside [0, 300)");
  t.data<std::int32_t>()[1] = -1;
  BOOST_TEST(message(ops::logprobs_forward(ctx, x, t, {}, lp)) ==
             "logprobs_forward: targets: id -1 at row 1 is outside [0, 300)");
  t.data<std::int32_t>()[1] = 1;
  BOOST_TEST(message(ops::logprobs_forward(ctx, x, t, {0.0, 0, 1.0}, lp)) ==
             "logprobs_forward: temperature must be > 0, got 0");
  BOOST_TEST(message(ops::logprobs_forward(ctx, x, t, {-0.5, 0, 1.0}, lp)) ==
             "logprobs_forward: temperature must be > 0, got -0.5");
  BOOST_TEST(message(ops::logprobs_forward(ctx, x, t, {inf, 0, 1.0}, lp)) ==
             "logprobs_forward: temperature must be > 0, got inf");
  BOOST_TEST(message(ops::logprobs_forward(ctx, x, t, {1.0, 0, 0.0}, lp)) ==
             "logprobs_forward: top_p must be in (0, 1], got 0");
  BOOST_TEST(message(ops::logprobs_forward(ctx, x, t, {1.0, 0, 1.5}, lp)) ==
             "logprobs_forward: top_p must be in (0, 1], got 1.5");
  BOOST_TEST(message(ops::logprobs_forward(ctx, x, t, {1.0, -1, 1.0}, lp)) ==
             "logprobs_forward: top_k must be >= 0 (0: no top-k), got -1");
  BOOST_TEST(message(ops::logprobs_backward(ctx, x, t, {}, lp, dx)) ==
             "logprobs_backward: dlogits: expected [4, 300], got F32 [4, 299] cpu");
  BOOST_TEST(message(ops::logprobs_forward(ctx, x, host_buffer(dtype::int32, {5}), {}, lp)) ==
             "logprobs_forward: targets: expected [4], got I32 [5] cpu");
  BOOST_TEST(message(ops::logprobs_forward(ctx, x, host_buffer(dtype::float32, {4}), {}, lp)) ==
             "logprobs_forward: targets: expected dtype int32, got F32 [4] cpu");
  BOOST_TEST(message(ops::logprobs_forward(ctx, x, t, {}, host_buffer(dtype::float64, {4}))) ==
             "logprobs_forward: logprobs: expected dtype float32, got F64 [4] cpu");
  x.data<float>()[2 * 300 + 7] = std::numeric_limits<float>::quiet_NaN();
  BOOST_TEST(message(ops::logprobs_forward(ctx, x, t, {}, lp)) ==
             "logprobs_forward: logits: row 2 holds a non-finite value");
  // float64 exists on the CPU alone: a CUDA context refuses it before touching memory.
  host_buffer x64(dtype::float64, {4, 300}), lp64(dtype::float64, {4});
  const tensor xc(x64.data<double>(), dtype::float64, {4, 300}, device::cuda(0));
  expect_cuda_refuses_float64(
      ops::logprobs_forward(cuda_ctx, xc, tensor(t.data<std::int32_t>(), dtype::int32, {4}, device::cuda(0)), {},
                            tensor(lp64.data<double>(), dtype::float64, {4}, device::cuda(0))),
      "logprobs_forward");
}

BOOST_AUTO_TEST_SUITE_END()
