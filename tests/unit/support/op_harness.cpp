// The op test harness.
#include "support/op_harness.h"

#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <cmath>
#include <random>
#include <sstream>

namespace tandem::test {

using gpu::dtype;
using gpu::host_buffer;

tolerance tolerance_for(dtype type) {
  switch (type) {
    case dtype::float64: return {1e-12, 1e-12};
    case dtype::float32: return {2e-5, 1e-6};
    case dtype::bfloat16: return {1e-2, 1e-2};
    case dtype::float16: return {1e-3, 1e-3};
    default: return {0, 0};
  }
}

double value_at(const host_buffer& b, std::int64_t i) {
  switch (b.type()) {
    case dtype::float64: return b.data<double>()[i];
    case dtype::float32: return b.data<float>()[i];
    case dtype::int32: return b.data<std::int32_t>()[i];
    case dtype::uint8: return b.data<std::uint8_t>()[i];
    case dtype::bfloat16: return gpu::to_float(b.data<gpu::bfloat16>()[i]);
    case dtype::float16: return gpu::to_float(b.data<gpu::float16>()[i]);
  }
  return 0;
}

void set_value(const host_buffer& b, std::int64_t i, double v) {
  switch (b.type()) {
    case dtype::float64: b.data<double>()[i] = v; break;
    case dtype::float32: b.data<float>()[i] = static_cast<float>(v); break;
    case dtype::int32: b.data<std::int32_t>()[i] = static_cast<std::int32_t>(v); break;
    case dtype::uint8: b.data<std::uint8_t>()[i] = static_cast<std::uint8_t>(v); break;
    case dtype::bfloat16: b.data<gpu::bfloat16>()[i] = gpu::to_bfloat16(static_cast<float>(v)); break;
    case dtype::float16: b.data<gpu::float16>()[i] = gpu::to_float16(static_cast<float>(v)); break;
  }
}

host_buffer random_buffer(dtype type, std::vector<std::int64_t> shape, std::uint64_t seed, double lo, double hi) {
  host_buffer b(type, std::move(shape));
  std::mt19937_64 gen(seed);
  for (std::int64_t i = 0; i < b.numel(); ++i) {
    const double u = static_cast<double>(gen() >> 11) * 0x1.0p-53;
    set_value(b, i, lo + (hi - lo) * u);
  }
  return b;
}

host_buffer random_indices(std::vector<std::int64_t> shape, std::uint64_t seed, std::int32_t lo, std::int32_t hi) {
  host_buffer b(dtype::int32, std::move(shape));
  std::mt19937_64 gen(seed);
  for (std::int64_t i = 0; i < b.numel(); ++i)
    b.data<std::int32_t>()[i] = lo + static_cast<std::int32_t>(gen() % static_cast<std::uint64_t>(hi - lo));
  return b;
}

host_buffer converted(const host_buffer& b, dtype type) {
  host_buffer out(type, b.shape());
  for (std::int64_t i = 0; i < b.numel(); ++i) set_value(out, i, value_at(b, i));
  return out;
}

void expect_close(const host_buffer& actual, const host_buffer& expected, tolerance tol, const std::string& what) {
  BOOST_TEST_REQUIRE(actual.numel() == expected.numel(), what << ": element counts differ");
  std::int64_t bad = 0, first = -1;
  for (std::int64_t i = 0; i < actual.numel(); ++i) {
    const double a = value_at(actual, i), e = value_at(expected, i);
    const bool ok = a == e || std::abs(a - e) <= tol.atol + tol.rtol * std::abs(e) || (std::isnan(a) && std::isnan(e));
    if (!ok && bad++ == 0) first = i;
  }
  if (bad == 0) {
    BOOST_TEST(true);
    return;
  }
  std::ostringstream msg;
  msg.precision(17);
  msg << what << ": " << bad << " of " << actual.numel() << " elements differ; first at " << first << ": "
      << value_at(actual, first) << " vs expected " << value_at(expected, first) << " (rtol " << tol.rtol << ", atol "
      << tol.atol << ")";
  BOOST_ERROR(msg.str());
}

void expect_cuda_refuses_float64(const gpu::status& s, const std::string& op) {
  BOOST_TEST_CONTEXT(op << " with float64 tensors on cuda:0: " << s.message()) {
    BOOST_TEST((s.code() == gpu::status_code::unsupported));
    BOOST_TEST(s.message().rfind(op + ": ", 0) == 0u);
#if TANDEM_HAVE_CUDA
    BOOST_TEST(s.message().find("the CUDA backend stores float32 or bfloat16") != std::string::npos);
#else
    BOOST_TEST(s.message().find("this build has no CUDA backend") != std::string::npos);
#endif
  }
}

double weighted_sum(const host_buffer& out, const host_buffer& weights) {
  double s = 0;
  for (std::int64_t i = 0; i < out.numel(); ++i) s += value_at(out, i) * value_at(weights, i);
  return s;
}

void check_gradient(const std::string& what, const host_buffer& input, const std::function<double()>& loss,
                    const host_buffer& analytic, double step, tolerance tol, int max_elements) {
  BOOST_TEST_REQUIRE((input.type() == dtype::float64), what << ": finite differences need a float64 input");
  BOOST_TEST_REQUIRE(input.numel() == analytic.numel(), what << ": gradient has the wrong size");
  const std::int64_t n = input.numel();
  const std::int64_t stride = std::max<std::int64_t>(1, n / max_elements);
  std::int64_t bad = 0, checked = 0;
  std::ostringstream first;
  first.precision(12);
  for (std::int64_t i = (n > max_elements ? 7 % stride : 0); i < n; i += stride) {
    const double x = value_at(input, i);
    set_value(input, i, x + step);
    const double up = loss();
    set_value(input, i, x - step);
    const double down = loss();
    set_value(input, i, x);
    const double numeric = (up - down) / (2 * step);
    const double a = value_at(analytic, i);
    ++checked;
    if (std::abs(a - numeric) > tol.atol + tol.rtol * std::abs(numeric)) {
      if (bad++ == 0) first << "first at " << i << ": analytic " << a << " vs numeric " << numeric;
    }
  }
  if (bad) BOOST_ERROR(what << ": " << bad << " of " << checked << " checked gradient elements differ; " << first.str());
  else BOOST_TEST(checked > 0);
}

}  // namespace tandem::test
