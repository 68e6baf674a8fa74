// The MoE experts' forward on cuda:0 at a decode step's size (gpu/ops/cuda/moe_padded.cu's padded
// layout): a token's output does not depend on the tokens around it (a few tokens, padded, give
// the bits that many tokens, sorted, give; tokens that list one expert twice, more slots there than
// tokens, take the sorted layout and the same bits); captured once as a graph, the forward picks
// its pad on the device at every replay (an if/else conditional node) and gives the uncaptured
// forward's bits whether the routing fits the small pad or not.
#include <boost/test/unit_test.hpp>

#include <cstdint>
#include <cstring>
#include <vector>

#include "support/cuda_buffers.h"
#include "support/cuda_context.h"
#include "gpu/core/captured_work.h"
#include "gpu/core/exec_context.h"
#include "gpu/core/memory.h"
#include "gpu/ops/moe.h"

using namespace tandem::gpu;
using tandem::test::cuda::device_buffer;

namespace {

// 16 experts, 2 of them a token: 128 tokens get a small pad of 64 rows an expert (twice an even
// router's mean of 16), so a routing that sends most tokens to one expert needs the pad of 128.
constexpr std::int64_t experts = 16, top_k = 2, hidden = 64, inner = 32, tokens = 128;
static_assert(tokens <= ops::moe_capturable_tokens);

/// How the test routes its tokens.
enum class route {
  even,      ///< spread evenly (8 or 9 rows an expert at 128 tokens)
  skewed,    ///< slot 0 of every token at expert 3 (128 rows or more there, past the small pad)
  repeated,  ///< skewed, and slot 1 of every 16th token at expert 3 too: more slots than tokens there
};

const char* name_of(route r) { return r == route::even ? "even" : r == route::skewed ? "skewed" : "repeated"; }

/// The experts of slot (t, j). A router gives each token distinct experts; the contract allows a
/// token to list one twice, as route::repeated does.
std::vector<std::int32_t> routing(std::int64_t n, route r, int shift) {
  std::vector<std::int32_t> idx(static_cast<std::size_t>(n * top_k));
  for (std::int64_t t = 0; t < n; ++t)
    for (std::int64_t j = 0; j < top_k; ++j) {
      auto e = static_cast<std::int32_t>((t * 7 + j * 5 + shift) % experts);
      if (r != route::even && j == 0) e = 3;
      if (r == route::skewed && j == 1 && e == 3) e = 4;  // distinct, as a router's
      if (r == route::repeated && j == 1 && t % 16 == 0) e = 3;
      idx[static_cast<std::size_t>(t * top_k + j)] = e;
    }
  return idx;
}

/// The rows of `raw` (a [rows, hidden] buffer of element size `width`) from `first`, `count` of them.
std::vector<unsigned char> rows_of(const std::vector<unsigned char>& raw, std::int64_t first, std::int64_t count,
                                   std::size_t width) {
  const auto row = static_cast<std::size_t>(hidden) * width;
  return {raw.begin() + static_cast<std::ptrdiff_t>(first * row), raw.begin() + static_cast<std::ptrdiff_t>((first + count) * row)};
}

}  // namespace

BOOST_AUTO_TEST_SUITE(cuda_moe_capture)

BOOST_AUTO_TEST_CASE(a_token_of_a_few_padded_tokens_gets_the_bits_it_gets_among_many_sorted_tokens) {
  const exec_context ctx = tandem::test::cuda::test_context();
  constexpr std::int64_t many = ops::moe_capturable_tokens + 88;  // past the padded layout
  for (const dtype s : {dtype::float32, dtype::bfloat16}) {
    BOOST_TEST_CONTEXT(to_string(s)) {
      device_buffer gate_up(s, {experts, 2 * inner, hidden}), down(s, {experts, hidden, inner});
      gate_up.fill_uniform(1, -0.5, 0.5);
      down.fill_uniform(2, -0.5, 0.5);
      device_buffer y(s, {many, hidden}), weights(s, {many, top_k}), indices(dtype::int32, {many, top_k}),
          out(s, {many, hidden});
      y.fill_uniform(3);
      weights.fill_uniform(4, 0, 1);
      for (const route r : {route::even, route::skewed, route::repeated}) {
        indices.upload_ints(routing(many, r, 0));
        BOOST_REQUIRE(ops::moe_experts_forward(ctx, y.view(), gate_up.view(), down.view(), weights.view(),
                                               indices.view(), out.view())
                          .is_ok());
        const std::vector<unsigned char> all = out.raw();
        // The first `tokens` tokens alone (views of the same buffers' first rows).
        const tensor few_out = out.view().rows(0, tokens);
        BOOST_REQUIRE(ops::moe_experts_forward(ctx, y.view().rows(0, tokens), gate_up.view(), down.view(),
                                               weights.view().rows(0, tokens), indices.view().rows(0, tokens), few_out)
                          .is_ok());
        BOOST_TEST((rows_of(out.raw(), 0, tokens, size_of(s)) == rows_of(all, 0, tokens, size_of(s))),
                   name_of(r) << " routing: the forward of " << tokens
                                                << " tokens differs from theirs among " << many);
      }
    }
  }
}

BOOST_AUTO_TEST_CASE(a_captured_forward_picks_its_pad_at_every_replay_and_gives_the_uncaptured_bits) {
  const exec_context ctx = tandem::test::cuda::test_context();
  for (const dtype s : {dtype::float32, dtype::bfloat16}) {
    BOOST_TEST_CONTEXT(to_string(s)) {
      device_buffer gate_up(s, {experts, 2 * inner, hidden}), down(s, {experts, hidden, inner});
      gate_up.fill_uniform(5, -0.5, 0.5);
      down.fill_uniform(6, -0.5, 0.5);
      device_buffer y(s, {tokens, hidden}), weights(s, {tokens, top_k}), indices(dtype::int32, {tokens, top_k}),
          out(s, {tokens, hidden});
      const auto work = [&](const exec_context& c) {
        return ops::moe_experts_forward(c, y.view(), gate_up.view(), down.view(), weights.view(), indices.view(),
                                        out.view());
      };
      y.fill_uniform(7);
      weights.fill_uniform(8, 0, 1);
      indices.upload_ints(routing(tokens, route::even, 0));
      BOOST_REQUIRE(work(ctx).is_ok());  // uncaptured first: both pads' products chosen, the scratch grown
      BOOST_REQUIRE(wait_for_device(ctx).is_ok());
      auto captured = captured_work::capture(ctx, work);
      BOOST_REQUIRE_MESSAGE(captured.has_value(), (captured.has_value() ? "" : captured.error().message()));
      // Even, skewed, even again, skewed with new values: the pad flips at each replay.
      int round = 0;
      for (const route r : {route::even, route::skewed, route::even, route::skewed}) {
        ++round;
        y.fill_uniform(10 + static_cast<std::uint64_t>(round));
        indices.upload_ints(routing(tokens, r, round));
        BOOST_REQUIRE(work(ctx).is_ok());
        const std::vector<unsigned char> eager = out.raw();
        out.fill_uniform(99);  // the replay must write every element again
        BOOST_REQUIRE(captured->replay(ctx).is_ok());
        BOOST_TEST((out.raw() == eager), "round " << round << ", " << name_of(r)
                                                  << ": the replay differs from the uncaptured forward");
      }
    }
  }
}

BOOST_AUTO_TEST_SUITE_END()
