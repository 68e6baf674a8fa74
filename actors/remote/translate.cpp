// Actor messages <-> control-plane messages (translate.hpp).
#include "actors/remote/translate.hpp"

#include <map>
#include <type_traits>
#include <utility>

#include "actors/api/error_context.hpp"

namespace tandem::wire {
namespace {

/// Every field of the loss and optimizer metrics, with its wire name, in one list: `f(name, field)`.
template <class F, class M, class O>
void metric_fields(F&& f, M& m, O& o) {
  f("pg_loss", m.pg_loss);
  f("kl_penalty", m.kl_penalty);
  f("token_count", m.token_count);
  f("sequence_count", m.sequence_count);
  f("clipped_low", m.clipped_low);
  f("clipped_high", m.clipped_high);
  f("clipped_dual", m.clipped_dual);
  f("is_truncated_tokens", m.is_truncated_tokens);
  f("is_masked_sequences", m.is_masked_sequences);
  f("ratio_sum", m.ratio_sum);
  f("ratio_min", m.ratio_min);
  f("ratio_max", m.ratio_max);
  f("ratio_clamped_sum", m.ratio_clamped_sum);
  f("ratio_clamped_min", m.ratio_clamped_min);
  f("ratio_clamped_max", m.ratio_clamped_max);
  f("importance_weight_sum", m.importance_weight_sum);
  f("mult_prob_error_sum", m.mult_prob_error_sum);
  f("gen_kl_error_sum", m.gen_kl_error_sum);
  f("approx_entropy_sum", m.approx_entropy_sum);
  f("grad_norm", o.grad_norm);
  f("lr", o.lr);
  f("optimizer_step", o.step);
}

}  // namespace

// ---- generation ---------------------------------------------------------------------------------

control::generate_request to_wire(const generate_job& job, std::string& problem) {
  control::generate_request m;
  m.weight_version = job.version;
  if (job.requests.empty()) return m;
  const auto& first = job.requests.front();
  m.step = first.rng.step;
  m.round = first.rng.round;
  m.sampling = first.sampling;
  m.max_new_tokens = first.max_new_tokens;
  m.stop_tokens = first.stop_tokens;
  for (const auto& r : job.requests) {
    const bool same = r.sampling.temperature == first.sampling.temperature && r.sampling.top_k == first.sampling.top_k &&
                      r.sampling.top_p == first.sampling.top_p && r.max_new_tokens == first.max_new_tokens &&
                      r.stop_tokens == first.stop_tokens && r.rng.seed == first.rng.seed &&
                      r.rng.step == first.rng.step && r.rng.round == first.rng.round;
    if (!same) {
      problem = "request " + std::to_string(r.id) +
                " differs from the job's first request in sampling, length, stop tokens, seed, step or round; a "
                "remote generate job shares them";
      return {};
    }
    m.prompts.push_back({r.id, r.prompt, r.rng});
  }
  return m;
}

generate_job from_wire(const control::generate_request& m) {
  generate_job job;
  job.version = m.weight_version;
  for (const auto& p : m.prompts) {
    gpu::generation_request r;
    r.id = p.request_id;
    r.prompt = p.tokens;
    r.sampling = m.sampling;
    r.rng = p.rng;
    r.max_new_tokens = m.max_new_tokens;
    r.stop_tokens = m.stop_tokens;
    job.requests.push_back(std::move(r));
  }
  return job;
}

control::generate_result to_wire(const generate_result& r, std::uint64_t step, std::uint32_t round) {
  control::generate_result m;
  m.step = step;
  m.round = round;
  m.weight_version = r.version;
  for (const auto& t : r.trajectories) {
    const auto reason =
        t.reason == gpu::finish_reason::stop_token ? control::finish_reason::stop_token : control::finish_reason::length;
    m.sequences.push_back({t.id, t.tokens, t.logprobs, reason, t.version});
  }
  return m;
}

generate_result from_wire(const control::generate_result& m, const generate_job& job, const std::string& worker,
                          std::string& problem) {
  std::map<std::uint64_t, const gpu::generation_request*> asked;
  for (const auto& r : job.requests) asked[r.id] = &r;
  generate_result out{worker, m.weight_version, {}};
  for (const auto& s : m.sequences) {
    const auto it = asked.find(s.request_id);
    if (it == asked.end()) {
      problem = "a sequence for request " + std::to_string(s.request_id) + ", which the job did not ask for";
      return {};
    }
    trajectory t;
    t.id = s.request_id;
    t.prompt_index = it->second->rng.prompt;
    t.sample_index = it->second->rng.sample;
    t.round = it->second->rng.round;
    t.prompt = it->second->prompt;
    t.tokens = s.tokens;
    t.logprobs = s.logprobs;
    t.reason = s.reason == control::finish_reason::stop_token ? gpu::finish_reason::stop_token : gpu::finish_reason::length;
    t.version = s.weight_version;
    t.worker = worker;
    out.trajectories.push_back(std::move(t));
  }
  return out;
}

// ---- logprobs and training ----------------------------------------------------------------------

control::logprob_request to_wire(const logprobs_job& job, std::uint64_t step) {
  control::logprob_request m;
  m.step = step;
  m.rl_step = job.step;
  m.weight_version = job.version;
  m.batch = job.sequences;
  m.prompt_tokens = job.prompt_tokens;
  m.lp_gen = job.lp_gen;
  m.generated_with.assign(job.generated_with.begin(), job.generated_with.end());
  m.sampling = job.sampling;
  m.reference = job.reference;
  return m;
}

logprobs_job from_wire(const control::logprob_request& m) {
  logprobs_job job;
  job.step = m.rl_step;
  job.version = m.weight_version;
  job.sequences = m.batch;
  job.prompt_tokens = m.prompt_tokens;
  job.lp_gen = m.lp_gen;
  job.generated_with.assign(m.generated_with.begin(), m.generated_with.end());
  job.sampling = m.sampling;
  job.reference = m.reference;
  return job;
}

control::logprob_result to_wire(const logprobs_result& r, std::uint64_t step) {
  return {step, r.version, r.excluded_tokens, r.tokens};
}

logprobs_result from_wire(const control::logprob_result& m, const std::string& worker) {
  return {worker, m.weight_version, m.excluded_tokens, m.tokens};
}

control::train_request to_wire(const train_job& job, std::uint64_t step) {
  control::train_request m;
  m.step = step;
  m.rl_step = job.step;
  m.weight_version = job.version;
  m.sampling = job.sampling;
  m.advantages = job.advantages;
  m.loss_multipliers = job.loss_multipliers;
  for (const auto& o : job.optimizer_steps) m.optimizer_steps.push_back({o.sequences, o.counts.tokens, o.counts.sequences});
  m.micro_batch_tokens = job.micro_batch_tokens;
  return m;
}

train_job from_wire(const control::train_request& m, const gpu::ops::pg_loss_settings& loss) {
  train_job job;
  job.step = m.rl_step;
  job.version = m.weight_version;
  job.advantages = m.advantages;
  job.loss_multipliers = m.loss_multipliers;
  for (const auto& o : m.optimizer_steps)
    job.optimizer_steps.push_back({static_cast<std::size_t>(o.sequences), {o.global_tokens, o.global_sequences}});
  job.micro_batch_tokens = m.micro_batch_tokens;
  job.loss = loss;
  job.sampling = m.sampling;
  return job;
}

control::train_result to_wire(const train_report& r, std::uint64_t step) {
  control::train_result m;
  m.step = step;
  m.loss = r.loss;
  metric_fields([&](const char* name, const auto& value) { m.metrics.push_back({name, static_cast<double>(value)}); },
                r.metrics, r.optimizer);
  m.metrics.push_back({"grad_norm_sum", r.grad_norm_sum});
  m.weight_version = r.version;
  m.micro_batches = r.micro_batches;
  m.weights_digest = r.weights_digest;
  m.optimizer_steps = r.optimizer_steps;
  return m;
}

train_report from_wire(const control::train_result& m, const std::string& worker) {
  train_report r;
  r.worker = worker;
  r.version = m.weight_version;
  r.micro_batches = static_cast<std::size_t>(m.micro_batches);
  r.weights_digest = m.weights_digest;
  r.optimizer_steps = static_cast<std::size_t>(m.optimizer_steps);
  r.loss = m.loss;
  std::map<std::string, double> named;
  for (const auto& x : m.metrics) named[x.name] = x.value;
  if (auto it = named.find("grad_norm_sum"); it != named.end()) r.grad_norm_sum = it->second;
  metric_fields(
      [&](const char* name, auto& field) {
        if (auto it = named.find(name); it != named.end()) field = static_cast<std::remove_reference_t<decltype(field)>>(it->second);
      },
      r.metrics, r.optimizer);
  return r;
}

// ---- refit --------------------------------------------------------------------------------------

std::vector<control::manifest_entry> to_wire(const gpu::weight_manifest& manifest) {
  std::vector<control::manifest_entry> out;
  for (const auto& e : manifest) out.push_back({e.name, e.shape, static_cast<std::uint8_t>(e.type)});
  return out;
}

gpu::weight_manifest from_wire(const std::vector<control::manifest_entry>& entries, std::string& problem) {
  gpu::weight_manifest out;
  for (const auto& e : entries) {
    if (e.dtype > static_cast<std::uint8_t>(gpu::dtype::int32)) {
      problem = "manifest entry " + e.name + " has dtype code " + std::to_string(e.dtype) + ", unknown to this build";
      return {};
    }
    out.push_back({e.name, e.shape, static_cast<gpu::dtype>(e.dtype)});
  }
  return out;
}

// ---- errors -------------------------------------------------------------------------------------

control::error to_wire(const caf::error& e, std::int32_t rank, control::message_kind request) {
  std::uint16_t code = static_cast<std::uint16_t>(tandem_errc::engine_failure);
  if (e.category() == caf::atom("tandem")) code = e.code();
  return {code, error_text(e), rank, static_cast<std::uint16_t>(request)};
}

caf::error from_wire(const control::error& m) {
  const bool known = m.code >= static_cast<std::uint16_t>(tandem_errc::wrong_state) &&
                     m.code <= static_cast<std::uint16_t>(tandem_errc::timeout);
  return tandem_error(known ? static_cast<tandem_errc>(m.code) : tandem_errc::engine_failure, m.text);
}

}  // namespace tandem::wire
