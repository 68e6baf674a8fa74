// The tokenizer pipeline (tokenizer.h).
#include "orchestration/tokenizer/tokenizer.h"

#include <algorithm>
#include <fstream>
#include <sstream>
#include <utility>

#include <nlohmann/json.hpp>

#include "orchestration/tokenizer/text_steps.h"
#include "orchestration/tokenizer/tokenizer_json.h"
#include "orchestration/tokenizer/utf8.h"

namespace tandem::tokenizer {

tokenizer::tokenizer(tokenizer_spec spec, bpe_model model)
    : spec_(std::move(spec)),
      model_(std::move(model)),
      raw_added_(spec_.added_tokens, false),
      normalized_added_(spec_.added_tokens, true) {
  std::int32_t size = 0;
  for (const auto& [token, id] : model_.vocab()) size = std::max(size, id + 1);
  for (const auto& t : spec_.added_tokens) size = std::max(size, t.id + 1);
  tokens_.resize(static_cast<std::size_t>(size));
  special_.resize(static_cast<std::size_t>(size), false);
  for (const auto& [token, id] : model_.vocab()) tokens_[static_cast<std::size_t>(id)] = token;
  for (const auto& t : spec_.added_tokens) {
    tokens_[static_cast<std::size_t>(t.id)] = t.content;
    special_[static_cast<std::size_t>(t.id)] = t.special;
  }
}

tokenizer::tokenizer(std::shared_ptr<const sentencepiece_model> spm, bool add_bos, bool add_eos)
    : spm_(std::move(spm)), spm_bos_(add_bos), spm_eos_(add_eos) {}

tokenizer_result<tokenizer> tokenizer::load_model(const std::filesystem::path& dir_or_file) {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::path file = dir_or_file;
  if (fs::is_directory(dir_or_file, ec)) {
    if (fs::is_regular_file(dir_or_file / "tokenizer.json", ec)) return load(dir_or_file / "tokenizer.json");
    if (!fs::is_regular_file(dir_or_file / "tokenizer.model", ec))
      return tokenizer_error{tokenizer_errc::bad_file, dir_or_file.string() + " has neither tokenizer.json nor tokenizer.model"};
    file = dir_or_file / "tokenizer.model";
  } else if (!fs::is_regular_file(dir_or_file, ec)) {
    return tokenizer_error{tokenizer_errc::bad_file, dir_or_file.string() + ": no such directory or file"};
  }
  if (file.extension() != ".model") return load(file);
  auto spm = sentencepiece_model::load(file);
  if (!spm) return spm.error();
  bool bos = true, eos = false;
  const fs::path config = file.parent_path() / "tokenizer_config.json";
  if (fs::is_regular_file(config, ec)) {
    std::ifstream in(config, std::ios::binary);
    const auto j = nlohmann::json::parse(in, nullptr, false);
    if (j.is_discarded() || !j.is_object())
      return tokenizer_error{tokenizer_errc::bad_file, config.string() + ": not a JSON object"};
    for (const auto& [key, flag] : {std::pair<const char*, bool*>{"add_bos_token", &bos}, {"add_eos_token", &eos}}) {
      const auto it = j.find(key);
      if (it == j.end() || it->is_null()) continue;
      if (!it->is_boolean())
        return tokenizer_error{tokenizer_errc::bad_file, config.string() + ": \"" + key + "\" must be true or false"};
      *flag = it->get<bool>();
    }
  }
  if (eos && spm.value()->eos_id() < 0)
    return tokenizer_error{tokenizer_errc::bad_file, config.string() + ": add_eos_token is true, but " + file.string() +
                                                         " has no end-of-sequence piece"};
  return tokenizer(std::move(spm.value()), bos, eos);
}

tokenizer_result<tokenizer> tokenizer::load(const std::filesystem::path& file) {
  std::ifstream in(file, std::ios::binary);
  if (!in) return tokenizer_error{tokenizer_errc::bad_file, file.string() + ": cannot be read"};
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) return tokenizer_error{tokenizer_errc::bad_file, file.string() + ": reading it failed"};
  return parse(text.str(), file.string());
}

tokenizer_result<tokenizer> tokenizer::parse(std::string_view json, const std::string& where) {
  auto spec = parse_tokenizer_json(json, where);
  if (!spec) return spec.error();
  auto model = bpe_model::build(spec->model, where);
  if (!model) return model.error();
  return tokenizer(std::move(spec.value()), std::move(model.value()));
}

tokenizer_result<std::vector<std::int32_t>> tokenizer::encode(std::string_view text, bool add_special_tokens) const {
  if (spm_) {
    auto ids = spm_->encode(text, add_special_tokens && spm_bos_);
    if (ids && add_special_tokens && spm_eos_ && spm_->eos_id() >= 0) ids->push_back(spm_->eos_id());
    return ids;
  }
  if (auto bad = utf8_refusal(text)) return tokenizer_error{tokenizer_errc::invalid_input, std::move(*bad)};
  std::vector<std::int32_t> ids;
  for (const text_piece& raw : raw_added_.split(text)) {
    if (raw.token) {
      ids.push_back(*raw.token);
      continue;
    }
    const std::string normalized = normalize(spec_.normalizer, raw.text);
    for (const text_piece& piece : normalized_added_.split(normalized)) {
      if (piece.token) {
        ids.push_back(*piece.token);
        continue;
      }
      for (const std::string& word : pre_tokenize(spec_.pre_tokenizer, piece.text))
        if (auto e = model_.encode(word, ids)) return *e;
    }
  }
  if (!add_special_tokens || spec_.single_template.empty()) return ids;
  std::vector<std::int32_t> out;
  for (const template_piece& p : spec_.single_template) {
    if (p.sequence) out.insert(out.end(), ids.begin(), ids.end());
    else out.insert(out.end(), p.ids.begin(), p.ids.end());
  }
  return out;
}

tokenizer_result<std::string> tokenizer::decode(std::span<const std::int32_t> ids, bool skip_special_tokens) const {
  if (spm_) return spm_->decode(ids, skip_special_tokens);
  std::vector<std::string> tokens;
  tokens.reserve(ids.size());
  for (std::size_t i = 0; i < ids.size(); ++i) {
    const std::int32_t id = ids[i];
    if (id < 0 || id >= vocab_size() || !tokens_[static_cast<std::size_t>(id)])
      return tokenizer_error{tokenizer_errc::unknown_id, "id " + std::to_string(id) + " at position " + std::to_string(i) +
                                                             " is in neither the vocabulary nor the added tokens (" +
                                                             std::to_string(vocab_size()) + " ids)"};
    if (skip_special_tokens && special_[static_cast<std::size_t>(id)]) continue;
    tokens.push_back(*tokens_[static_cast<std::size_t>(id)]);
  }
  if (!spec_.has_decoder) {
    std::string out;
    for (std::size_t i = 0; i < tokens.size(); ++i) out += (i ? " " : "") + tokens[i];
    return out;
  }
  return decode_tokens(spec_.decoder, std::move(tokens));
}

std::int32_t tokenizer::vocab_size() const {
  return spm_ ? spm_->vocab_size() : static_cast<std::int32_t>(tokens_.size());
}

std::optional<std::int32_t> tokenizer::token_to_id(std::string_view token) const {
  if (spm_) return spm_->token_to_id(token);
  for (const auto& t : spec_.added_tokens)
    if (t.content == token) return t.id;
  const auto it = model_.vocab().find(token);
  if (it == model_.vocab().end()) return std::nullopt;
  return it->second;
}

std::optional<std::string> tokenizer::id_to_token(std::int32_t id) const {
  if (spm_) return spm_->id_to_token(id);
  if (id < 0 || id >= vocab_size()) return std::nullopt;
  return tokens_[static_cast<std::size_t>(id)];
}

}  // namespace tandem::tokenizer
