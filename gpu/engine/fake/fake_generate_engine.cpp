// The fake generator: a continuous-batching scheduler over hash-determined tokens, and versioned
// refits into a staging copy.
#include "gpu/engine/fake/fake_generate_engine.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <string>
#include <utility>

#include "gpu/core/chunked_hash.h"

namespace tandem::gpu {
namespace {

status fail(status_code code, const std::string& what) { return {code, "fake_generate_engine: " + what}; }

status injected(fake_generate_operation op) {
  return fail(status_code::device_error, std::string("injected failure in ") + to_string(op));
}

fake_generate_options normalized(fake_generate_options o) {
  o.model = normalized(o.model);
  if (o.max_num_sequences < 1) o.max_num_sequences = 1;
  if (o.bucket_bytes <= 0) o.bucket_bytes = 1 << 20;
  return o;
}

std::uint64_t prompt_hash(const std::vector<std::int32_t>& prompt) {
  return chunked_xxh3(std::as_bytes(std::span<const std::int32_t>(prompt)));
}

/// Token at `position` of a request: the weights, the prompt and the counter RNG, mixed.
std::int32_t token_at(std::uint64_t weight_hash, std::uint64_t prompt, const rng_coordinates& rng,
                      std::uint32_t position, std::int32_t vocab) {
  rng_coordinates at = rng;
  at.position = position;
  const philox_counter w = random_words(at);
  const std::uint64_t lo = (std::uint64_t{w[0]} << 32) | w[1], hi = (std::uint64_t{w[2]} << 32) | w[3];
  const std::uint64_t x = fake_mix64(weight_hash ^ fake_mix64(prompt ^ fake_mix64(lo)) ^ hi);
  return static_cast<std::int32_t>(x % static_cast<std::uint64_t>(vocab));
}

std::string hex64(std::uint64_t v) {
  char text[17];
  std::snprintf(text, sizeof text, "%016llx", static_cast<unsigned long long>(v));
  return text;
}

bool is_stop(const generation_request& r, std::int32_t token) {
  return std::find(r.stop_tokens.begin(), r.stop_tokens.end(), token) != r.stop_tokens.end();
}

}  // namespace

const char* to_string(fake_generate_operation op) {
  switch (op) {
    case fake_generate_operation::submit: return "submit";
    case fake_generate_operation::step: return "step";
    case fake_generate_operation::begin_weight_update: return "begin_weight_update";
    case fake_generate_operation::import_bucket: return "import_bucket";
    case fake_generate_operation::commit_weight_update: return "commit_weight_update";
  }
  return "?";
}

fake_generate_engine::fake_generate_engine(const fake_generate_options& options)
    : options_(normalized(options)),
      manifest_(fake_manifest(options_.model)),
      plan_(manifest_, options_.bucket_bytes) {
  std::int64_t offset = 0;
  for (const auto& e : manifest_) {
    entry_begin_.push_back(offset);
    offset += e.bytes();
  }
  own_.resize(static_cast<std::size_t>(options_.model.weight_bytes / 4));
  fill_fake_weights(options_.model, own_);
}

std::uint64_t fake_generate_engine::weight_hash() const {
  if (!shared_.empty()) return shared_.digest();
  if (!hash_) hash_ = chunked_xxh3(std::as_bytes(std::span<const float>(own_)));
  return *hash_;
}

std::vector<std::int32_t> fake_generate_engine::expected_tokens(std::uint64_t weight_hash,
                                                                const generation_request& request,
                                                                std::int32_t vocab) {
  std::vector<std::int32_t> out;
  const std::uint64_t prompt = prompt_hash(request.prompt);
  for (std::int32_t i = 0; i < request.max_new_tokens; ++i) {
    const auto position = static_cast<std::uint32_t>(request.prompt.size()) + static_cast<std::uint32_t>(i);
    out.push_back(token_at(weight_hash, prompt, request.rng, position, vocab));
    if (is_stop(request, out.back())) break;
  }
  return out;
}

status fake_generate_engine::submit(std::span<const generation_request> requests) {
  if (failures_.take(fake_generate_operation::submit)) return injected(fake_generate_operation::submit);
  if (overwritten_ && shared_.empty())
    return fail(status_code::invalid_argument, "submit: refused: no weights are live (the update to version " +
                                                   std::to_string(*overwritten_) + ", received in place, " +
                                                   (pending_ ? "is open" : "did not complete") + "; a complete refit restores them)");
  if (pending_)
    return fail(status_code::invalid_argument,
                "submit: refused while the update to weight version " + std::to_string(*pending_) + " is staged");
  std::unordered_set<std::uint64_t> batch;
  for (const auto& r : requests) {
    const std::string which = "submit: request " + std::to_string(r.id) + ": ";
    if (ids_.count(r.id) || !batch.insert(r.id).second)
      return fail(status_code::invalid_argument, which + "duplicate id");
    if (r.prompt.empty()) return fail(status_code::invalid_argument, which + "empty prompt");
    if (r.max_new_tokens <= 0)
      return fail(status_code::invalid_argument, which + "max_new_tokens must be > 0, got " + std::to_string(r.max_new_tokens));
    if (static_cast<std::int64_t>(r.prompt.size()) + r.max_new_tokens > options_.model.max_sequence_length)
      return fail(status_code::invalid_argument, which + "prompt (" + std::to_string(r.prompt.size()) +
                                                     ") plus max_new_tokens (" + std::to_string(r.max_new_tokens) +
                                                     ") exceeds max_sequence_length " +
                                                     std::to_string(options_.model.max_sequence_length));
    for (const std::int32_t t : r.prompt)
      if (t < 0 || t >= options_.model.vocab)
        return fail(status_code::invalid_argument, which + "prompt token " + std::to_string(t) + " outside [0, " +
                                                       std::to_string(options_.model.vocab) + ")");
    if (auto s = ops::check_sampling_params("fake_generate_engine::submit", r.sampling, true); !s) return s;
  }
  for (const auto& r : requests) {
    ids_.insert(r.id);
    waiting_.push_back({r, prompt_hash(r.prompt), {}, {}});
  }
  return status::ok();
}

result<std::int64_t> fake_generate_engine::step() {
  if (failures_.take(fake_generate_operation::step)) {
    for (const auto& s : running_) ids_.erase(s.request.id);
    running_.clear();
    return injected(fake_generate_operation::step);
  }
  if (!cache_resident_ && !waiting_.empty())
    return fail(status_code::invalid_argument, "step: the KV cache is released (restore_cache() first); " +
                                                   std::to_string(waiting_.size()) + " sequences stay queued");
  while (static_cast<std::int32_t>(running_.size()) < options_.max_num_sequences && !waiting_.empty()) {
    running_.push_back(std::move(waiting_.front()));
    waiting_.pop_front();
  }
  peak_running_ = std::max(peak_running_, running_count());
  if (!running_.empty()) {
    const std::uint64_t hash = weight_hash();
    const std::int32_t vocab = options_.model.vocab;
    std::vector<sequence> still_running;
    for (auto& s : running_) {
      const auto position = static_cast<std::uint32_t>(s.request.prompt.size() + s.tokens.size());
      const std::int32_t token = token_at(hash, s.prompt_hash, s.request.rng, position, vocab);
      s.tokens.push_back(token);
      s.logprobs.push_back(fake_token_logprob(hash, token, position, vocab));
      const bool stopped = is_stop(s.request, token);
      if (stopped || static_cast<std::int32_t>(s.tokens.size()) >= s.request.max_new_tokens) {
        finished_.push_back({s.request.id, std::move(s.tokens), std::move(s.logprobs),
                             stopped ? finish_reason::stop_token : finish_reason::length, version_});
      } else {
        still_running.push_back(std::move(s));
      }
    }
    running_ = std::move(still_running);
  }
  return waiting_count() + running_count();
}

std::vector<finished_sequence> fake_generate_engine::collect() {
  for (const auto& f : finished_) ids_.erase(f.id);
  return std::exchange(finished_, {});
}

status fake_generate_engine::begin_weight_update(std::uint64_t version) {
  if (failures_.take(fake_generate_operation::begin_weight_update))
    return injected(fake_generate_operation::begin_weight_update);
  const std::string which = "begin_weight_update(" + std::to_string(version) + "): ";
  if (pending_)
    return fail(status_code::invalid_argument, which + "the update to version " + std::to_string(*pending_) +
                                                   " is still staged (commit or abort it first)");
  if (!waiting_.empty() || !running_.empty())
    return fail(status_code::invalid_argument, which + "refused while " + std::to_string(waiting_.size()) +
                                                   " sequences wait and " + std::to_string(running_.size()) + " run");
  if (version <= version_)
    return fail(status_code::invalid_argument,
                which + "not newer than the live version " + std::to_string(version_));
  if (!shared_.empty())
    return fail(status_code::invalid_argument, which + "the weights are shared in place: a refit is bump_weight_version");
  if (options_.receive == refit_receive::in_place) overwritten_ = version;
  pending_ = version;
  received_.assign(plan_.bucket_count(), false);
  received_count_ = 0;
  return status::ok();
}

status fake_generate_engine::import_bucket(std::size_t index, std::span<const std::byte> bytes) {
  return import_checked(index, bytes, std::nullopt);
}

status fake_generate_engine::import_bucket(std::size_t index, std::span<const std::byte> bytes, std::uint64_t checksum) {
  return import_checked(index, bytes, checksum);
}

status fake_generate_engine::abort_with(status why) {
  abort_weight_update();
  return why;
}

status fake_generate_engine::import_checked(std::size_t index, std::span<const std::byte> bytes,
                                            std::optional<std::uint64_t> checksum) {
  if (!pending_) return fail(status_code::invalid_argument, "import_bucket: no weight update in progress");
  const std::string which =
      "import_bucket: bucket " + std::to_string(index) + " of version " + std::to_string(*pending_) + ": ";
  if (failures_.take(fake_generate_operation::import_bucket)) return abort_with(injected(fake_generate_operation::import_bucket));
  if (index >= plan_.bucket_count())
    return abort_with(fail(status_code::invalid_argument,
                           which + "the plan has " + std::to_string(plan_.bucket_count()) + " buckets"));
  if (static_cast<std::int64_t>(bytes.size()) != plan_.bucket_size(index))
    return abort_with(fail(status_code::invalid_argument, which + std::to_string(bytes.size()) + " bytes, expected " +
                                                              std::to_string(plan_.bucket_size(index))));
  if (received_[index]) return abort_with(fail(status_code::invalid_argument, which + "arrived twice"));
  if (options_.verify_checksums && !checksum)
    return abort_with(fail(status_code::invalid_argument,
                           which + "verify_checksums is on and no checksum came with it (use import_bucket(index, "
                                   "bytes, checksum), or turn verify_checksums off when the caller checks)"));
  if (checksum) {
    const std::uint64_t actual = chunked_xxh3(bytes);
    if (actual != *checksum)
      return abort_with(fail(status_code::io_error, which + "corrupted: checksum " + hex64(actual) +
                                                        ", the sender's " + hex64(*checksum) + after_dropped_update(options_.receive, version_)));
  }
  std::vector<float>& target = options_.receive == refit_receive::staging ? staging_ : own_;
  if (target.empty()) target.resize(static_cast<std::size_t>(options_.model.weight_bytes / 4));
  if (options_.receive == refit_receive::in_place) hash_.reset();
  auto* out = reinterpret_cast<std::byte*>(target.data());
  for (const auto& piece : plan_.pieces(index))
    std::memcpy(out + entry_begin_[piece.entry] + piece.entry_offset, bytes.data() + piece.bucket_offset,
                static_cast<std::size_t>(piece.bytes));
  received_[index] = true;
  ++received_count_;
  return status::ok();
}

status fake_generate_engine::commit_weight_update() {
  if (!pending_) return fail(status_code::invalid_argument, "commit_weight_update: no weight update in progress");
  const std::string which = "commit_weight_update(" + std::to_string(*pending_) + "): ";
  if (failures_.take(fake_generate_operation::commit_weight_update))
    return abort_with(injected(fake_generate_operation::commit_weight_update));
  if (received_count_ != received_.size()) {
    const auto missing = static_cast<std::size_t>(std::find(received_.begin(), received_.end(), false) - received_.begin());
    return abort_with(fail(status_code::invalid_argument,
                           which + std::to_string(received_.size() - received_count_) + " of " +
                               std::to_string(received_.size()) + " buckets missing (first: bucket " +
                               std::to_string(missing) + ")" + after_dropped_update(options_.receive, version_)));
  }
  if (options_.receive == refit_receive::staging) own_.swap(staging_);  // the old weights: the next update's staging copy
  overwritten_.reset();
  hash_.reset();
  version_ = *pending_;
  pending_.reset();
  received_.clear();
  received_count_ = 0;
  return status::ok();
}

void fake_generate_engine::abort_weight_update() {
  pending_.reset();
  received_.clear();
  received_count_ = 0;  // in place, overwritten_ stays: own_ is part old, part new
}


status fake_generate_engine::check_no_work(const std::string& which) const {
  if (pending_) return fail(status_code::invalid_argument, which + ": refused while the update to version " +
                                                               std::to_string(*pending_) + " is staged");
  if (!waiting_.empty() || !running_.empty())
    return fail(status_code::invalid_argument, which + ": refused while " + std::to_string(waiting_.size()) +
                                                   " sequences wait and " + std::to_string(running_.size()) + " run");
  return status::ok();
}

status fake_generate_engine::share_weights(const weight_source& source) {
  if (auto s = check_no_work("share_weights"); !s) return s;
  if (auto s = check_weight_source("fake_generate_engine: share_weights", source, manifest_); !s) return s;
  if (!source.dev.is_cpu())
    return fail(status_code::invalid_argument, "share_weights: the fake reads host memory, the weights are on " +
                                                   source.dev.to_string());
  shared_ = source;
  own_ = {};
  staging_ = {};
  overwritten_.reset();
  hash_.reset();
  return status::ok();
}

status fake_generate_engine::bump_weight_version(std::uint64_t version) {
  const std::string which = "bump_weight_version(" + std::to_string(version) + ")";
  if (shared_.empty())
    return fail(status_code::invalid_argument, which + ": the weights are the engine's own copy: a refit is "
                                                       "begin_weight_update, import_bucket, commit_weight_update");
  if (auto s = check_no_work(which); !s) return s;
  if (version <= version_)
    return fail(status_code::invalid_argument, which + ": not newer than the live version " + std::to_string(version_));
  version_ = version;
  return status::ok();
}

status fake_generate_engine::release_cache() {
  if (!cache_resident_) return status::ok();
  if (!waiting_.empty() || !running_.empty())
    return fail(status_code::invalid_argument, "release_cache: refused while " + std::to_string(waiting_.size()) +
                                                   " sequences wait and " + std::to_string(running_.size()) + " run");
  cache_resident_ = false;
  return status::ok();
}

status fake_generate_engine::restore_cache() {
  cache_resident_ = true;
  return status::ok();
}

status fake_generate_engine::set_bucket_bytes(std::int64_t bucket_bytes) {
  if (pending_) return fail(status_code::invalid_argument, "set_bucket_bytes: refused while an update is staged");
  if (bucket_bytes <= 0)
    return fail(status_code::invalid_argument, "set_bucket_bytes: must be > 0, got " + std::to_string(bucket_bytes));
  options_.bucket_bytes = bucket_bytes;
  plan_ = bucket_plan(manifest_, bucket_bytes);
  return status::ok();
}

}  // namespace tandem::gpu
