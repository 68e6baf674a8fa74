// Sums of squares by range: exact values against closed forms, empty and overlapping ranges,
// non-finite values kept, refused arguments naming the range.
#include <boost/test/unit_test.hpp>

#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "gpu/core/exec_context.h"
#include "gpu/core/host_buffer.h"
#include "gpu/ops/sum_squares.h"

namespace {
// Every op of this file runs on the CPU, on the calling thread.
const tandem::gpu::exec_context ctx = tandem::gpu::exec_context::cpu();
}  // namespace

using namespace tandem::gpu;

BOOST_AUTO_TEST_SUITE(sum_squares_test)

BOOST_AUTO_TEST_CASE(each_range_sums_the_squares_of_its_own_elements) {
  // x[k] = k + 1: the squares of 1..m sum to m(m + 1)(2m + 1) / 6, exactly in float64 here.
  const std::int64_t n = 3000;
  host_buffer x(dtype::float32, {n});
  for (std::int64_t k = 0; k < n; ++k) x.data<float>()[k] = static_cast<float>(k + 1);
  const auto upto = [](double m) { return m * (m + 1) * (2 * m + 1) / 6; };
  const std::vector<ops::element_range> ranges{{0, n}, {10, 0}, {0, 10}, {10, 20}, {0, 10}, {n - 1, 1}};
  std::vector<double> sums(ranges.size(), -1);
  BOOST_REQUIRE(ops::sum_squares(ctx, x, ranges, sums).is_ok());
  BOOST_TEST(sums[0] == upto(n));
  BOOST_TEST(sums[1] == 0.0);
  BOOST_TEST(sums[2] == upto(10));
  BOOST_TEST(sums[3] == upto(30) - upto(10));
  BOOST_TEST(sums[4] == sums[2]);
  BOOST_TEST(sums[5] == static_cast<double>(n) * n);
}

BOOST_AUTO_TEST_CASE(squares_are_formed_in_float64_so_large_float32_values_do_not_overflow) {
  const auto x = host_buffer::of<float>({2}, {3e38f, -3e38f});
  std::vector<ops::element_range> ranges{{0, 2}};
  std::vector<double> sums(1);
  BOOST_REQUIRE(ops::sum_squares(ctx, x, ranges, sums).is_ok());
  BOOST_TEST(sums[0] == 2 * 3e38 * 3e38, boost::test_tools::tolerance(1e-6));
}

BOOST_AUTO_TEST_CASE(a_non_finite_element_makes_only_its_range_non_finite) {
  const auto x = host_buffer::of<float>({4}, {1, std::numeric_limits<float>::quiet_NaN(), 2, std::numeric_limits<float>::infinity()});
  const std::vector<ops::element_range> ranges{{0, 1}, {1, 1}, {2, 1}, {3, 1}};
  std::vector<double> sums(4);
  BOOST_REQUIRE(ops::sum_squares(ctx, x, ranges, sums).is_ok());
  BOOST_TEST(sums[0] == 1.0);
  BOOST_TEST(std::isnan(sums[1]));
  BOOST_TEST(sums[2] == 4.0);
  BOOST_TEST(std::isinf(sums[3]));
}

BOOST_AUTO_TEST_CASE(a_range_outside_x_or_a_short_sums_span_is_refused_naming_it) {
  host_buffer x(dtype::float32, {10});
  std::vector<double> sums(1);
  for (const ops::element_range bad : {ops::element_range{5, 6}, ops::element_range{-1, 2}, ops::element_range{0, -1}}) {
    const std::vector<ops::element_range> ranges{bad};
    const status s = ops::sum_squares(ctx, x, ranges, sums);
    BOOST_TEST(!s.is_ok());
    BOOST_TEST(s.message().find("sum_squares: range 0") != std::string::npos, s.message());
  }
  const std::vector<ops::element_range> two{{0, 1}, {1, 1}};
  const status s = ops::sum_squares(ctx, x, two, sums);
  BOOST_TEST(s.message().find("sums holds 1 values for 2 ranges") != std::string::npos, s.message());
}

BOOST_AUTO_TEST_SUITE_END()
