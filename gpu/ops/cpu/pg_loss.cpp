// CPU kernels of the clipped policy-gradient loss: one evaluator computes every per-token term
// (value and derivative with respect to lp_cur) so the forward and backward cannot disagree.
#include "gpu/ops/cpu/pg_loss.h"

#include <algorithm>
#include <cmath>
#include <cstdint>

namespace tandem::gpu::ops::cpu {
namespace {

enum class clip_kind { none, low, high, dual };

/// Everything one masked token contributes; derivatives are with respect to lp_cur.
template <class T>
struct token_terms {
  T ratio = 0, ratio_clamped = 0;
  T pg = 0, d_pg = 0;  ///< l and dl/dx
  T weight = 1;        ///< w used by the loss (1 when the correction is off)
  T weight_metric = 0; ///< w after truncation (raw when off or plain)
  T kl = 0, d_kl = 0;  ///< f * k3 (clamped) and its derivative, without beta
  clip_kind clip = clip_kind::none;
  bool truncated = false;
};

struct sequence_info {
  std::int64_t begin = 0, end = 0, masked = 0;
  bool kept = true;  ///< seq-mask-tis: the geometric-mean ratio lies inside the bounds
};

template <class T>
class evaluator {
 public:
  evaluator(const pg_loss_inputs& in, const pg_loss_settings& s)
      : s_(s),
        cur_(in.lp_cur.as<const T>()),
        prev_(s.force_on_policy_ratio ? in.lp_cur.as<const T>() : in.lp_prev.as<const T>()),
        gen_(in.lp_gen.as<const T>()),
        adv_(in.advantages.as<const T>()),
        mask_(in.mask.as<const T>()),
        ref_(s.kl_beta > 0 ? in.lp_ref.as<const T>() : nullptr),
        offsets_(in.seq_offsets.as<const std::int32_t>()),
        sequences_(in.seq_offsets.dim(0) - 1),
        lo_(static_cast<T>(1.0 - s.ratio_clip_min)),
        hi_(static_cast<T>(1.0 + s.ratio_clip_max)),
        c_(static_cast<T>(s.ratio_clip_c.value_or(0.0))),
        is_min_(static_cast<T>(s.is_ratio_min)),
        is_max_(static_cast<T>(s.is_ratio_max)),
        in_clamp_(static_cast<T>(s.kl_input_clamp)),
        out_clamp_(static_cast<T>(s.kl_output_clamp)) {}

  std::int64_t sequences() const { return sequences_; }
  bool masked(std::int64_t i) const { return mask_[i] != T(0); }

  sequence_info sequence(std::int64_t s) const {
    sequence_info info{offsets_[s], offsets_[s + 1], 0, true};
    double log_ratio_sum = 0;
    for (std::int64_t i = info.begin; i < info.end; ++i) {
      if (!masked(i)) continue;
      ++info.masked;
      double d = static_cast<double>(prev_[i]) - static_cast<double>(gen_[i]);
      log_ratio_sum += std::isfinite(d) ? d : 0.0;  // nan_to_num
    }
    if (s_.importance == importance_correction::seq_mask_tis) {
      const double geo = std::exp(info.masked > 0 ? log_ratio_sum / static_cast<double>(info.masked) : 0.0);
      info.kept = geo >= s_.is_ratio_min && geo <= s_.is_ratio_max;
    }
    return info;
  }

  token_terms<T> token(std::int64_t i, bool sequence_kept) const {
    token_terms<T> t;
    const T x = cur_[i], prev = prev_[i], gen = gen_[i], a = adv_[i];
    // PPO ratio and clipped surrogate.
    if (s_.force_on_policy_ratio) {
      t.ratio = t.ratio_clamped = T(1);  // exp(x - sg(x)): value 1, derivative 1
    } else {
      t.ratio = std::exp(x - prev);
      t.ratio_clamped = std::clamp(t.ratio, lo_, hi_);
    }
    const T unclipped = -a * t.ratio, clipped = -a * t.ratio_clamped;
    t.pg = unclipped;
    t.d_pg = -a * t.ratio;
    if (clipped > unclipped) {
      t.pg = clipped;
      t.d_pg = T(0);
      t.clip = t.ratio < lo_ ? clip_kind::low : clip_kind::high;
    }
    if (s_.ratio_clip_c && a < T(0)) {
      const T dual = -a * c_;
      if (dual < t.pg) {
        t.pg = dual;
        t.d_pg = T(0);
        t.clip = clip_kind::dual;
      }
    }
    // Importance weight (no gradient).
    T raw = std::exp(prev - gen);
    if (!std::isfinite(raw)) raw = T(0);
    T w = raw;
    switch (s_.importance) {
      case importance_correction::off:
      case importance_correction::plain: break;
      case importance_correction::tis:
        w = std::clamp(raw, is_min_, is_max_);
        t.truncated = raw > is_max_ || raw < is_min_;
        break;
      case importance_correction::icepop:
        t.truncated = !(raw >= is_min_ && raw <= is_max_);
        if (t.truncated) w = T(0);
        break;
      case importance_correction::seq_mask_tis:
        t.truncated = !sequence_kept;
        if (t.truncated) w = T(0);
        break;
    }
    t.weight_metric = w;
    t.weight = s_.importance == importance_correction::off ? T(1) : w;
    // KL penalty against the reference policy (k3, clamped), times f.
    if (ref_) {
      T u = ref_[i] - x, du = T(-1);
      if (u > in_clamp_ || u < -in_clamp_) {
        u = std::clamp(u, -in_clamp_, in_clamp_);
        du = T(0);
      }
      const T eu = std::exp(u);
      T k = eu - T(1) - u, dk = (eu - T(1)) * du;
      if (k > out_clamp_ || k < -out_clamp_) {
        k = std::clamp(k, -out_clamp_, out_clamp_);
        dk = T(0);
      }
      if (s_.use_on_policy_kl_approximation) {
        T f = std::exp(x - gen);
        if (!std::isfinite(f)) f = T(0);
        t.kl = f * k;
        t.d_kl = f * dk;
        if (s_.kl_on_policy_weight_grad) t.d_kl += f * k;  // df/dx = f
      } else {
        t.kl = k;           // f = exp(x - sg(x)) = 1
        t.d_kl = k + dk;    // d(f k) = f' k + f k' with f = f' = 1
      }
    }
    return t;
  }

  /// Adds token i's metric terms.
  void add_metrics(std::int64_t i, const token_terms<T>& t, pg_loss_metrics& m) const {
    const T prev = prev_[i], gen = gen_[i], x = cur_[i];
    ++m.token_count;
    m.clipped_low += t.clip == clip_kind::low;
    m.clipped_high += t.clip == clip_kind::high;
    m.clipped_dual += t.clip == clip_kind::dual;
    m.is_truncated_tokens += t.truncated;
    const auto r = static_cast<double>(t.ratio), rc = static_cast<double>(t.ratio_clamped);
    m.ratio_sum += r;
    m.ratio_min = std::min(m.ratio_min, r);
    m.ratio_max = std::max(m.ratio_max, r);
    m.ratio_clamped_sum += rc;
    m.ratio_clamped_min = std::min(m.ratio_clamped_min, rc);
    m.ratio_clamped_max = std::max(m.ratio_clamped_max, rc);
    m.importance_weight_sum += static_cast<double>(t.weight_metric);
    m.mult_prob_error_sum += static_cast<double>(std::exp(std::abs(gen - prev)));
    // e^r - 1 - r cancels to ~r²/2: evaluated in double (a float32 exp's last-place error alone
    // would be a 1e-4 relative error of the term at |r| ~ 1e-3).
    const double log_ratio = static_cast<double>(prev - gen);
    m.gen_kl_error_sum += std::exp(log_ratio) - 1.0 - log_ratio;
    m.approx_entropy_sum += static_cast<double>(-std::exp(x - gen) * x);
  }

 private:
  const pg_loss_settings& s_;
  const T *cur_, *prev_, *gen_, *adv_, *mask_, *ref_;
  const std::int32_t* offsets_;
  std::int64_t sequences_;
  T lo_, hi_, c_, is_min_, is_max_, in_clamp_, out_clamp_;
};

double normaliser(const pg_loss_inputs& in, const pg_loss_settings& s) {
  return s.token_level_loss ? in.global_token_count : in.global_sequence_count;
}

}  // namespace

template <class T>
void pg_loss_forward(const pg_loss_inputs& in, const pg_loss_settings& settings, T* loss, pg_loss_metrics& metrics) {
  const evaluator<T> eval(in, settings);
  metrics = pg_loss_metrics{};
  double pg_sum = 0, kl_sum = 0;
  for (std::int64_t s = 0; s < eval.sequences(); ++s) {
    const sequence_info seq = eval.sequence(s);
    if (seq.masked == 0) continue;
    ++metrics.sequence_count;
    metrics.is_masked_sequences += !seq.kept;
    double seq_pg = 0, seq_kl = 0;
    for (std::int64_t i = seq.begin; i < seq.end; ++i) {
      if (!eval.masked(i)) continue;
      const token_terms<T> t = eval.token(i, seq.kept);
      seq_pg += static_cast<double>(t.weight * t.pg);
      seq_kl += static_cast<double>(t.kl);
      eval.add_metrics(i, t, metrics);
    }
    const double per = settings.token_level_loss ? 1.0 : static_cast<double>(seq.masked);
    pg_sum += seq_pg / per;
    kl_sum += seq_kl / per;
  }
  const double n = normaliser(in, settings);
  metrics.pg_loss = pg_sum / n;
  metrics.kl_penalty = settings.kl_beta > 0 ? kl_sum / n : 0.0;
  *loss = static_cast<T>(metrics.pg_loss + settings.kl_beta * metrics.kl_penalty);
}

template <class T>
void pg_loss_backward(const pg_loss_inputs& in, const pg_loss_settings& settings, double dloss, T* d_lp_cur,
                      bool accumulate) {
  const evaluator<T> eval(in, settings);
  const double n = normaliser(in, settings);
  const T beta = static_cast<T>(settings.kl_beta);
#pragma omp parallel for schedule(dynamic, 4)
  for (std::int64_t s = 0; s < eval.sequences(); ++s) {
    const sequence_info seq = eval.sequence(s);
    const double per = settings.token_level_loss ? 1.0 : static_cast<double>(std::max<std::int64_t>(seq.masked, 1));
    const T scale = static_cast<T>(dloss / (per * n));
    for (std::int64_t i = seq.begin; i < seq.end; ++i) {
      T g = T(0);
      if (eval.masked(i)) {
        const token_terms<T> t = eval.token(i, seq.kept);
        g = scale * (t.weight * t.d_pg + beta * t.d_kl);
      }
      d_lp_cur[i] = accumulate ? d_lp_cur[i] + g : g;
    }
  }
}

template void pg_loss_forward<float>(const pg_loss_inputs&, const pg_loss_settings&, float*, pg_loss_metrics&);
template void pg_loss_forward<double>(const pg_loss_inputs&, const pg_loss_settings&, double*, pg_loss_metrics&);
template void pg_loss_backward<float>(const pg_loss_inputs&, const pg_loss_settings&, double, float*, bool);
template void pg_loss_backward<double>(const pg_loss_inputs&, const pg_loss_settings&, double, double*, bool);

}  // namespace tandem::gpu::ops::cpu
