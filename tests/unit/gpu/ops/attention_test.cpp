// Packed causal attention: float32 against the float64 reference and a naive masked softmax,
// backward against finite differences, sequence isolation, sliding windows, GQA / MQA, a KV source
// shared by two calls, a hand-computed case and argument errors.
#include <boost/test/unit_test.hpp>

#include <cmath>
#include <cstdint>
#include <limits>
#include <numeric>
#include <string>
#include <vector>

#include "gpu/ops/attention.h"
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

constexpr tolerance exact{0.0, 0.0};

struct inputs {
  host_buffer q, k, v, cu;  // [T, H, d], [T, G, d], [T, G, d], I32 [S + 1]
};

struct forward_result {
  host_buffer out, lse;
};

struct gradients {
  host_buffer dq, dk, dv;
};

host_buffer offsets_of(const std::vector<std::int32_t>& lengths) {
  std::vector<std::int32_t> cu{0};
  for (auto n : lengths) cu.push_back(cu.back() + n);
  return host_buffer::of<std::int32_t>({static_cast<std::int64_t>(cu.size())}, cu);
}

inputs random_inputs(const std::vector<std::int32_t>& lengths, std::int64_t heads, std::int64_t kv_heads,
                     std::int64_t d, std::uint64_t seed) {
  const std::int64_t t = std::accumulate(lengths.begin(), lengths.end(), std::int64_t{0});
  return {random_buffer(dtype::float64, {t, heads, d}, seed), random_buffer(dtype::float64, {t, kv_heads, d}, seed + 1),
          random_buffer(dtype::float64, {t, kv_heads, d}, seed + 2), offsets_of(lengths)};
}

dtype lse_type(dtype compute) { return compute == dtype::float64 ? dtype::float64 : dtype::float32; }

forward_result forward(const host_buffer& q, const host_buffer& k, const host_buffer& v, const host_buffer& cu,
                       ops::attention_options options = {}) {
  forward_result r{host_buffer(q.type(), q.shape()), host_buffer(lse_type(q.type()), {q.shape()[0], q.shape()[1]})};
  const status s = ops::attention_forward(ctx, q, k, v, cu, r.out, r.lse, options);
  BOOST_REQUIRE_MESSAGE(s.is_ok(), s.message());
  return r;
}

forward_result forward(const inputs& in, ops::attention_options options = {}) {
  return forward(in.q, in.k, in.v, in.cu, options);
}

gradients backward(const host_buffer& q, const host_buffer& k, const host_buffer& v, const host_buffer& cu,
                   const host_buffer& dout, ops::attention_options options = {}) {
  const forward_result f = forward(q, k, v, cu, options);
  gradients g{host_buffer(q.type(), q.shape()), host_buffer(k.type(), k.shape()), host_buffer(v.type(), v.shape())};
  const status s = ops::attention_backward(ctx, q, k, v, cu, f.lse, dout, g.dq, g.dk, g.dv, options);
  BOOST_REQUIRE_MESSAGE(s.is_ok(), s.message());
  return g;
}

gradients backward(const inputs& in, const host_buffer& dout, ops::attention_options options = {}) {
  return backward(in.q, in.k, in.v, in.cu, dout, options);
}

/// Rows [begin, end) of dimension 0, copied.
host_buffer rows_of(const host_buffer& b, std::int64_t begin, std::int64_t end) {
  std::vector<std::int64_t> shape = b.shape();
  const std::int64_t row = b.numel() / shape[0];
  shape[0] = end - begin;
  host_buffer r(b.type(), shape);
  for (std::int64_t i = 0; i < r.numel(); ++i) set_value(r, i, value_at(b, begin * row + i));
  return r;
}

/// Whether rows [begin, end) of a and b are bitwise equal (as doubles).
bool rows_equal(const host_buffer& a, const host_buffer& b, std::int64_t begin, std::int64_t end) {
  const std::int64_t row = a.numel() / a.shape()[0];
  for (std::int64_t i = begin * row; i < end * row; ++i)
    if (value_at(a, i) != value_at(b, i)) return false;
  return true;
}

/// Textbook attention over the whole packed batch in double: a [T, T] score matrix per head,
/// masked with -inf where the key is in another sequence, in the future, or outside the window.
forward_result naive_attention(const inputs& in, ops::attention_options options) {
  const std::int64_t t = in.q.shape()[0], heads = in.q.shape()[1], d = in.q.shape()[2], kv = in.k.shape()[1];
  std::vector<std::int64_t> seq(static_cast<std::size_t>(t)), pos(static_cast<std::size_t>(t));
  for (std::int64_t s = 0; s + 1 < in.cu.numel(); ++s)
    for (auto i = static_cast<std::int64_t>(value_at(in.cu, s)); i < value_at(in.cu, s + 1); ++i) {
      seq[static_cast<std::size_t>(i)] = s;
      pos[static_cast<std::size_t>(i)] = i - static_cast<std::int64_t>(value_at(in.cu, s));
    }
  forward_result r{host_buffer(dtype::float64, {t, heads, d}), host_buffer(dtype::float64, {t, heads})};
  const auto w = options.sliding_window;
  for (std::int64_t h = 0; h < heads; ++h) {
    const std::int64_t g = h / (heads / kv);
    for (std::int64_t i = 0; i < t; ++i) {
      std::vector<double> s(static_cast<std::size_t>(t), -std::numeric_limits<double>::infinity());
      double m = -std::numeric_limits<double>::infinity();
      for (std::int64_t j = 0; j < t; ++j) {
        const auto si = static_cast<std::size_t>(i), sj = static_cast<std::size_t>(j);
        if (seq[sj] != seq[si] || pos[sj] > pos[si] || (w > 0 && pos[sj] <= pos[si] - w)) continue;
        double x = 0;
        for (std::int64_t c = 0; c < d; ++c)
          x += value_at(in.q, (i * heads + h) * d + c) * value_at(in.k, (j * kv + g) * d + c);
        s[sj] = x * options.scaling;
        m = std::max(m, s[sj]);
      }
      double z = 0;
      for (double x : s) z += std::exp(x - m);
      set_value(r.lse, i * heads + h, m + std::log(z));
      for (std::int64_t c = 0; c < d; ++c) {
        double o = 0;
        for (std::int64_t j = 0; j < t; ++j)
          o += std::exp(s[static_cast<std::size_t>(j)] - m) / z * value_at(in.v, (j * kv + g) * d + c);
        set_value(r.out, (i * heads + h) * d + c, o);
      }
    }
  }
  return r;
}

/// Checks dq, dk and dv of loss = weighted_sum(out, g) against central differences.
void check_all_gradients(const inputs& in, ops::attention_options options, std::uint64_t seed,
                         const std::string& what) {
  const auto g = random_buffer(dtype::float64, in.q.shape(), seed);
  auto loss = [&] { return weighted_sum(forward(in, options).out, g); };
  const gradients grad = backward(in, g, options);
  check_gradient(what + " dq", in.q, loss, grad.dq);
  check_gradient(what + " dk", in.k, loss, grad.dk);
  check_gradient(what + " dv", in.v, loss, grad.dv);
}

}  // namespace

BOOST_AUTO_TEST_SUITE(attention_test)

BOOST_AUTO_TEST_CASE(forward_and_backward_in_float32_match_the_float64_reference) {
  for (std::int64_t d : {16, 32})
    for (std::int64_t w : {0, 3}) {
      const std::string what = "d " + std::to_string(d) + " window " + std::to_string(w) + ": ";
      const ops::attention_options options{1.0, w};
      const inputs in64 = random_inputs({5, 1, 7}, 4, 2, d, 10 + static_cast<std::uint64_t>(d + w));
      const inputs in32{converted(in64.q, dtype::float32), converted(in64.k, dtype::float32),
                        converted(in64.v, dtype::float32), in64.cu};
      const auto g64 = random_buffer(dtype::float64, in64.q.shape(), 99);
      const forward_result f64 = forward(in64, options), f32 = forward(in32, options);
      expect_close(f32.out, f64.out, tolerance_for(dtype::float32), what + "out");
      expect_close(f32.lse, f64.lse, tolerance_for(dtype::float32), what + "lse");
      const gradients b64 = backward(in64, g64, options), b32 = backward(in32, converted(g64, dtype::float32), options);
      expect_close(b32.dq, b64.dq, tolerance_for(dtype::float32), what + "dq");
      expect_close(b32.dk, b64.dk, tolerance_for(dtype::float32), what + "dk");
      expect_close(b32.dv, b64.dv, tolerance_for(dtype::float32), what + "dv");
    }
}

BOOST_AUTO_TEST_CASE(forward_equals_a_naive_masked_softmax_over_the_whole_packed_batch) {
  for (std::int64_t w : {0, 1, 3, 20})
    for (double scaling : {1.0, 0.25}) {
      const std::string what = "window " + std::to_string(w) + " scaling " + std::to_string(scaling) + ": ";
      const ops::attention_options options{scaling, w};
      const inputs in = random_inputs({5, 0, 1, 7}, 4, 2, 16, 20);  // an empty sequence too
      const forward_result got = forward(in, options), want = naive_attention(in, options);
      expect_close(got.out, want.out, tolerance_for(dtype::float64), what + "out");
      expect_close(got.lse, want.lse, tolerance_for(dtype::float64), what + "lse");
    }
}

BOOST_AUTO_TEST_CASE(backward_matches_finite_differences_for_q_k_and_v) {
  for (std::int64_t d : {16, 32})
    for (std::int64_t w : {0, 3})
      for (double scaling : {1.0, 0.5}) {
        const inputs in = random_inputs({5, 0, 1, 7}, 4, 2, d, 30 + static_cast<std::uint64_t>(d));
        check_all_gradients(
            in, {scaling, w}, 31,
            "d " + std::to_string(d) + " window " + std::to_string(w) + " scaling " + std::to_string(scaling));
      }
}

BOOST_AUTO_TEST_CASE(packed_sequences_give_exactly_the_outputs_and_gradients_of_each_sequence_alone) {
  const std::vector<std::int32_t> lengths{5, 1, 7};
  for (std::int64_t w : {0, 3}) {
    const ops::attention_options options{1.0, w};
    const inputs in = random_inputs(lengths, 4, 2, 16, 40);
    const auto g = random_buffer(dtype::float64, in.q.shape(), 41);
    const forward_result packed = forward(in, options);
    const gradients packed_grad = backward(in, g, options);
    std::int64_t begin = 0;
    for (auto n : lengths) {
      const std::int64_t end = begin + n;
      const inputs alone{rows_of(in.q, begin, end), rows_of(in.k, begin, end), rows_of(in.v, begin, end),
                         offsets_of({n})};
      const std::string what = "window " + std::to_string(w) + " tokens " + std::to_string(begin) + "..: ";
      expect_close(forward(alone, options).out, rows_of(packed.out, begin, end), exact, what + "out");
      const gradients grad = backward(alone, rows_of(g, begin, end), options);
      expect_close(grad.dq, rows_of(packed_grad.dq, begin, end), exact, what + "dq");
      expect_close(grad.dk, rows_of(packed_grad.dk, begin, end), exact, what + "dk");
      expect_close(grad.dv, rows_of(packed_grad.dv, begin, end), exact, what + "dv");
      begin = end;
    }
  }
}

BOOST_AUTO_TEST_CASE(perturbing_a_token_of_one_sequence_changes_no_output_of_another) {
  // Sequences A = tokens 0..4, B = 5, C = 6..12. Perturb A's first and last token (q, k and v).
  const inputs in = random_inputs({5, 1, 7}, 4, 2, 16, 50);
  const forward_result before = forward(in);
  for (std::int64_t token : {0, 4}) {
    const inputs changed{converted(in.q, dtype::float64), converted(in.k, dtype::float64),
                         converted(in.v, dtype::float64), in.cu};
    for (const host_buffer* b : {&changed.q, &changed.k, &changed.v}) {
      const std::int64_t row = b->numel() / b->shape()[0];
      for (std::int64_t i = token * row; i < (token + 1) * row; ++i) set_value(*b, i, value_at(*b, i) + 0.5);
    }
    const forward_result after = forward(changed);
    BOOST_TEST(!rows_equal(after.out, before.out, token, 5), "token " << token << " changes its own sequence");
    BOOST_TEST(rows_equal(after.out, before.out, 0, token), "token " << token << " changes no earlier token");
    BOOST_TEST(rows_equal(after.out, before.out, 5, 13), "token " << token << " changes no other sequence");
    BOOST_TEST(rows_equal(after.lse, before.lse, 5, 13), "token " << token << " changes no other sequence's lse");
  }
}

BOOST_AUTO_TEST_CASE(a_sliding_window_of_3_lets_each_query_see_exactly_its_last_3_keys) {
  // One sequence of 7: perturbing key/value j changes query i's output iff i - 3 < j <= i.
  const ops::attention_options options{1.0, 3};
  const inputs in = random_inputs({7}, 2, 2, 16, 60);
  const forward_result before = forward(in, options);
  for (std::int64_t j = 0; j < 7; ++j) {
    const inputs changed{in.q, converted(in.k, dtype::float64), converted(in.v, dtype::float64), in.cu};
    for (std::int64_t c = 0; c < 2 * 16; ++c) {
      set_value(changed.k, j * 32 + c, value_at(changed.k, j * 32 + c) + 0.5);
      set_value(changed.v, j * 32 + c, value_at(changed.v, j * 32 + c) + 0.5);
    }
    const forward_result after = forward(changed, options);
    for (std::int64_t i = 0; i < 7; ++i) {
      const bool visible = i - 3 < j && j <= i;
      BOOST_TEST(!rows_equal(after.out, before.out, i, i + 1) == visible, "key " << j << " query " << i);
    }
  }
  // A window of 1: every query sees only itself, so out = v (one query head per kv head).
  expect_close(forward(in, {1.0, 1}).out, in.v, exact, "window 1 out");
}

BOOST_AUTO_TEST_CASE(a_sliding_window_at_least_as_long_as_every_sequence_equals_full_attention) {
  const inputs in = random_inputs({5, 1, 7}, 4, 2, 16, 70);
  const auto g = random_buffer(dtype::float64, in.q.shape(), 71);
  const forward_result full = forward(in);
  const gradients full_grad = backward(in, g);
  for (std::int64_t w : {7, 20}) {
    const std::string what = "window " + std::to_string(w) + ": ";
    expect_close(forward(in, {1.0, w}).out, full.out, exact, what + "out");
    expect_close(forward(in, {1.0, w}).lse, full.lse, exact, what + "lse");
    const gradients grad = backward(in, g, {1.0, w});
    expect_close(grad.dq, full_grad.dq, exact, what + "dq");
    expect_close(grad.dk, full_grad.dk, exact, what + "dk");
    expect_close(grad.dv, full_grad.dv, exact, what + "dv");
  }
  // One shorter than the longest sequence differs: its last query loses its first key.
  const forward_result six = forward(in, {1.0, 6});
  BOOST_TEST(rows_equal(six.out, full.out, 0, 12));
  BOOST_TEST(!rows_equal(six.out, full.out, 12, 13));
}

BOOST_AUTO_TEST_CASE(gqa_and_mqa_equal_attention_with_each_kv_head_repeated_for_its_query_heads) {
  for (std::int64_t kv : {2, 1}) {
    const std::int64_t heads = 4, d = 16, t = 13, n_rep = heads / kv;
    const inputs in = random_inputs({5, 1, 7}, heads, kv, d, 80 + static_cast<std::uint64_t>(kv));
    // Repeat kv head g for query heads g * n_rep .. g * n_rep + n_rep - 1 (repeat_interleave).
    const inputs wide{in.q, host_buffer(dtype::float64, {t, heads, d}), host_buffer(dtype::float64, {t, heads, d}),
                      in.cu};
    for (std::int64_t i = 0; i < t; ++i)
      for (std::int64_t h = 0; h < heads; ++h)
        for (std::int64_t c = 0; c < d; ++c) {
          set_value(wide.k, (i * heads + h) * d + c, value_at(in.k, (i * kv + h / n_rep) * d + c));
          set_value(wide.v, (i * heads + h) * d + c, value_at(in.v, (i * kv + h / n_rep) * d + c));
        }
    const std::string what = std::to_string(kv) + " kv heads: ";
    for (std::int64_t w : {0, 3}) {
      const forward_result grouped = forward(in, {1.0, w}), repeated = forward(wide, {1.0, w});
      expect_close(grouped.out, repeated.out, exact, what + "out");
      expect_close(grouped.lse, repeated.lse, exact, what + "lse");
      // dk / dv of a kv head = the sum over its query heads of the repeated heads' gradients.
      const auto g = random_buffer(dtype::float64, in.q.shape(), 85);
      const gradients gg = backward(in, g, {1.0, w}), gw = backward(wide, g, {1.0, w});
      expect_close(gg.dq, gw.dq, tolerance_for(dtype::float64), what + "dq");
      host_buffer dk_sum(dtype::float64, {t, kv, d}), dv_sum(dtype::float64, {t, kv, d});
      for (std::int64_t i = 0; i < t; ++i)
        for (std::int64_t h = 0; h < heads; ++h)
          for (std::int64_t c = 0; c < d; ++c) {
            const std::int64_t to = (i * kv + h / n_rep) * d + c, from = (i * heads + h) * d + c;
            set_value(dk_sum, to, value_at(dk_sum, to) + value_at(gw.dk, from));
            set_value(dv_sum, to, value_at(dv_sum, to) + value_at(gw.dv, from));
          }
      expect_close(gg.dk, dk_sum, tolerance_for(dtype::float64), what + "dk");
      expect_close(gg.dv, dv_sum, tolerance_for(dtype::float64), what + "dv");
      check_all_gradients(in, {1.0, w}, 86, what + "window " + std::to_string(w));
    }
  }
}

BOOST_AUTO_TEST_CASE(a_kv_source_shared_by_two_calls_accumulates_both_gradients_into_dk_and_dv) {
  // Two layers read the same k, v: one with a window of 3 and 4 query heads, one full with 2.
  const inputs a = random_inputs({5, 1, 7}, 4, 2, 16, 90);
  const host_buffer qb = random_buffer(dtype::float64, {13, 2, 16}, 91);
  const auto ga = random_buffer(dtype::float64, a.q.shape(), 92), gb = random_buffer(dtype::float64, qb.shape(), 93);
  const ops::attention_options oa{1.0, 3}, ob{1.0, 0};
  const gradients sa = backward(a, ga, oa), sb = backward(qb, a.k, a.v, a.cu, gb, ob);
  // Both backwards into one dk / dv that already holds a gradient from elsewhere.
  const host_buffer dk0 = random_buffer(dtype::float64, a.k.shape(), 94),
                    dv0 = random_buffer(dtype::float64, a.v.shape(), 95);
  const host_buffer dk = converted(dk0, dtype::float64), dv = converted(dv0, dtype::float64);
  host_buffer dqa(dtype::float64, a.q.shape()), dqb(dtype::float64, qb.shape());
  const forward_result fa = forward(a, oa), fb = forward(qb, a.k, a.v, a.cu, ob);
  BOOST_REQUIRE(ops::attention_backward(ctx, a.q, a.k, a.v, a.cu, fa.lse, ga, dqa, dk, dv, oa).is_ok());
  BOOST_REQUIRE(ops::attention_backward(ctx, qb, a.k, a.v, a.cu, fb.lse, gb, dqb, dk, dv, ob).is_ok());
  host_buffer dk_want(dtype::float64, a.k.shape()), dv_want(dtype::float64, a.v.shape());
  for (std::int64_t i = 0; i < dk.numel(); ++i) {
    set_value(dk_want, i, value_at(dk0, i) + value_at(sa.dk, i) + value_at(sb.dk, i));
    set_value(dv_want, i, value_at(dv0, i) + value_at(sa.dv, i) + value_at(sb.dv, i));
  }
  expect_close(dk, dk_want, tolerance_for(dtype::float64), "dk");
  expect_close(dv, dv_want, tolerance_for(dtype::float64), "dv");
  expect_close(dqa, sa.dq, exact, "dq of the first call");
  expect_close(dqb, sb.dq, exact, "dq of the second call");
  // The summed gradients are those of the summed loss.
  auto loss = [&] {
    return weighted_sum(forward(a, oa).out, ga) + weighted_sum(forward(qb, a.k, a.v, a.cu, ob).out, gb);
  };
  host_buffer dk_sum(dtype::float64, a.k.shape()), dv_sum(dtype::float64, a.v.shape());
  for (std::int64_t i = 0; i < dk.numel(); ++i) {
    set_value(dk_sum, i, value_at(dk, i) - value_at(dk0, i));
    set_value(dv_sum, i, value_at(dv, i) - value_at(dv0, i));
  }
  check_gradient("shared dk", a.k, loss, dk_sum);
  check_gradient("shared dv", a.v, loss, dv_sum);
}

BOOST_AUTO_TEST_CASE(dq_is_overwritten_by_default_and_accumulated_on_request) {
  const inputs in = random_inputs({5, 1, 7}, 4, 2, 16, 100);
  const auto g = random_buffer(dtype::float64, in.q.shape(), 101);
  const gradients fresh = backward(in, g);
  const forward_result f = forward(in);
  const host_buffer start = random_buffer(dtype::float64, in.q.shape(), 102);
  const host_buffer dq = converted(start, dtype::float64);
  host_buffer dk(dtype::float64, in.k.shape()), dv(dtype::float64, in.v.shape());
  BOOST_REQUIRE(ops::attention_backward(ctx, in.q, in.k, in.v, in.cu, f.lse, g, dq, dk, dv, {}, false).is_ok());
  expect_close(dq, fresh.dq, exact, "dq written");
  const host_buffer dq_sum = converted(start, dtype::float64);
  BOOST_REQUIRE(ops::attention_backward(ctx, in.q, in.k, in.v, in.cu, f.lse, g, dq_sum, dk, dv, {}, true).is_ok());
  host_buffer want(dtype::float64, in.q.shape());
  for (std::int64_t i = 0; i < want.numel(); ++i) set_value(want, i, value_at(start, i) + value_at(fresh.dq, i));
  expect_close(dq_sum, want, tolerance_for(dtype::float64), "dq accumulated");
}

BOOST_AUTO_TEST_CASE(a_tiny_case_matches_hand_computed_values) {
  // 1 head, d = 2, 3 tokens in one sequence; q0 = (0, 2), q1 = (1, 0), q2 = (0, 0);
  // k0 = (0, 1), k1 = (ln 3, 0), k2 = (1, 1); v0 = (4, 0), v1 = (0, 8), v2 = (2, 1).
  const double ln3 = std::log(3.0);
  const auto q = host_buffer::of<double>({3, 1, 2}, {0, 2, 1, 0, 0, 0});
  const auto k = host_buffer::of<double>({3, 1, 2}, {0, 1, ln3, 0, 1, 1});
  const auto v = host_buffer::of<double>({3, 1, 2}, {4, 0, 0, 8, 2, 1});
  const auto cu = offsets_of({3});
  // Query 0 sees only key 0: o0 = v0, lse = q0·k0 = 2. Query 1: scores (0, ln 3) so p = (1/4, 3/4),
  // o1 = (1, 6), lse = ln 4. Query 2: scores all 0, p = 1/3 each, o2 = (2, 3), lse = ln 3.
  const forward_result full = forward(q, k, v, cu);
  expect_close(full.out, host_buffer::of<double>({3, 1, 2}, {4, 0, 1, 6, 2, 3}), {1e-15, 1e-15}, "full out");
  expect_close(full.lse, host_buffer::of<double>({3, 1}, {2, std::log(4.0), ln3}), {1e-15, 1e-15}, "full lse");
  // Window 2: query 2 sees keys 1 and 2 only: o2 = (v1 + v2) / 2 = (1, 4.5), lse = ln 2.
  const forward_result window = forward(q, k, v, cu, {1.0, 2});
  expect_close(window.out, host_buffer::of<double>({3, 1, 2}, {4, 0, 1, 6, 1, 4.5}), {1e-15, 1e-15}, "window out");
  expect_close(window.lse, host_buffer::of<double>({3, 1}, {2, std::log(4.0), std::log(2.0)}), {1e-15, 1e-15},
               "window lse");
  // Backward of loss = o2[0] (full): dv_j = p_2j · (1, 0) = (1/3, 0); dp = v_j[0] = (4, 0, 2), Σ p dp = 2,
  // ds = (2/3, -2/3, 0); dq2 = Σ ds_j k_j = (-2/3 ln 3, 2/3); dk_j = ds_j q2 = 0; dq0 = dq1 = 0.
  const auto dout = host_buffer::of<double>({3, 1, 2}, {0, 0, 0, 0, 1, 0});
  const gradients g = backward(q, k, v, cu, dout);
  expect_close(g.dq, host_buffer::of<double>({3, 1, 2}, {0, 0, 0, 0, -2.0 / 3 * ln3, 2.0 / 3}), {1e-15, 1e-15}, "dq");
  expect_close(g.dk, host_buffer(dtype::float64, {3, 1, 2}), {1e-15, 1e-15}, "dk");
  expect_close(g.dv, host_buffer::of<double>({3, 1, 2}, {1.0 / 3, 0, 1.0 / 3, 0, 1.0 / 3, 0}), {1e-15, 1e-15}, "dv");
}

BOOST_AUTO_TEST_CASE(malformed_arguments_are_refused_with_a_message_naming_the_problem) {
  host_buffer q(dtype::float32, {4, 2, 2}), k(dtype::float32, {4, 2, 2}), v(dtype::float32, {4, 2, 2});
  host_buffer out(dtype::float32, {4, 2, 2}), lse(dtype::float32, {4, 2}), cu = offsets_of({3, 1});
  auto message = [](const status& s) {
    BOOST_TEST((s.code() == status_code::invalid_argument));
    return s.message();
  };
  BOOST_REQUIRE(ops::attention_forward(ctx, q, k, v, cu, out, lse).is_ok());
  host_buffer q3(dtype::float32, {4, 3, 2}), out3(dtype::float32, {4, 3, 2}), lse3(dtype::float32, {4, 3});
  BOOST_TEST(message(ops::attention_forward(ctx, q3, k, v, cu, out3, lse3)) ==
             "attention_forward: q has 3 heads, not a multiple of the 2 kv heads of k and v");
  BOOST_TEST(message(ops::attention_forward(ctx, q, k, v, offsets_of({3, 2}), out, lse)) ==
             "attention_forward: cu_seqlens: the last offset is 5, expected the token count 4");
  BOOST_TEST(message(ops::attention_forward(ctx, q, k, v, host_buffer::of<std::int32_t>({4}, {0, 3, 2, 4}), out, lse)) ==
             "attention_forward: cu_seqlens: offsets decrease at index 2 (2 after 3)");
  BOOST_TEST(message(ops::attention_forward(ctx, q, k, v, host_buffer::of<std::int32_t>({2}, {1, 4}), out, lse)) ==
             "attention_forward: cu_seqlens: the first offset is 1, expected 0");
  BOOST_TEST(message(ops::attention_forward(ctx, q, host_buffer(dtype::float32, {4, 2, 3}), v, cu, out, lse)) ==
             "attention_forward: k: expected [4, *, 2], got F32 [4, 2, 3] cpu");
  BOOST_TEST(message(ops::attention_forward(ctx, q, k, v, cu, out, host_buffer(dtype::float64, {4, 2}))) ==
             "attention_forward: lse: expected dtype float32, got F64 [4, 2] cpu");
  BOOST_TEST(message(ops::attention_forward(ctx, q, k, v, host_buffer(dtype::float32, {3}), out, lse)) ==
             "attention_forward: cu_seqlens: expected dtype int32, got F32 [3] cpu");
  BOOST_TEST(message(ops::attention_forward(ctx, q, k, v, cu, out, lse, {1.0, -1})) ==
             "attention_forward: sliding_window must be >= 0, got -1");
  host_buffer dq(dtype::float32, {4, 2, 2}), dk(dtype::float32, {4, 2, 2}), dv(dtype::float32, {4, 2, 2});
  BOOST_REQUIRE(ops::attention_backward(ctx, q, k, v, cu, lse, out, dq, dk, dv).is_ok());
  BOOST_TEST(message(ops::attention_backward(ctx, q, k, v, cu, lse, out, dq, host_buffer(dtype::float32, {4, 1, 2}), dv)) ==
             "attention_backward: dk: expected [4, 2, 2], got F32 [4, 1, 2] cpu");
  BOOST_TEST(message(ops::attention_backward(ctx, q3, k, v, cu, lse3, out3, out3, dk, dv)) ==
             "attention_backward: q has 3 heads, not a multiple of the 2 kv heads of k and v");
  BOOST_TEST(
      message(ops::attention_backward(ctx, q, k, v, host_buffer::of<std::int32_t>({3}, {0, 4, 3}), lse, out, dq, dk, dv)) ==
      "attention_backward: cu_seqlens: offsets decrease at index 2 (3 after 4)");
  BOOST_TEST(message(ops::attention_backward(ctx, q, k, v, offsets_of({3}), lse, out, dq, dk, dv)) ==
             "attention_backward: cu_seqlens: the last offset is 3, expected the token count 4");
}

BOOST_AUTO_TEST_CASE(mixed_devices_and_float64_on_a_cuda_device_are_refused_naming_the_op) {
  host_buffer q(dtype::float64, {2, 1, 2}), k(dtype::float64, {2, 1, 2}), v(dtype::float64, {2, 1, 2});
  host_buffer out(dtype::float64, {2, 1, 2}), lse(dtype::float64, {2, 1});
  const host_buffer cu = offsets_of({2});
  auto on_cuda = [](const host_buffer& b, std::initializer_list<std::int64_t> shape) {
    return tensor(b.data<void>(), b.type(), shape, device::cuda(0));
  };
  const tensor qc = on_cuda(q, {2, 1, 2}), kc = on_cuda(k, {2, 1, 2}), vc = on_cuda(v, {2, 1, 2});
  const tensor cuc = on_cuda(cu, {2}), oc = on_cuda(out, {2, 1, 2}), lc = on_cuda(lse, {2, 1});
  expect_cuda_refuses_float64(ops::attention_forward(cuda_ctx, qc, kc, vc, cuc, oc, lc), "attention_forward");
  const status mixed = ops::attention_forward(ctx, qc, kc, vc, cu, oc, lc);
  BOOST_TEST(mixed.message() == "attention_forward: cu_seqlens is on cpu, the other operands on cuda:0");
}

BOOST_AUTO_TEST_SUITE_END()
