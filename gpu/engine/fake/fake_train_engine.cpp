// The fake trainer: deterministic logprobs, loss, "gradients" and steps over a float vector.
#include "gpu/engine/fake/fake_train_engine.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <limits>
#include <sstream>
#include <string>
#include <system_error>

#include "gpu/core/chunked_hash.h"

namespace tandem::gpu {
namespace {

constexpr const char* weights_file = "weights.bin";
constexpr const char* info_file = "weights.txt";
constexpr const char* hash_key = "chunked_xxh3";  // weights.txt's line naming the weights' hash

status fail(status_code code, const std::string& what) { return {code, "fake_train_engine: " + what}; }

status injected(fake_train_operation op) {
  return fail(status_code::device_error, std::string("injected failure in ") + to_string(op));
}

/// A uniform value in [-1, 1) from the top 24 bits of x.
float signed_unit(std::uint64_t x) { return static_cast<float>(x >> 40) * 0x1.0p-23f - 1.0f; }

template <class T>
void hash_values(chunked_xxh3_stream& h, const std::vector<T>& v) {
  h.update(std::as_bytes(std::span<const T>(v)));
}

/// A stream that starts with the 8 bytes of `x` (host order).
chunked_xxh3_stream stream_from(std::uint64_t x) {
  chunked_xxh3_stream h;
  h.update(std::as_bytes(std::span<const std::uint64_t, 1>(&x, 1)));
  return h;
}

std::string hex64(std::uint64_t v) {
  char text[17];
  std::snprintf(text, sizeof text, "%016llx", static_cast<unsigned long long>(v));
  return text;
}

/// Parses "key value" lines of weights.txt; false when `key` is missing or malformed.
bool read_field(const std::string& text, const std::string& key, int base, std::uint64_t& out) {
  std::istringstream lines(text);
  std::string line;
  while (std::getline(lines, line)) {
    if (line.rfind(key + " ", 0) != 0) continue;
    const char* first = line.data() + key.size() + 1;
    const char* last = line.data() + line.size();
    const auto [end, ec] = std::from_chars(first, last, out, base);
    return ec == std::errc() && end == last && first != last;
  }
  return false;
}

std::filesystem::path unique_sibling(const std::filesystem::path& p, const char* tag) {
  static std::atomic<std::uint64_t> counter{0};
  return p.parent_path() /
         (p.filename().string() + tag + std::to_string(::getpid()) + "-" + std::to_string(counter++));
}

status write_file(const std::filesystem::path& path, const char* data, std::size_t bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(data, static_cast<std::streamsize>(bytes));
  out.close();
  if (!out) return fail(status_code::io_error, "save: cannot write " + path.string());
  return status::ok();
}

}  // namespace

const char* to_string(fake_train_operation op) {
  switch (op) {
    case fake_train_operation::logprobs: return "logprobs";
    case fake_train_operation::train_micro_batch: return "train_micro_batch";
    case fake_train_operation::optimizer_step: return "optimizer_step";
    case fake_train_operation::export_bucket: return "export_bucket";
    case fake_train_operation::save: return "save";
    case fake_train_operation::load: return "load";
  }
  return "?";
}

fake_train_engine::fake_train_engine(const fake_model_options& model, const train_engine_options& train,
                                     communicator* data_parallel_group)
    : options_(normalized(model)), train_(train), group_(data_parallel_group), manifest_(fake_manifest(options_)) {
  std::int64_t offset = 0;
  for (const auto& e : manifest_) {
    entry_begin_.push_back(offset);
    offset += e.bytes();
  }
  weights_.resize(static_cast<std::size_t>(options_.weight_bytes / 4));
  fill_fake_weights(options_, weights_);
}

std::uint64_t fake_train_engine::weight_hash() const {
  if (!hash_) hash_ = chunked_xxh3(weight_bytes());
  return *hash_;
}

status fake_train_engine::check_batch(const char* op, const packed_sequences& batch) const {
  const auto& o = batch.offsets;
  if (o.empty() || o.front() != 0 || static_cast<std::size_t>(o.back()) != batch.tokens.size())
    return fail(status_code::invalid_argument,
                std::string(op) + ": offsets must start at 0 and end at the token count " +
                    std::to_string(batch.tokens.size()));
  for (std::size_t s = 0; s + 1 < o.size(); ++s) {
    const std::int64_t length = std::int64_t{o[s + 1]} - o[s];
    if (length < 0)
      return fail(status_code::invalid_argument, std::string(op) + ": offsets decrease at sequence " + std::to_string(s));
    if (length > options_.max_sequence_length)
      return fail(status_code::invalid_argument,
                  std::string(op) + ": sequence " + std::to_string(s) + " has " + std::to_string(length) +
                      " tokens, more than max_sequence_length " + std::to_string(options_.max_sequence_length));
  }
  for (std::size_t t = 0; t < batch.tokens.size(); ++t)
    if (batch.tokens[t] < 0 || batch.tokens[t] >= options_.vocab)
      return fail(status_code::invalid_argument, std::string(op) + ": token " + std::to_string(t) + " is " +
                                                     std::to_string(batch.tokens[t]) + ", outside [0, " +
                                                     std::to_string(options_.vocab) + ")");
  return status::ok();
}

result<std::vector<float>> fake_train_engine::logprobs(const packed_sequences& batch, const ops::sampling_params& params) {
  if (failures_.take(fake_train_operation::logprobs)) return injected(fake_train_operation::logprobs);
  if (auto s = ops::check_sampling_params("fake_train_engine::logprobs", params, false); !s) return s;
  if (auto s = check_batch("logprobs", batch); !s) return s;
  const std::uint64_t hash = weight_hash();
  std::vector<float> out(batch.tokens.size(), 0.0f);
  for (std::size_t s = 0; s + 1 < batch.offsets.size(); ++s)
    for (std::int32_t t = batch.offsets[s] + 1; t < batch.offsets[s + 1]; ++t)
      out[static_cast<std::size_t>(t)] = fake_token_logprob(hash, batch.tokens[static_cast<std::size_t>(t)],
                                                            t - batch.offsets[s], options_.vocab);
  return out;
}

result<ops::pg_loss_metrics> fake_train_engine::train_micro_batch(const train_micro_batch_data& mb,
                                                                  const ops::pg_loss_settings& loss,
                                                                  const global_counts& counts,
                                                                  const ops::sampling_params& params) {
  if (auto s = check_trainable("train_micro_batch"); !s) return s;
  if (failures_.take(fake_train_operation::train_micro_batch)) return injected(fake_train_operation::train_micro_batch);
  const std::size_t n = mb.sequences.tokens.size();
  if (auto s = check_micro_batch_sizes("fake_train_engine", mb, loss); !s) return s;
  auto lp_cur = logprobs(mb.sequences, params);
  if (!lp_cur) return lp_cur.error();

  // The real loss op over the fake logprobs: plausible loss, counts and clip metrics.
  const ops::pg_loss_inputs in = pg_loss_inputs_of(mb, *lp_cur, counts);
  float loss_value = 0;
  ops::pg_loss_metrics metrics;
  if (auto s = ops::pg_loss_forward(exec_context::cpu(), in, loss, tensor(&loss_value, dtype::float32, {1}), &metrics); !s)
    return fail(s.code(), "train_micro_batch: " + s.message());

  // The "gradient": a pseudo-random direction named by the weights and the micro-batch.
  std::vector<float> masked_advantages(n);
  double advantage_mass = 0;
  for (std::size_t t = 0; t < n; ++t) {
    masked_advantages[t] = mb.mask[t] != 0 ? mb.advantages[t] : 0.0f;
    advantage_mass += std::fabs(static_cast<double>(masked_advantages[t]));
  }
  chunked_xxh3_stream h = stream_from(fake_mix64(weight_hash()));
  hash_values(h, mb.sequences.tokens);
  hash_values(h, mb.sequences.offsets);
  hash_values(h, mb.mask);
  hash_values(h, masked_advantages);
  const std::uint64_t seed = h.digest();
  const auto scale = static_cast<float>(1.0 + advantage_mass / static_cast<double>(std::max<std::int64_t>(1, counts.tokens)));
  ensure_gradients();
  for (std::size_t i = 0; i < gradients_.size(); ++i) gradients_[i] += scale * signed_unit(fake_mix64(seed + i));
  ++micro_batches_;
  return metrics;
}

result<double> fake_train_engine::train_cross_entropy(const packed_sequences& batch, std::span<const float> mask,
                                                      std::int64_t global_tokens) {
  if (auto s = check_trainable("train_cross_entropy"); !s) return s;
  if (global_tokens <= 0) return fail(status_code::invalid_argument, "train_cross_entropy: global_tokens must be > 0");
  if (!mask.empty() && mask.size() != batch.tokens.size())
    return fail(status_code::invalid_argument, "train_cross_entropy: the mask holds " + std::to_string(mask.size()) +
                                                   " values for " + std::to_string(batch.tokens.size()) + " tokens");
  auto lp = logprobs(batch, {});
  if (!lp) return lp.error();
  double loss = 0;
  for (std::size_t t = 0; t < lp->size(); ++t)  // token 0 of each sequence contributes 0
    loss -= (mask.empty() ? 1.0 : static_cast<double>(mask[t])) * static_cast<double>((*lp)[t]);
  loss /= static_cast<double>(global_tokens);
  chunked_xxh3_stream h = stream_from(fake_mix64(weight_hash() ^ 0x5f7a11ce5eedull));
  hash_values(h, batch.tokens);
  hash_values(h, batch.offsets);
  if (!mask.empty()) hash_values(h, std::vector<float>(mask.begin(), mask.end()));
  const std::uint64_t seed = h.digest();
  ensure_gradients();
  const auto scale = static_cast<float>(1.0 + loss);
  for (std::size_t i = 0; i < gradients_.size(); ++i) gradients_[i] += scale * signed_unit(fake_mix64(seed + i));
  ++micro_batches_;
  return loss;
}

status fake_train_engine::set_learning_rate(double lr) {
  if (auto s = check_learning_rate("fake_train_engine", lr); !s) return s;
  train_.adamw.lr = lr;
  return status::ok();
}

void fake_train_engine::ensure_gradients() {
  if (gradients_.empty()) gradients_.assign(weights_.size(), 0.0f);
}

status fake_train_engine::check_trainable(const char* op) const {
  if (state_ != train_memory_state::resident)
    return fail(status_code::invalid_argument, std::string(op) + ": the training state is offloaded (restore_state() first)");
  if (auto s = check_train_engine_options("fake_train_engine", train_); !s) return s;
  return status::ok();
}

result<optimizer_result> fake_train_engine::optimizer_step() {
  if (auto s = check_trainable("optimizer_step"); !s) {
    zero_gradients();
    return s;
  }
  if (failures_.take(fake_train_operation::optimizer_step)) {  // as a real failure would: the peers are told
    abandon_step();
    return injected(fake_train_operation::optimizer_step);
  }
  ensure_gradients();
  const int dp = group_ ? group_->size() : 1;
  if (group_) {
    if (auto s = group_->all_reduce(std::span<float>(gradients_)); !s) {
      zero_gradients();
      return fail(s.code(), "optimizer_step: gradient all-reduce over " + std::to_string(dp) + " ranks: " + s.message());
    }
  }
  double norm2 = 0;
  for (const float g : gradients_) norm2 += (static_cast<double>(g) / dp) * (static_cast<double>(g) / dp);
  const double norm = std::sqrt(norm2);
  if (!std::isfinite(norm)) {
    zero_gradients();
    return fail(status_code::invalid_argument,
                "optimizer_step: the gradient is not finite" +
                    std::string(dp > 1 ? " (after the all-reduce over " + std::to_string(dp) +
                                             " ranks: a rank whose micro-batch failed abandons the step this way)"
                                       : "") +
                    "; the step is refused, the weights are unchanged");
  }
  const double clip = train_.max_grad_norm > 0 && norm > train_.max_grad_norm ? train_.max_grad_norm / (norm + 1e-6) : 1.0;
  const double lr = scheduled_lr(train_, step_);
  const auto factor = static_cast<float>(lr * clip / dp);
  for (std::size_t i = 0; i < weights_.size(); ++i) weights_[i] -= factor * gradients_[i];
  zero_gradients();
  hash_.reset();
  ++step_;
  return optimizer_result{norm, lr, step_};
}

void fake_train_engine::abandon_step() {
  zero_gradients();
  if (!group_ || state_ != train_memory_state::resident) return;
  ensure_gradients();
  if (gradients_.empty()) return;
  gradients_[0] = std::numeric_limits<float>::quiet_NaN();
  (void)group_->all_reduce(std::span<float>(gradients_));  // the peers' optimizer steps see it and refuse
  zero_gradients();
}

void fake_train_engine::zero_gradients() {
  std::fill(gradients_.begin(), gradients_.end(), 0.0f);
  micro_batches_ = 0;
}

status fake_train_engine::export_bucket(const bucket_plan& plan, std::size_t index, std::span<std::byte> out) const {
  if (failures_.take(fake_train_operation::export_bucket)) return injected(fake_train_operation::export_bucket);
  if (plan.total_bytes() != options_.weight_bytes)
    return fail(status_code::invalid_argument, "export_bucket: the plan covers " + std::to_string(plan.total_bytes()) +
                                                   " bytes, the weights are " + std::to_string(options_.weight_bytes));
  if (index >= plan.bucket_count())
    return fail(status_code::invalid_argument, "export_bucket: bucket " + std::to_string(index) + " of " +
                                                   std::to_string(plan.bucket_count()));
  if (static_cast<std::int64_t>(out.size()) != plan.bucket_size(index))
    return fail(status_code::invalid_argument, "export_bucket: bucket " + std::to_string(index) + " holds " +
                                                   std::to_string(plan.bucket_size(index)) + " bytes, out has " +
                                                   std::to_string(out.size()));
  const auto bytes = weight_bytes();
  for (const auto& piece : plan.pieces(index)) {
    if (piece.entry >= manifest_.size() || piece.entry_offset + piece.bytes > manifest_[piece.entry].bytes())
      return fail(status_code::invalid_argument, "export_bucket: bucket " + std::to_string(index) +
                                                     " does not match the manifest (a plan of another model?)");
    std::memcpy(out.data() + piece.bucket_offset,
                bytes.data() + entry_begin_[piece.entry] + piece.entry_offset, static_cast<std::size_t>(piece.bytes));
  }
  return status::ok();
}

status fake_train_engine::save(const std::filesystem::path& directory) const {
  if (auto s = check_trainable("save"); !s) return s;
  if (failures_.take(fake_train_operation::save)) return injected(fake_train_operation::save);
  const std::filesystem::path target = directory.has_filename() ? directory : directory.parent_path();
  const std::filesystem::path temporary = unique_sibling(target, ".tmp-");
  std::error_code ec;
  std::filesystem::create_directories(temporary, ec);
  if (ec) return fail(status_code::io_error, "save: cannot create " + temporary.string() + ": " + ec.message());
  const auto bytes = weight_bytes();
  const std::string info = std::string(hash_key) + " " + hex64(weight_hash()) + "\nstep " + std::to_string(step_) +
                           "\nbytes " + std::to_string(bytes.size()) + "\n";
  status s = write_file(temporary / weights_file, reinterpret_cast<const char*>(bytes.data()), bytes.size());
  if (s) s = write_file(temporary / info_file, info.data(), info.size());
  if (s) {
    // Replace an older save: move it aside, move the new one in, drop the old one.
    std::filesystem::path aside;
    if (std::filesystem::exists(target, ec)) {
      aside = unique_sibling(target, ".old-");
      std::filesystem::rename(target, aside, ec);
      if (ec) s = fail(status_code::io_error, "save: cannot move the older " + target.string() + " aside: " + ec.message());
    }
    if (s) {
      std::filesystem::rename(temporary, target, ec);
      if (ec) {
        s = fail(status_code::io_error, "save: cannot rename " + temporary.string() + " to " + target.string() + ": " +
                                            ec.message());
        std::error_code ignored;
        if (!aside.empty()) std::filesystem::rename(aside, target, ignored);
      } else if (!aside.empty()) {
        std::filesystem::remove_all(aside, ec);
      }
    }
  }
  if (!s) {
    std::error_code ignored;
    std::filesystem::remove_all(temporary, ignored);
  }
  return s;
}

status fake_train_engine::load(const std::filesystem::path& directory) {
  if (auto s = check_trainable("load"); !s) return s;
  if (failures_.take(fake_train_operation::load)) return injected(fake_train_operation::load);
  std::ifstream info_in(directory / info_file);
  if (!info_in) return fail(status_code::not_found, "load: cannot read " + (directory / info_file).string());
  std::stringstream info;
  info << info_in.rdbuf();
  std::uint64_t hash = 0, step = 0, bytes = 0;
  if (!read_field(info.str(), hash_key, 16, hash) || !read_field(info.str(), "step", 10, step) ||
      !read_field(info.str(), "bytes", 10, bytes))
    return fail(status_code::io_error, "load: " + (directory / info_file).string() + " lacks a valid \"" + hash_key +
                                           " <hex>\", \"step <n>\" or \"bytes <n>\" line");
  if (bytes != static_cast<std::uint64_t>(options_.weight_bytes))
    return fail(status_code::invalid_argument, "load: " + directory.string() + " holds " + std::to_string(bytes) +
                                                   " bytes of weights, this model " +
                                                   std::to_string(options_.weight_bytes));
  const auto path = directory / weights_file;
  std::error_code ec;
  const auto file_bytes = std::filesystem::file_size(path, ec);
  if (ec || file_bytes != bytes)
    return fail(status_code::io_error, "load: " + path.string() + " is not " + std::to_string(bytes) + " bytes long");
  std::vector<float> loaded(weights_.size());
  std::ifstream in(path, std::ios::binary);
  in.read(reinterpret_cast<char*>(loaded.data()), static_cast<std::streamsize>(bytes));
  if (!in) return fail(status_code::io_error, "load: cannot read " + path.string());
  const std::uint64_t actual = chunked_xxh3(std::as_bytes(std::span<const float>(loaded)));
  if (actual != hash)
    return fail(status_code::io_error, "load: " + path.string() + " hashes to " + hex64(actual) + ", " + info_file +
                                           " says " + hex64(hash));
  std::copy(loaded.begin(), loaded.end(), weights_.begin());  // in place: shared_weights() stays valid
  hash_ = actual;
  step_ = static_cast<std::int64_t>(step);
  zero_gradients();
  return status::ok();
}

status fake_train_engine::offload_state() {
  if (state_ == train_memory_state::offloaded) return status::ok();
  if (micro_batches_ > 0)
    return fail(status_code::invalid_argument, "offload_state: gradients of " + std::to_string(micro_batches_) +
                                                   " micro-batches are pending (optimizer_step() or zero_gradients() first)");
  gradients_ = {};
  state_ = train_memory_state::offloaded;
  return status::ok();
}

status fake_train_engine::restore_state() {
  state_ = train_memory_state::resident;  // the gradient buffer comes back zeroed at the next micro-batch
  return status::ok();
}

weight_source fake_train_engine::shared_weights() const {
  weight_source out;
  out.dev = device::cpu();
  out.manifest = manifest_;
  const auto bytes = weight_bytes();
  for (const std::int64_t begin : entry_begin_) out.tensors.push_back(bytes.data() + begin);
  return out;
}

}  // namespace tandem::gpu
