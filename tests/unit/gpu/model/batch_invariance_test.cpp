// Batch invariance of the CPU forward (gpu/model/forward.h, gpu/ops/cpu/gemm.h): a row's result
// does not depend on how many other rows share the call. The same sequences alone and packed
// with others, in any order and number, give bitwise-equal hidden states and logits; and the
// linear op gives a row the same bits whatever the row count.
#include <boost/test/unit_test.hpp>

#include <cstring>

#include "gpu/core/host_buffer.h"
#include "gpu/model/checkpoint.h"
#include "gpu/model/forward.h"
#include "gpu/ops/linear.h"
#include "support/checkpoint_fixture.h"
#include "support/op_harness.h"
#include "support/temp_dir.h"

#include "gpu/core/exec_context.h"

namespace {
// Every op of this file runs on the CPU, on the calling thread.
const tandem::gpu::exec_context ctx = tandem::gpu::exec_context::cpu();
}  // namespace

namespace tg = tandem::gpu;
using tandem::test::checkpoint_builder;
using tandem::test::preset_config;
using tandem::test::temp_dir;

namespace {

// Logits F32 [T, V] of `seqs` packed in the given order.
tg::host_buffer packed_logits(const tg::model_config& c, const tg::model_weights& w,
                              const std::vector<std::vector<std::int32_t>>& seqs) {
  std::vector<std::int32_t> tokens, positions, cu{0};
  for (const auto& s : seqs) {
    for (std::size_t t = 0; t < s.size(); ++t) {
      tokens.push_back(s[t]);
      positions.push_back(static_cast<std::int32_t>(t));
    }
    cu.push_back(static_cast<std::int32_t>(tokens.size()));
  }
  const auto T = static_cast<std::int64_t>(tokens.size());
  auto ids = tg::host_buffer::of<std::int32_t>({T}, tokens);
  auto pos = tg::host_buffer::of<std::int32_t>({T}, positions);
  auto offsets = tg::host_buffer::of<std::int32_t>({static_cast<std::int64_t>(cu.size())}, cu);
  tg::host_buffer hidden(tg::dtype::float32, {T, c.hidden_size}), logits(tg::dtype::float32, {T, c.vocab_size});
  BOOST_REQUIRE(tg::forward_hidden(ctx, c, w, {ids, pos, offsets}, hidden).is_ok());
  BOOST_REQUIRE(tg::head_logits(ctx, c, w, hidden, logits).is_ok());
  return logits;
}

std::vector<std::int32_t> sequence(std::size_t n, std::int32_t seed) {
  std::vector<std::int32_t> s(n);
  for (std::size_t i = 0; i < n; ++i) s[i] = static_cast<std::int32_t>((seed * 131 + static_cast<std::int32_t>(i) * 71) % 256);
  return s;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(batch_invariance)

BOOST_AUTO_TEST_CASE(a_linear_row_gives_the_same_bits_alone_and_in_batches_of_any_size) {
  const auto w = tandem::test::random_buffer(tg::dtype::float32, {96, 320}, 1);
  const auto x = tandem::test::random_buffer(tg::dtype::float32, {70, 320}, 2);
  tg::host_buffer alone(tg::dtype::float32, {1, 96});
  BOOST_REQUIRE(tg::ops::linear_forward(ctx, x.view().rows(5, 6), w, alone).is_ok());
  for (std::int64_t first : {0, 3, 5})
    for (std::int64_t m : {1, 2, 7, 15, 16, 17, 33, 65}) {
      if (first > 5 || first + m <= 5) continue;
      tg::host_buffer y(tg::dtype::float32, {m, 96});
      BOOST_REQUIRE(tg::ops::linear_forward(ctx, x.view().rows(first, first + m), w, y).is_ok());
      BOOST_TEST(std::memcmp(y.data<float>() + (5 - first) * 96, alone.data<float>(), 96 * 4) == 0,
                 "row 5 inside rows [" << first << ", " << first + m << ")");
    }
}

BOOST_AUTO_TEST_CASE(a_sequence_gives_the_same_logits_alone_and_packed_with_any_others) {
  temp_dir t;
  checkpoint_builder b(t.path() / "ckpt");
  const std::string config = preset_config("tiny-all");
  b.set_config(config);
  b.add_text_stack(*tg::parse_model_config(config, "config.json"), tg::dtype::float32, 7);
  b.write();
  auto c = tg::open_checkpoint(b.dir(), tg::dtype::float32);
  BOOST_REQUIRE(c.has_value());
  auto s = tg::load_checkpoint(*c, tg::device::cpu());
  BOOST_REQUIRE(s.has_value());
  auto w = tg::bind_weights(c->config, c->layout, *s);
  BOOST_REQUIRE(w.has_value());

  const auto a = sequence(13, 1), x = sequence(1, 2), y = sequence(29, 3), z = sequence(40, 4);
  const tg::host_buffer alone = packed_logits(c->config, *w, {a});
  const std::size_t bytes = alone.to_vector<float>().size() * 4;
  struct packing {
    std::vector<std::vector<std::int32_t>> seqs;
    std::size_t offset;  // tokens before `a`
  };
  for (const packing& p : {packing{{x, a}, 1}, packing{{a, y}, 0}, packing{{y, z, a, x}, 69}, packing{{z, x, y, x, a}, 71}}) {
    const tg::host_buffer logits = packed_logits(c->config, *w, p.seqs);
    BOOST_TEST(std::memcmp(logits.data<float>() + p.offset * c->config.vocab_size, alone.data<float>(), bytes) == 0,
               "sequence a after " << p.offset << " other tokens in a batch of " << p.seqs.size());
  }
}

BOOST_AUTO_TEST_SUITE_END()
