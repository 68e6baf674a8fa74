// Sampling: the sampled token's logprob equals the scorer's bit for bit, draws are a pure function
// of the coordinates, the empirical distribution matches, greedy takes the argmax, argument errors.
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <set>
#include <vector>

#include "gpu/ops/logprobs.h"
#include "gpu/ops/sampling.h"
#include "support/op_harness.h"

#include "gpu/core/exec_context.h"

namespace {
// Every op of this file runs on the CPU, on the calling thread.
const tandem::gpu::exec_context ctx = tandem::gpu::exec_context::cpu();
}  // namespace

using namespace tandem::gpu;
using namespace tandem::test;

namespace {

/// One coordinate per row: the given one with position = its row.
std::vector<rng_coordinates> per_position(std::int64_t rows, rng_coordinates base = {7, 3, 1, 2, 5, 0}) {
  std::vector<rng_coordinates> c(static_cast<std::size_t>(rows), base);
  for (std::int64_t r = 0; r < rows; ++r) c[static_cast<std::size_t>(r)].position = static_cast<std::uint32_t>(r);
  return c;
}

/// `rows` copies of one row of logits.
host_buffer repeated(const std::vector<double>& row, std::int64_t rows, dtype type = dtype::float64) {
  const auto v = static_cast<std::int64_t>(row.size());
  host_buffer b(type, {rows, v});
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t j = 0; j < v; ++j) set_value(b, r * v + j, row[static_cast<std::size_t>(j)]);
  return b;
}

struct samples {
  host_buffer tokens, logprobs;
};

samples sample(const host_buffer& logits, const ops::sampling_params& params, const std::vector<rng_coordinates>& at) {
  const std::int64_t rows = logits.shape()[0];
  samples s{host_buffer(dtype::int32, {rows}), host_buffer(logits.type(), {rows})};
  BOOST_REQUIRE(ops::sampling_forward(ctx, logits, params, at, s.tokens, s.logprobs).is_ok());
  return s;
}

/// Counts of each token among the samples; each must lie within 4.5 standard errors of n p.
void expect_frequencies(const host_buffer& tokens, const std::vector<double>& p) {
  std::vector<double> count(p.size(), 0.0);
  for (std::int64_t i = 0; i < tokens.numel(); ++i)
    count[static_cast<std::size_t>(tokens.data<std::int32_t>()[i])] += 1;
  const auto n = static_cast<double>(tokens.numel());
  for (std::size_t j = 0; j < p.size(); ++j) {
    const double se = std::sqrt(n * p[j] * (1 - p[j]));
    BOOST_TEST_CONTEXT("token " << j << ": count " << count[j] << ", expected " << n * p[j]) {
      BOOST_TEST(std::abs(count[j] - n * p[j]) <= 4.5 * se + (p[j] == 0 ? 0.0 : 1e-9));
    }
  }
}

}  // namespace

BOOST_AUTO_TEST_SUITE(sampling_test)

BOOST_AUTO_TEST_CASE(the_sampled_logprob_equals_logprobs_forward_of_the_sampled_token_bitwise) {
  const ops::sampling_params params{0.7, 20, 0.9};
  for (dtype type : {dtype::float32, dtype::float64}) {
    const auto logits = converted(random_buffer(dtype::float64, {64, 300}, 21, -5.0, 5.0), type);
    // Each row's ranks (0: largest logit), and its 20th-ranked token.
    std::vector<std::vector<int>> rank(64, std::vector<int>(300));
    host_buffer twentieth(dtype::int32, {64});
    for (std::int64_t r = 0; r < 64; ++r) {
      std::vector<std::pair<double, std::int32_t>> row;
      for (std::int32_t j = 0; j < 300; ++j) row.push_back({-value_at(logits, r * 300 + j), j});
      std::sort(row.begin(), row.end());
      for (int i = 0; i < 300; ++i) rank[r][row[i].second] = i;
      twentieth.data<std::int32_t>()[r] = row[19].second;
    }
    std::int64_t compared = 0;
    int deepest = 0;  // the largest rank sampled
    for (std::uint32_t step = 0; step < 16; ++step) {
      const auto s = sample(logits, params, per_position(64, {99, step, 0, 4, 1, 0}));
      host_buffer scored(type, {64});
      BOOST_REQUIRE(ops::logprobs_forward(ctx, logits, s.tokens, params, scored).is_ok());
      BOOST_TEST(std::memcmp(scored.data<char>(), s.logprobs.data<char>(), 64 * size_of(type)) == 0);
      for (std::int64_t r = 0; r < 64; ++r) {
        BOOST_TEST(std::isfinite(value_at(s.logprobs, r)));
        BOOST_TEST(value_at(scored, r) == value_at(s.logprobs, r));
        BOOST_TEST(rank[r][s.tokens.data<std::int32_t>()[r]] < 20);
        deepest = std::max(deepest, rank[r][s.tokens.data<std::int32_t>()[r]]);
        ++compared;
      }
    }
    BOOST_TEST(compared == 1024);
    // The filters matter: top-p drops the 20th-ranked token, and the draws are not all argmax.
    host_buffer lp20(type, {64});
    BOOST_REQUIRE(ops::logprobs_forward(ctx, logits, twentieth, params, lp20).is_ok());
    int dropped = 0;
    for (std::int64_t r = 0; r < 64; ++r) dropped += std::isinf(value_at(lp20, r)) ? 1 : 0;
    BOOST_TEST(dropped > 0);
    BOOST_TEST(deepest >= 3);
  }
}

BOOST_AUTO_TEST_CASE(sampling_is_a_pure_function_of_the_coordinates) {
  const auto logits = random_buffer(dtype::float32, {32, 100}, 22, -1.0, 1.0);
  const auto at = per_position(32);
  const auto a = sample(logits, {1.0, 0, 1.0}, at);
  const auto b = sample(logits, {1.0, 0, 1.0}, at);
  BOOST_TEST(a.tokens.to_vector<std::int32_t>() == b.tokens.to_vector<std::int32_t>(),
             boost::test_tools::per_element());
  BOOST_TEST(std::memcmp(a.logprobs.data<char>(), b.logprobs.data<char>(), 32 * 4) == 0);
  // A row sampled alone, with its coordinates, draws the same token as inside the batch.
  host_buffer row(dtype::float32, {1, 100});
  std::memcpy(row.data<float>(), logits.data<float>() + 9 * 100, 100 * sizeof(float));
  BOOST_TEST(sample(row, {1.0, 0, 1.0}, {at[9]}).tokens.data<std::int32_t>()[0] == a.tokens.data<std::int32_t>()[9]);

  // Uniform logits: token = floor(4 u) with u = uniform_float(random_words(coordinates)[0]).
  const auto uniform = repeated({0.0, 0.0, 0.0, 0.0}, 200);
  const auto at200 = per_position(200);
  const auto u = sample(uniform, {0.9, 0, 1.0}, at200);
  std::set<std::int32_t> seen;
  for (std::size_t r = 0; r < 200; ++r) {
    const auto want = static_cast<std::int32_t>(std::floor(4.0 * uniform_float(random_words(at200[r])[0])));
    BOOST_TEST(u.tokens.data<std::int32_t>()[r] == want);
    seen.insert(want);
  }
  BOOST_TEST(seen.size() == 4u);  // changing the position changes the draw

  // The same coordinates in every row give the same token; changing any field changes the draws.
  const auto wide = repeated(std::vector<double>(300, 0.0), 16);
  const auto same = sample(wide, {1.0, 0, 1.0}, std::vector<rng_coordinates>(16, at[0]));
  for (std::int64_t r = 1; r < 16; ++r)
    BOOST_TEST(same.tokens.data<std::int32_t>()[r] == same.tokens.data<std::int32_t>()[0]);
  const auto base = sample(wide, {1.0, 0, 1.0}, per_position(16)).tokens.to_vector<std::int32_t>();
  for (int field = 0; field < 5; ++field) {
    rng_coordinates c{7, 3, 1, 2, 5, 0};
    if (field == 0) c.seed += 1;
    if (field == 1) c.step += 1;
    if (field == 2) c.round += 1;
    if (field == 3) c.prompt += 1;
    if (field == 4) c.sample += 1;
    BOOST_TEST(sample(wide, {1.0, 0, 1.0}, per_position(16, c)).tokens.to_vector<std::int32_t>() != base);
  }
}

BOOST_AUTO_TEST_CASE(a_draw_exactly_on_a_cdf_step_takes_the_next_token) {
  // Coordinates found by search whose u lands on 1/4, 1/2, 3/4: the first token with u < c wins.
  const std::vector<rng_coordinates> at{{7, 3, 1, 2, 5, 8020823}, {7, 3, 1, 2, 5, 742793}, {7, 3, 1, 2, 5, 7467918}};
  for (std::size_t i = 0; i < 3; ++i) BOOST_REQUIRE(uniform_float(random_words(at[i])[0]) == 0.25f * (i + 1));
  const auto s = sample(repeated({0.0, 0.0, 0.0, 0.0}, 3), {1.0, 0, 1.0}, at);
  BOOST_TEST(s.tokens.to_vector<std::int32_t>() == (std::vector<std::int32_t>{1, 2, 3}),
             boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(the_empirical_distribution_of_20000_samples_matches_the_probabilities) {
  const std::vector<double> p{0.1, 0.2, 0.3, 0.4};
  const std::vector<double> row{std::log(0.1), std::log(0.2), std::log(0.3), std::log(0.4)};
  const auto logits = repeated(row, 20000, dtype::float32);
  const auto at = per_position(20000);
  expect_frequencies(sample(logits, {1.0, 0, 1.0}, at).tokens, p);
  expect_frequencies(sample(logits, {0.5, 0, 1.0}, at).tokens, {0.01 / 0.3, 0.04 / 0.3, 0.09 / 0.3, 0.16 / 0.3});
  expect_frequencies(sample(logits, {1.0, 2, 1.0}, at).tokens, {0.0, 0.0, 3.0 / 7.0, 4.0 / 7.0});
  expect_frequencies(sample(logits, {1.0, 0, 0.75}, at).tokens, {0.0, 0.2 / 0.9, 0.3 / 0.9, 0.4 / 0.9});
  // And the frequencies are not those of another distribution (the check can fail).
  const auto t = sample(logits, {1.0, 0, 1.0}, at).tokens;
  std::int64_t threes = 0;
  for (std::int64_t i = 0; i < 20000; ++i) threes += t.data<std::int32_t>()[i] == 3;
  BOOST_TEST(std::abs(static_cast<double>(threes) - 0.25 * 20000) > 4.5 * std::sqrt(20000 * 0.25 * 0.75));
}

BOOST_AUTO_TEST_CASE(greedy_takes_the_argmax_with_the_lowest_id_on_ties_and_reports_the_logprob_at_t_1) {
  auto logits = random_buffer(dtype::float32, {8, 50}, 23, -2.0, 2.0);
  set_value(logits, 0 * 50 + 7, 5.0);
  set_value(logits, 0 * 50 + 3, 5.0);  // a tie in row 0: id 3 wins
  for (const ops::sampling_params params : {ops::sampling_params{0.0, 0, 1.0}, ops::sampling_params{0.0, 5, 0.5}}) {
    const auto s = sample(logits, params, per_position(8));
    const auto other = sample(logits, params, per_position(8, {1, 2, 3, 4, 5, 6}));  // no random number used
    BOOST_TEST(s.tokens.to_vector<std::int32_t>() == other.tokens.to_vector<std::int32_t>(),
               boost::test_tools::per_element());
    BOOST_TEST(s.tokens.data<std::int32_t>()[0] == 3);
    for (std::int64_t r = 0; r < 8; ++r) {
      std::int32_t best = 0;
      for (std::int32_t j = 1; j < 50; ++j)
        if (value_at(logits, r * 50 + j) > value_at(logits, r * 50 + best)) best = j;
      BOOST_TEST(s.tokens.data<std::int32_t>()[r] == best);
    }
    host_buffer scored(dtype::float32, {8});
    BOOST_REQUIRE(ops::logprobs_forward(ctx, logits, s.tokens, {1.0, params.top_k, params.top_p}, scored).is_ok());
    BOOST_TEST(std::memcmp(scored.data<float>(), s.logprobs.data<float>(), 8 * sizeof(float)) == 0);
  }
  // Row 0 with top-k 5: 5.0 twice among the kept set, so the logprob is below log(1/2).
  BOOST_TEST(value_at(sample(logits, {0.0, 5, 1.0}, per_position(8)).logprobs, 0) < std::log(0.5));
}

BOOST_AUTO_TEST_CASE(argument_errors_are_refused_with_exact_messages) {
  host_buffer x(dtype::float32, {4, 10}), tokens(dtype::int32, {4}), lp(dtype::float32, {4});
  const auto at = per_position(4);
  auto message = [](const status& s) {
    BOOST_TEST((s.code() == status_code::invalid_argument));
    return s.message();
  };
  BOOST_TEST(message(ops::sampling_forward(ctx, x, {-0.5, 0, 1.0}, at, tokens, lp)) ==
             "sampling_forward: temperature must be >= 0 (0: greedy), got -0.5");
  BOOST_TEST(message(ops::sampling_forward(ctx, x, {1.0, 0, 0.0}, at, tokens, lp)) ==
             "sampling_forward: top_p must be in (0, 1], got 0");
  BOOST_TEST(message(ops::sampling_forward(ctx, x, {1.0, 0, 1.01}, at, tokens, lp)) ==
             "sampling_forward: top_p must be in (0, 1], got 1.01");
  BOOST_TEST(message(ops::sampling_forward(ctx, x, {1.0, -3, 1.0}, at, tokens, lp)) ==
             "sampling_forward: top_k must be >= 0 (0: no top-k), got -3");
  BOOST_TEST(message(ops::sampling_forward(ctx, x, {}, per_position(3), tokens, lp)) ==
             "sampling_forward: coordinates: expected 4 entries (one per row), got 3");
  BOOST_TEST(message(ops::sampling_forward(ctx, x, {}, at, host_buffer(dtype::float32, {4}), lp)) ==
             "sampling_forward: tokens: expected dtype int32, got F32 [4] cpu");
  BOOST_TEST(message(ops::sampling_forward(ctx, x, {}, at, tokens, host_buffer(dtype::float32, {5}))) ==
             "sampling_forward: logprobs: expected [4], got F32 [5] cpu");
  x.data<float>()[3 * 10 + 1] = std::numeric_limits<float>::infinity();
  BOOST_TEST(message(ops::sampling_forward(ctx, x, {}, at, tokens, lp)) ==
             "sampling_forward: logits: row 3 holds a non-finite value");
}

BOOST_AUTO_TEST_SUITE_END()
