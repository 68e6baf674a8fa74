// Clipped policy-gradient loss: a hand-computed case, float32 against the float64 reference, the
// gradient against finite differences in every clipping / importance-sampling / KL configuration
// (with the metric counters that say which branch fired), micro-batch additivity, argument errors.
#include <boost/test/unit_test.hpp>

#include <cmath>
#include <cstdint>
#include <numeric>
#include <string>
#include <vector>

#include "gpu/ops/pg_loss.h"
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
using tandem::gpu::ops::importance_correction;
using tandem::gpu::ops::pg_loss_metrics;
using tandem::gpu::ops::pg_loss_settings;

namespace {

/// One micro-batch of packed sequences in host buffers.
struct batch {
  host_buffer lp_cur, lp_prev, lp_gen, advantages, mask, lp_ref, offsets;
  double tokens_global = 0, sequences_global = 0;

  ops::pg_loss_inputs inputs() const {
    return {lp_cur, lp_prev, lp_gen, advantages, mask, lp_ref, offsets, tokens_global, sequences_global};
  }
  std::int64_t size() const { return lp_cur.numel(); }
  double masked(std::int64_t i) const { return value_at(mask, i); }
  double ratio(std::int64_t i) const { return std::exp(value_at(lp_cur, i) - value_at(lp_prev, i)); }
  /// Token i gets advantage a and lp_cur = lp_prev + delta (r = e^delta).
  void set_token(std::int64_t i, double a, double delta) const {
    set_value(advantages, i, a);
    set_value(lp_cur, i, value_at(lp_prev, i) + delta);
  }
  /// Token i's raw importance weight becomes e^log_w (through lp_gen).
  void set_weight(std::int64_t i, double log_w) const { set_value(lp_gen, i, value_at(lp_prev, i) - log_w); }
};

host_buffer offsets_of(const std::vector<int>& lengths) {
  std::vector<std::int32_t> o{0};
  for (int l : lengths) o.push_back(o.back() + l);
  return host_buffer::of<std::int32_t>({static_cast<std::int64_t>(o.size())}, o);
}

/// Random float64 logprobs near on-policy (|log r| <= delta, |log w| <= 0.05); every fifth token
/// is masked out. The global counts exceed the micro-batch's own (other micro-batches exist).
batch random_batch(const std::vector<int>& lengths, std::uint64_t seed, double delta = 0.1) {
  const std::int64_t n = std::accumulate(lengths.begin(), lengths.end(), std::int64_t{0});
  batch b;
  b.lp_gen = random_buffer(dtype::float64, {n}, seed, -3.0, -0.2);
  b.lp_prev = random_buffer(dtype::float64, {n}, seed + 1, -0.05, 0.05);
  b.lp_cur = random_buffer(dtype::float64, {n}, seed + 2, -delta, delta);
  b.advantages = random_buffer(dtype::float64, {n}, seed + 3, -1.5, 1.5);
  b.lp_ref = random_buffer(dtype::float64, {n}, seed + 4, -0.3, 0.3);
  b.mask = host_buffer(dtype::float64, {n});
  double masked = 0;
  for (std::int64_t i = 0; i < n; ++i) {
    set_value(b.lp_prev, i, value_at(b.lp_gen, i) + value_at(b.lp_prev, i));
    set_value(b.lp_cur, i, value_at(b.lp_prev, i) + value_at(b.lp_cur, i));
    set_value(b.lp_ref, i, value_at(b.lp_cur, i) + value_at(b.lp_ref, i));
    set_value(b.mask, i, i % 5 == 4 ? 0.0 : 1.0);
    masked += b.masked(i);
  }
  b.offsets = offsets_of(lengths);
  b.tokens_global = masked + 3;
  b.sequences_global = static_cast<double>(lengths.size()) + 1;
  return b;
}

batch converted_batch(const batch& b, dtype type) {
  batch c = b;
  for (auto f : {&batch::lp_cur, &batch::lp_prev, &batch::lp_gen, &batch::advantages, &batch::mask, &batch::lp_ref})
    c.*f = converted(b.*f, type);
  return c;
}

/// Tokens [t0, t1) holding sequences [s0, s1) as their own micro-batch (offsets rebased).
batch slice(const batch& b, std::int64_t s0, std::int64_t s1) {
  const auto* o = b.offsets.data<std::int32_t>();
  const std::int64_t t0 = o[s0], t1 = o[s1];
  batch c = b;
  for (auto f : {&batch::lp_cur, &batch::lp_prev, &batch::lp_gen, &batch::advantages, &batch::mask, &batch::lp_ref}) {
    c.*f = host_buffer((b.*f).type(), {t1 - t0});
    for (std::int64_t i = t0; i < t1; ++i) set_value(c.*f, i - t0, value_at(b.*f, i));
  }
  std::vector<std::int32_t> rebased;
  for (std::int64_t s = s0; s <= s1; ++s) rebased.push_back(o[s] - static_cast<std::int32_t>(t0));
  c.offsets = host_buffer::of<std::int32_t>({s1 - s0 + 1}, rebased);
  return c;
}

double loss_of(const batch& b, const pg_loss_settings& s, pg_loss_metrics* metrics = nullptr) {
  host_buffer loss(b.lp_cur.type(), {1});
  const status st = ops::pg_loss_forward(ctx, b.inputs(), s, loss, metrics);
  BOOST_REQUIRE_MESSAGE(st.is_ok(), st.message());
  return value_at(loss, 0);
}

host_buffer gradient_of(const batch& b, const pg_loss_settings& s, double dloss = 1.0) {
  host_buffer d(b.lp_cur.type(), {b.size()});
  const status st = ops::pg_loss_backward(ctx, b.inputs(), s, dloss, d);
  BOOST_REQUIRE_MESSAGE(st.is_ok(), st.message());
  return d;
}

/// The analytic gradient, checked against central differences of the loss over lp_cur.
host_buffer checked_gradient(const batch& b, const pg_loss_settings& s, const std::string& what) {
  const host_buffer d = gradient_of(b, s);
  check_gradient(what, b.lp_cur, [&] { return loss_of(b, s); }, d);
  return d;
}

/// Settings with every optional part off: plain PPO clip 0.2 / 0.28.
pg_loss_settings plain_settings() {
  pg_loss_settings s;
  s.ratio_clip_c.reset();
  s.importance = importance_correction::off;
  return s;
}

double k3_clamped(double u, double in_clamp, double out_clamp) {
  u = std::clamp(u, -in_clamp, in_clamp);
  return std::clamp(std::exp(u) - 1 - u, -out_clamp, out_clamp);
}

}  // namespace

BOOST_AUTO_TEST_SUITE(pg_loss_test)

BOOST_AUTO_TEST_CASE(a_tiny_batch_by_hand_gives_the_exact_loss_gradient_and_metrics) {
  // token 0: r = 2, A = 1: l = max(-2, -1.28) = -1.28 (high clip, gradient 0)
  // token 1: r = 1, A = -0.5: l = 0.5, dl/dx = -A r = 0.5
  // token 2: masked out; its NaN is never read.  N_tok = 2: loss = (-1.28 + 0.5) / 2 = -0.39.
  batch b;
  b.lp_prev = host_buffer::of<double>({3}, {-1.0, -2.0, -1.0});
  b.lp_cur = host_buffer::of<double>({3}, {-1.0 + std::log(2.0), -2.0, std::nan("")});
  b.lp_gen = host_buffer::of<double>({3}, {-1.0, -2.5, -1.0});
  b.advantages = host_buffer::of<double>({3}, {1.0, -0.5, 3.0});
  b.mask = host_buffer::of<double>({3}, {1.0, 1.0, 0.0});
  b.offsets = offsets_of({3});
  b.tokens_global = 2;
  pg_loss_metrics m;
  BOOST_TEST(loss_of(b, plain_settings(), &m) == -0.39, boost::test_tools::tolerance(1e-14));
  const host_buffer d = gradient_of(b, plain_settings());
  BOOST_TEST(value_at(d, 0) == 0.0);
  BOOST_TEST(value_at(d, 1) == 0.25, boost::test_tools::tolerance(1e-14));
  BOOST_TEST(value_at(d, 2) == 0.0);
  BOOST_TEST(m.token_count == 2);
  BOOST_TEST(m.sequence_count == 1);
  BOOST_TEST(m.clipped_high == 1);
  BOOST_TEST(m.clipped_low + m.clipped_dual == 0);
  BOOST_TEST(m.ratio_sum == 3.0, boost::test_tools::tolerance(1e-14));
  BOOST_TEST(m.ratio_max == 2.0, boost::test_tools::tolerance(1e-14));
  BOOST_TEST(m.ratio_min == 1.0);
  BOOST_TEST(m.ratio_clamped_sum == 2.28, boost::test_tools::tolerance(1e-14));
  BOOST_TEST(m.mult_prob_error_sum == 1 + std::exp(0.5), boost::test_tools::tolerance(1e-14));
  BOOST_TEST(m.gen_kl_error_sum == std::exp(0.5) - 1.5, boost::test_tools::tolerance(1e-14));
  BOOST_TEST(m.importance_weight_sum == 1 + std::exp(0.5), boost::test_tools::tolerance(1e-14));
  BOOST_TEST(m.pg_loss == -0.39, boost::test_tools::tolerance(1e-14));
  BOOST_TEST(m.kl_penalty == 0.0);
}

BOOST_AUTO_TEST_CASE(float32_matches_the_float64_reference_with_every_feature_on) {
  const batch b64 = random_batch({7, 12, 1, 9, 15, 6}, 10, 0.6);
  const batch b32 = converted_batch(b64, dtype::float32);
  pg_loss_settings s;  // dual clip 10 -> use 1.5 so it fires; tis capped low so truncation fires
  s.ratio_clip_c = 1.5;
  s.is_ratio_max = 1.02;
  s.kl_beta = 0.05;
  for (bool token_level : {true, false}) {
    s.token_level_loss = token_level;
    pg_loss_metrics m64, m32;
    const double l64 = loss_of(b64, s, &m64), l32 = loss_of(b32, s, &m32);
    BOOST_TEST(l32 == l64, boost::test_tools::tolerance(2e-5));
    expect_close(gradient_of(b32, s), gradient_of(b64, s), tolerance_for(dtype::float32), "d lp_cur");
    BOOST_TEST(m64.clipped_low > 0);
    BOOST_TEST(m64.clipped_high > 0);
    BOOST_TEST(m64.clipped_dual > 0);
    BOOST_TEST(m64.is_truncated_tokens > 0);
    BOOST_TEST(m32.clipped_low == m64.clipped_low);
    BOOST_TEST(m32.clipped_high == m64.clipped_high);
    BOOST_TEST(m32.clipped_dual == m64.clipped_dual);
    BOOST_TEST(m32.is_truncated_tokens == m64.is_truncated_tokens);
    BOOST_TEST(m32.ratio_sum == m64.ratio_sum, boost::test_tools::tolerance(1e-6));
    BOOST_TEST(m32.kl_penalty == m64.kl_penalty, boost::test_tools::tolerance(1e-5));
    BOOST_TEST(m32.gen_kl_error_sum == m64.gen_kl_error_sum, boost::test_tools::tolerance(1e-3));
    BOOST_TEST(m32.mult_prob_error_sum == m64.mult_prob_error_sum, boost::test_tools::tolerance(1e-6));
  }
}

BOOST_AUTO_TEST_CASE(without_any_clip_the_gradient_matches_finite_differences_and_no_counter_fires) {
  const batch b = random_batch({6, 8, 5}, 20);
  pg_loss_metrics m;
  loss_of(b, plain_settings(), &m);
  const host_buffer d = checked_gradient(b, plain_settings(), "no clip");
  BOOST_TEST(m.clipped_low + m.clipped_high + m.clipped_dual == 0);
  BOOST_TEST(m.token_count == 16);
  for (std::int64_t i = 0; i < b.size(); ++i)
    BOOST_TEST(value_at(d, i) == -value_at(b.advantages, i) * b.ratio(i) * b.masked(i) / b.tokens_global,
               boost::test_tools::tolerance(1e-13));
}

BOOST_AUTO_TEST_CASE(the_low_clip_fires_for_negative_advantages_below_one_minus_clip_min_and_stops_their_gradient) {
  const batch b = random_batch({6, 8, 5}, 30);
  for (std::int64_t i : {0, 2, 6, 11}) b.set_token(i, -0.8, -0.5);  // A < 0, r = 0.61 < 0.8: clipped
  for (std::int64_t i : {1, 7}) b.set_token(i, 0.9, -0.5);          // A > 0, same r: not clipped
  pg_loss_metrics m;
  loss_of(b, plain_settings(), &m);
  const host_buffer d = checked_gradient(b, plain_settings(), "low clip");
  BOOST_TEST(m.clipped_low == 4);
  BOOST_TEST(m.clipped_high + m.clipped_dual == 0);
  for (std::int64_t i : {0, 2, 6, 11}) BOOST_TEST(value_at(d, i) == 0.0);
  for (std::int64_t i : {1, 7})
    BOOST_TEST(value_at(d, i) == -0.9 * b.ratio(i) / b.tokens_global, boost::test_tools::tolerance(1e-13));
  BOOST_TEST(m.ratio_clamped_min == 0.8);
}

BOOST_AUTO_TEST_CASE(the_high_clip_fires_for_positive_advantages_above_one_plus_clip_max_and_stops_their_gradient) {
  const batch b = random_batch({6, 8, 5}, 40);
  for (std::int64_t i : {0, 2, 6, 11}) b.set_token(i, 0.7, 0.5);  // A > 0, r = 1.65 > 1.28: clipped
  for (std::int64_t i : {1, 7}) b.set_token(i, -0.6, 0.5);        // A < 0, same r: not clipped
  pg_loss_metrics m;
  loss_of(b, plain_settings(), &m);
  const host_buffer d = checked_gradient(b, plain_settings(), "high clip");
  BOOST_TEST(m.clipped_high == 4);
  BOOST_TEST(m.clipped_low + m.clipped_dual == 0);
  for (std::int64_t i : {0, 2, 6, 11}) BOOST_TEST(value_at(d, i) == 0.0);
  for (std::int64_t i : {1, 7})
    BOOST_TEST(value_at(d, i) == 0.6 * b.ratio(i) / b.tokens_global, boost::test_tools::tolerance(1e-13));
  BOOST_TEST(m.ratio_clamped_max == 1.28);
}

BOOST_AUTO_TEST_CASE(the_dual_clip_caps_negative_advantage_losses_at_minus_a_c_and_stops_their_gradient) {
  const batch b = random_batch({6, 8, 5}, 50);
  pg_loss_settings s = plain_settings();
  s.ratio_clip_c = 3.0;
  for (std::int64_t i : {0, 6}) b.set_token(i, -0.8, 1.5);   // r = 4.48 > c: l = -A c
  for (std::int64_t i : {2, 11}) b.set_token(i, -0.8, 0.5);  // r = 1.65 < c: unclipped -A r
  b.set_token(1, 0.5, 1.5);                                  // A > 0: the high clip, not the dual one
  pg_loss_metrics m;
  const double loss = loss_of(b, s, &m);
  const host_buffer d = checked_gradient(b, s, "dual clip");
  BOOST_TEST(m.clipped_dual == 2);
  BOOST_TEST(m.clipped_high == 1);
  BOOST_TEST(m.clipped_low == 0);
  for (std::int64_t i : {0, 1, 6}) BOOST_TEST(value_at(d, i) == 0.0);
  for (std::int64_t i : {2, 11})
    BOOST_TEST(value_at(d, i) == 0.8 * b.ratio(i) / b.tokens_global, boost::test_tools::tolerance(1e-13));
  // Without the dual clip those two tokens would contribute -A r instead of -A c.
  s.ratio_clip_c.reset();
  const double undual = loss_of(b, s);
  BOOST_TEST(undual - loss == 0.8 * (b.ratio(0) + b.ratio(6) - 6.0) / b.tokens_global,
             boost::test_tools::tolerance(1e-12));
}

BOOST_AUTO_TEST_CASE(tis_truncates_importance_weights_above_the_cap_and_scales_the_gradient_by_the_cap) {
  const batch b = random_batch({6, 8, 5}, 60);
  pg_loss_settings s = plain_settings();
  s.importance = importance_correction::tis;
  s.is_ratio_max = 2.0;
  for (std::int64_t i : {0, 6, 11}) b.set_weight(i, 1.0);  // w = e > 2: truncated to 2
  b.set_weight(2, -2.0);                                   // w = 0.14: kept (min 0)
  pg_loss_metrics m;
  loss_of(b, s, &m);
  const host_buffer d = checked_gradient(b, s, "tis");
  BOOST_TEST(m.is_truncated_tokens == 3);
  for (std::int64_t i : {0, 6, 11})
    BOOST_TEST(value_at(d, i) == -value_at(b.advantages, i) * b.ratio(i) * 2.0 / b.tokens_global,
               boost::test_tools::tolerance(1e-13));
  BOOST_TEST(value_at(d, 2) == -value_at(b.advantages, 2) * b.ratio(2) * std::exp(-2.0) / b.tokens_global,
             boost::test_tools::tolerance(1e-12));
}

BOOST_AUTO_TEST_CASE(icepop_zeroes_tokens_whose_importance_weight_leaves_the_bounds) {
  const batch b = random_batch({6, 8, 5}, 70);
  pg_loss_settings s = plain_settings();
  s.importance = importance_correction::icepop;
  s.is_ratio_min = 0.5;
  s.is_ratio_max = 2.0;
  for (std::int64_t i : {0, 6}) b.set_weight(i, 1.0);  // e > 2
  b.set_weight(2, -1.0);                              // 0.37 < 0.5
  b.set_weight(11, 0.5);                              // 1.65: kept, unchanged
  pg_loss_metrics m;
  loss_of(b, s, &m);
  const host_buffer d = checked_gradient(b, s, "icepop");
  BOOST_TEST(m.is_truncated_tokens == 3);
  for (std::int64_t i : {0, 2, 6}) BOOST_TEST(value_at(d, i) == 0.0);
  BOOST_TEST(value_at(d, 11) == -value_at(b.advantages, 11) * b.ratio(11) * std::exp(0.5) / b.tokens_global,
             boost::test_tools::tolerance(1e-12));
}

BOOST_AUTO_TEST_CASE(seq_mask_tis_zeroes_a_whole_sequence_whose_geometric_mean_ratio_leaves_the_bounds) {
  const batch b = random_batch({6, 8, 5}, 80);
  pg_loss_settings s = plain_settings();
  s.importance = importance_correction::seq_mask_tis;
  s.is_ratio_min = 0.9;
  s.is_ratio_max = 1.1;
  for (std::int64_t i = 6; i < 14; ++i) b.set_weight(i, 0.3);  // sequence 1: geometric mean e^0.3 = 1.35
  b.set_weight(0, 0.15);  // one large token weight in sequence 0 (mean stays inside): kept, untruncated
  pg_loss_metrics m;
  loss_of(b, s, &m);
  const host_buffer d = checked_gradient(b, s, "seq-mask-tis");
  BOOST_TEST(m.is_masked_sequences == 1);
  BOOST_TEST(m.is_truncated_tokens == 7);  // the masked tokens of sequence 1 (token 9 is masked out)
  BOOST_TEST(m.sequence_count == 3);
  for (std::int64_t i = 6; i < 14; ++i) BOOST_TEST(value_at(d, i) == 0.0);
  BOOST_TEST(value_at(d, 0) == -value_at(b.advantages, 0) * b.ratio(0) * std::exp(0.15) / b.tokens_global,
             boost::test_tools::tolerance(1e-12));
}

BOOST_AUTO_TEST_CASE(kl_in_score_function_form_adds_k3_itself_to_the_finite_difference_gradient) {
  const batch b = random_batch({6, 8, 5}, 90);
  pg_loss_settings s = plain_settings();
  s.kl_beta = 0.1;
  s.kl_input_clamp = 1.0;
  s.kl_output_clamp = 0.6;
  auto set_ref = [&](std::int64_t i, double u) { set_value(b.lp_ref, i, value_at(b.lp_cur, i) + u); };
  set_ref(0, 1.5);    // input clamp (to 1) and then output clamp (e - 2 = 0.718 > 0.6): no KL gradient
  set_ref(6, 0.95);   // output clamp only (0.636 > 0.6)
  set_ref(11, -1.5);  // input clamp only (k3(-1) = 0.368)
  pg_loss_metrics m;
  loss_of(b, s, &m);
  const host_buffer d = gradient_of(b, s);
  // exp(x - sg(x)) has value 1 (invisible to finite differences) and derivative 1: the analytic
  // gradient carries an extra beta * k3 / N per masked token.
  const host_buffer visible(dtype::float64, {b.size()});
  double kl = 0;
  for (std::int64_t i = 0; i < b.size(); ++i) {
    const double k = b.masked(i) * k3_clamped(value_at(b.lp_ref, i) - value_at(b.lp_cur, i), 1.0, 0.6);
    kl += k;
    set_value(visible, i, value_at(d, i) - s.kl_beta * k / b.tokens_global);
  }
  check_gradient("kl score-function form", b.lp_cur, [&] { return loss_of(b, s); }, visible);
  BOOST_TEST(m.kl_penalty == kl / b.tokens_global, boost::test_tools::tolerance(1e-13));
  BOOST_TEST(value_at(d, 0) == (-value_at(b.advantages, 0) * b.ratio(0) + 0.1 * 0.6) / b.tokens_global,
             boost::test_tools::tolerance(1e-12));
}

BOOST_AUTO_TEST_CASE(kl_with_the_on_policy_approximation_weights_by_a_constant_exp_of_cur_minus_gen) {
  const batch b = random_batch({6, 8, 5}, 100);
  pg_loss_settings s = plain_settings();  // importance correction off: lp_gen only enters through f
  s.kl_beta = 0.2;
  s.use_on_policy_kl_approximation = true;
  for (std::int64_t i : {3, 8}) set_value(b.lp_gen, i, value_at(b.lp_cur, i) - 0.4);  // f = 1.49
  pg_loss_metrics m;
  loss_of(b, s, &m);
  double kl = 0;
  for (std::int64_t i = 0; i < b.size(); ++i)
    kl += b.masked(i) * std::exp(value_at(b.lp_cur, i) - value_at(b.lp_gen, i)) *
          k3_clamped(value_at(b.lp_ref, i) - value_at(b.lp_cur, i), 20, 10);
  BOOST_TEST(m.kl_penalty == kl / b.tokens_global, boost::test_tools::tolerance(1e-13));
  // No gradient through f: differences that move lp_gen along with lp_cur keep f fixed.
  const host_buffer d = gradient_of(b, s);
  const host_buffer base_cur = converted(b.lp_cur, dtype::float64), base_gen = converted(b.lp_gen, dtype::float64);
  check_gradient("kl on-policy, f constant", b.lp_cur, [&] {
    for (std::int64_t i = 0; i < b.size(); ++i)
      set_value(b.lp_gen, i, value_at(base_gen, i) + value_at(b.lp_cur, i) - value_at(base_cur, i));
    return loss_of(b, s);
  }, d);
  for (std::int64_t i = 0; i < b.size(); ++i) set_value(b.lp_gen, i, value_at(base_gen, i));
  // With kl_on_policy_weight_grad the plain differences apply, and at lp_gen = lp_cur the gradient
  // equals the score-function form's.
  s.kl_on_policy_weight_grad = true;
  checked_gradient(b, s, "kl on-policy, gradient through f");
  for (std::int64_t i = 0; i < b.size(); ++i) set_value(b.lp_gen, i, value_at(b.lp_cur, i));
  pg_loss_settings score = s;
  score.use_on_policy_kl_approximation = false;
  expect_close(gradient_of(b, s), gradient_of(b, score), tolerance_for(dtype::float64), "f at lp_gen = lp_cur");
}

BOOST_AUTO_TEST_CASE(force_on_policy_ratio_uses_ratio_one_with_the_gradient_of_exp_x_minus_sg_x) {
  batch b = random_batch({6, 8, 5}, 110, 0.6);
  b.lp_prev = host_buffer();  // not needed: lp_prev := sg(lp_cur)
  pg_loss_settings s;         // tis (cap 2) and dual clip 10 as in the recipe
  s.force_on_policy_ratio = true;
  set_value(b.lp_gen, 0, value_at(b.lp_cur, 0) - 1.0);  // w = exp(lp_cur - lp_gen) = e -> 2
  pg_loss_metrics m;
  const double loss = loss_of(b, s, &m);
  const host_buffer d = gradient_of(b, s);
  double expected = 0;
  for (std::int64_t i = 0; i < b.size(); ++i) {
    const double w = std::min(2.0, std::exp(value_at(b.lp_cur, i) - value_at(b.lp_gen, i)));
    const double g = -value_at(b.advantages, i) * w * b.masked(i) / b.tokens_global;
    expected += g;
    BOOST_TEST(value_at(d, i) == g, boost::test_tools::tolerance(1e-13));
  }
  BOOST_TEST(loss == expected, boost::test_tools::tolerance(1e-13));
  BOOST_TEST(m.ratio_sum == static_cast<double>(m.token_count));
  BOOST_TEST(m.clipped_low + m.clipped_high + m.clipped_dual == 0);
  BOOST_TEST(m.is_truncated_tokens == 1);
}

BOOST_AUTO_TEST_CASE(sequence_level_loss_averages_each_sequence_then_divides_by_the_global_sequence_count) {
  const batch b = random_batch({6, 8, 5, 3}, 120);
  pg_loss_settings s = plain_settings();
  s.token_level_loss = false;
  double expected = 0;
  const auto* o = b.offsets.data<std::int32_t>();
  for (int seq = 0; seq < 4; ++seq) {
    double sum = 0, count = 0;
    for (std::int64_t i = o[seq]; i < o[seq + 1]; ++i) {
      sum += -value_at(b.advantages, i) * b.ratio(i) * b.masked(i);
      count += b.masked(i);
    }
    expected += sum / count;
  }
  BOOST_TEST(loss_of(b, s) == expected / b.sequences_global, boost::test_tools::tolerance(1e-13));
  checked_gradient(b, s, "sequence-level");
  // With clipping, truncation and a differentiable KL on as well.
  for (std::int64_t i : {0, 6}) b.set_token(i, -0.8, 1.5);
  b.set_token(11, 0.7, 0.5);
  b.set_weight(2, 1.0);
  s.ratio_clip_c = 3.0;
  s.importance = importance_correction::tis;
  s.kl_beta = 0.1;
  s.use_on_policy_kl_approximation = true;
  s.kl_on_policy_weight_grad = true;
  checked_gradient(b, s, "sequence-level, everything on");
}

BOOST_AUTO_TEST_CASE(micro_batch_losses_with_the_global_counts_sum_to_the_whole_batch_loss) {
  const batch whole = random_batch({5, 9, 4, 7, 6}, 130, 0.6);
  for (std::int64_t i = 5; i < 14; ++i) whole.set_weight(i, 0.3);  // sequence 1 dropped by seq-mask-tis
  pg_loss_settings s;
  s.ratio_clip_c = 1.5;
  s.kl_beta = 0.05;
  s.importance = importance_correction::seq_mask_tis;
  s.is_ratio_min = 0.9;
  s.is_ratio_max = 1.1;
  const batch first = slice(whole, 0, 2), second = slice(whole, 2, 5);
  for (bool token_level : {true, false}) {
    s.token_level_loss = token_level;
    pg_loss_metrics m_whole, m_first, m_second;
    const double l = loss_of(whole, s, &m_whole);
    const double l1 = loss_of(first, s, &m_first), l2 = loss_of(second, s, &m_second);
    BOOST_TEST(l1 + l2 == l, boost::test_tools::tolerance(1e-14));
    const host_buffer d = gradient_of(whole, s), d1 = gradient_of(first, s), d2 = gradient_of(second, s);
    for (std::int64_t i = 0; i < whole.size(); ++i)
      BOOST_TEST_REQUIRE(value_at(d, i) == (i < first.size() ? value_at(d1, i) : value_at(d2, i - first.size())));
    m_first.merge(m_second);
    BOOST_TEST(m_first.token_count == m_whole.token_count);
    BOOST_TEST(m_first.sequence_count == m_whole.sequence_count);
    BOOST_TEST(m_first.clipped_low == m_whole.clipped_low);
    BOOST_TEST(m_first.clipped_high == m_whole.clipped_high);
    BOOST_TEST(m_first.clipped_dual == m_whole.clipped_dual);
    BOOST_TEST(m_first.is_masked_sequences == 1);
    BOOST_TEST(m_first.is_masked_sequences == m_whole.is_masked_sequences);
    BOOST_TEST(m_first.ratio_min == m_whole.ratio_min);
    BOOST_TEST(m_first.ratio_max == m_whole.ratio_max);
    BOOST_TEST(m_first.pg_loss == m_whole.pg_loss, boost::test_tools::tolerance(1e-14));
    BOOST_TEST(m_first.kl_penalty == m_whole.kl_penalty, boost::test_tools::tolerance(1e-14));
    BOOST_TEST(m_first.ratio_sum == m_whole.ratio_sum, boost::test_tools::tolerance(1e-14));
  }
}

BOOST_AUTO_TEST_CASE(the_backward_scales_by_dloss_and_accumulates_on_request) {
  const batch b = random_batch({6, 8}, 140);
  const pg_loss_settings s = plain_settings();
  const host_buffer once = gradient_of(b, s, 1.0), thrice = gradient_of(b, s, 3.0);
  const host_buffer acc = gradient_of(b, s, 1.0);
  BOOST_REQUIRE(ops::pg_loss_backward(ctx, b.inputs(), s, 2.0, acc, true).is_ok());
  for (std::int64_t i = 0; i < b.size(); ++i) {
    BOOST_TEST(value_at(thrice, i) == 3 * value_at(once, i), boost::test_tools::tolerance(1e-14));
    BOOST_TEST(value_at(acc, i) == 3 * value_at(once, i), boost::test_tools::tolerance(1e-14));
  }
}

BOOST_AUTO_TEST_CASE(bad_arguments_are_refused_with_messages_naming_the_tensor_or_setting) {
  const batch good = random_batch({3, 5}, 150);
  host_buffer loss(dtype::float64, {1}), d(dtype::float64, {8});
  auto forward = [&](const batch& b, const pg_loss_settings& s) {
    const status st = ops::pg_loss_forward(ctx, b.inputs(), s, loss);
    BOOST_TEST((st.code() == status_code::invalid_argument));
    return st.message();
  };
  const pg_loss_settings s = plain_settings();
  batch b = good;
  b.lp_gen = host_buffer(dtype::float64, {7});
  BOOST_TEST(forward(b, s) == "pg_loss_forward: lp_gen: expected [8], got F64 [7] cpu");
  b = good;
  b.advantages = converted(good.advantages, dtype::float32);
  BOOST_TEST(forward(b, s) == "pg_loss_forward: advantages: expected dtype float64, got F32 [8] cpu");
  b = good;
  b.lp_cur = host_buffer(dtype::bfloat16, {8});
  BOOST_TEST(forward(b, s) == "pg_loss_forward: lp_cur: expected dtype float32 or float64, got BF16 [8] cpu");
  b = good;
  b.lp_ref = host_buffer();
  pg_loss_settings kl = s;
  kl.kl_beta = 0.1;
  BOOST_TEST(forward(b, kl) == "pg_loss_forward: lp_ref: expected [8], got no tensor");
  b = good;
  b.offsets = host_buffer::of<std::int32_t>({3}, {0, 5, 3});
  BOOST_TEST(forward(b, s) == "pg_loss_forward: seq_offsets must not decrease: seq_offsets[2] = 3 after 5");
  b.offsets = host_buffer::of<std::int32_t>({3}, {0, 3, 7});
  BOOST_TEST(forward(b, s) == "pg_loss_forward: seq_offsets[2] must equal the token count 8, got 7");
  b.offsets = host_buffer::of<std::int32_t>({3}, {1, 3, 8});
  BOOST_TEST(forward(b, s) == "pg_loss_forward: seq_offsets[0] must be 0, got 1");
  b.offsets = host_buffer::of<double>({3}, {0, 3, 8});
  BOOST_TEST(forward(b, s) == "pg_loss_forward: seq_offsets: expected dtype int32, got F64 [3] cpu");
  b = good;
  b.mask = converted(good.mask, dtype::float64);
  set_value(b.mask, 3, 0.5);
  const status masked = ops::pg_loss_backward(ctx, b.inputs(), s, 1.0, d);
  BOOST_TEST(masked.message() == "pg_loss_backward: mask: values must be 0 or 1, got 0.5 at token 3");
  pg_loss_settings bad = s;
  bad.ratio_clip_c = 0.5;
  BOOST_TEST(forward(good, bad) == "pg_loss_forward: ratio_clip_c must be > 1, got 0.5");
  bad = s;
  bad.importance = importance_correction::icepop;
  bad.is_ratio_min = 3.0;
  BOOST_TEST(forward(good, bad) == "pg_loss_forward: is_ratio_min must be in [0, is_ratio_max], got 3");
  b = good;
  b.tokens_global = 0;
  BOOST_TEST(forward(b, s) ==
             "pg_loss_forward: global_token_count must be finite and > 0 for a token-level loss, got 0");
  bad = s;
  bad.token_level_loss = false;
  b.sequences_global = std::nan("");
  BOOST_TEST(forward(b, bad) ==
             "pg_loss_forward: global_sequence_count must be finite and > 0 for a sequence-level loss, got nan");
  BOOST_TEST(ops::pg_loss_backward(ctx, good.inputs(), s, std::nan(""), d).message() ==
             "pg_loss_backward: dloss must be finite, got nan");
  BOOST_TEST(ops::pg_loss_backward(ctx, good.inputs(), s, 1.0, host_buffer(dtype::float64, {9})).message() ==
             "pg_loss_backward: d_lp_cur: expected [8], got F64 [9] cpu");
  BOOST_TEST(ops::pg_loss_forward(ctx, good.inputs(), s, host_buffer(dtype::float32, {1})).message() ==
             "pg_loss_forward: loss: expected dtype float64, got F32 [1] cpu");
}

BOOST_AUTO_TEST_CASE(mixed_devices_and_float64_on_a_cuda_device_are_refused_naming_the_op) {
  batch b = random_batch({4}, 160);
  auto on_cuda = [](const host_buffer& h) {
    return tensor::contiguous(h.data<void>(), h.type(), h.shape(), device::cuda(0));
  };
  ops::pg_loss_inputs in = b.inputs();
  in.lp_cur = on_cuda(b.lp_cur);
  host_buffer loss(dtype::float64, {1});
  BOOST_TEST(ops::pg_loss_forward(ctx, in, plain_settings(), loss).message() ==
             "pg_loss_forward: lp_prev is on cpu, the other operands on cuda:0");
  for (tensor* t : {&in.lp_prev, &in.lp_gen, &in.advantages, &in.mask, &in.lp_ref, &in.seq_offsets}) {
    *t = tensor::contiguous(t->data(), t->type(), std::vector<std::int64_t>{t->dim(0)}, device::cuda(0));
  }
  const tensor loss_cuda = tensor::contiguous(loss.data<void>(), dtype::float64, loss.shape(), device::cuda(0));
  expect_cuda_refuses_float64(ops::pg_loss_forward(cuda_ctx, in, plain_settings(), loss_cuda), "pg_loss_forward");
}

BOOST_AUTO_TEST_SUITE_END()
