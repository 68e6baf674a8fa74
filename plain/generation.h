// What a generator is asked and what it answers: one definition for the generate engines
// (gpu/engine/generate_engine.h), the rollout workers' messages and the control plane.
#pragma once

#include <cstdint>
#include <vector>

#include "plain/fields.h"
#include "plain/rng.h"
#include "plain/sampling.h"

namespace tandem::plain {

/// One sequence to generate.
struct generation_request {
  static constexpr const char* type_name = "generation_request";
  std::uint64_t id = 0;                  ///< caller's handle, echoed in the result
  std::vector<std::int32_t> prompt;      ///< token ids, non-empty
  sampling_params sampling;              ///< temperature, top-k, top-p
  rng_coordinates rng;                   ///< seed, step, round, prompt, sample; position is filled per token
  std::int32_t max_new_tokens = 0;       ///< > 0
  std::vector<std::int32_t> stop_tokens; ///< generation ends after emitting one of these
  bool operator==(const generation_request&) const = default;

  template <class F>
  static decltype(auto) fields(F&& f, generation_request& x) {
    return f(named("id", x.id), named("prompt", x.prompt), named("sampling", x.sampling), named("rng", x.rng),
             named("max_new_tokens", x.max_new_tokens), named("stop_tokens", x.stop_tokens));
  }
};

/// Why generation of a sequence ended. The values are wire codes.
enum class finish_reason : std::uint8_t { stop_token = 0, length = 1 };

constexpr bool known(finish_reason r) { return r == finish_reason::stop_token || r == finish_reason::length; }

/// One generated sequence.
struct finished_sequence {
  static constexpr const char* type_name = "finished_sequence";
  std::uint64_t id = 0;                  ///< the request's
  std::vector<std::int32_t> tokens;      ///< generated tokens only (the prompt excluded)
  std::vector<float> logprobs;           ///< per generated token, under the sampling distribution
  finish_reason reason = finish_reason::length;
  std::uint64_t weight_version = 0;      ///< the version that generated every token
  bool operator==(const finished_sequence&) const = default;

  template <class F>
  static decltype(auto) fields(F&& f, finished_sequence& x) {
    return f(named("id", x.id), named("tokens", x.tokens), named("logprobs", x.logprobs), named("reason", x.reason),
             named("weight_version", x.weight_version));
  }
};

/// What a rollout worker generates: every request with the weights of exactly `version`.
struct generate_job {
  static constexpr const char* type_name = "generate_job";
  std::uint64_t version = 0;                 ///< refused (stale_version) unless it is the live version
  std::vector<generation_request> requests;  ///< ids unique within the job
  bool operator==(const generate_job&) const = default;

  template <class F>
  static decltype(auto) fields(F&& f, generate_job& x) {
    return f(named("version", x.version), named("requests", x.requests));
  }
};

}  // namespace tandem::plain
