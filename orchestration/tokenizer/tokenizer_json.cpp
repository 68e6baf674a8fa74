// tokenizer.json -> tokenizer_spec (tokenizer_json.h).
#include "orchestration/tokenizer/tokenizer_json.h"

#include <nlohmann/json.hpp>

namespace tandem::tokenizer {
namespace {

using json = nlohmann::json;

/// Thrown inside this file only, caught by parse_tokenizer_json.
struct refusal {
  tokenizer_errc code;
  std::string message;
};

[[noreturn]] void bad(const std::string& path, const std::string& what) { throw refusal{tokenizer_errc::bad_file, path + ": " + what}; }
[[noreturn]] void not_built(const std::string& path, const std::string& what) {
  throw refusal{tokenizer_errc::not_built, path + ": " + what + " is not built in tandem's tokenizer"};
}

const json& key(const json& j, const std::string& path, const char* name) {
  if (!j.is_object()) bad(path, "expected an object");
  const auto it = j.find(name);
  if (it == j.end()) bad(path, "the key \"" + std::string(name) + "\" is missing");
  return *it;
}

std::string string_at(const json& j, const std::string& path) {
  if (!j.is_string()) bad(path, "expected a string, got " + std::string(j.type_name()));
  return j.get<std::string>();
}

bool bool_at(const json& j, const std::string& path) {
  if (!j.is_boolean()) bad(path, "expected true or false, got " + std::string(j.type_name()));
  return j.get<bool>();
}

std::int64_t int_at(const json& j, const std::string& path) {
  if (!j.is_number_integer()) bad(path, "expected an integer, got " + std::string(j.type_name()));
  return j.get<std::int64_t>();
}

std::int32_t id_at(const json& j, const std::string& path) {
  const std::int64_t v = int_at(j, path);
  if (v < 0 || v > INT32_MAX) bad(path, "an id must be in [0, 2^31), got " + std::to_string(v));
  return static_cast<std::int32_t>(v);
}

/// A pattern {"String": "..."}; a Regex pattern is refused.
std::string string_pattern(const json& j, const std::string& path) {
  if (j.is_object() && j.contains("Regex")) not_built(path, "a Regex pattern");
  return string_at(key(j, path, "String"), path + ".String");
}

std::string type_of(const json& j, const std::string& path) { return string_at(key(j, path, "type"), path + ".type"); }

void read_normalizer(const json& j, const std::string& path, std::vector<normalizer_step>& out) {
  if (j.is_null()) return;
  const std::string type = type_of(j, path);
  if (type == "Sequence") {
    const json& list = key(j, path, "normalizers");
    if (!list.is_array()) bad(path + ".normalizers", "expected a list");
    for (std::size_t i = 0; i < list.size(); ++i) read_normalizer(list[i], path + ".normalizers[" + std::to_string(i) + "]", out);
  } else if (type == "Replace") {
    out.push_back({normalizer_step::kind::replace, string_pattern(key(j, path, "pattern"), path + ".pattern"),
                   string_at(key(j, path, "content"), path + ".content")});
    if (out.back().pattern.empty()) bad(path + ".pattern", "an empty pattern");
  } else if (type == "Prepend") {
    out.push_back({normalizer_step::kind::prepend, "", string_at(key(j, path, "prepend"), path + ".prepend")});
  } else {
    not_built(path, "the normalizer " + type);
  }
}

split_behavior behavior_of(const std::string& b, const std::string& path) {
  if (b == "Removed") return split_behavior::removed;
  if (b == "Isolated") return split_behavior::isolated;
  if (b == "MergedWithPrevious") return split_behavior::merged_with_previous;
  if (b == "MergedWithNext") return split_behavior::merged_with_next;
  if (b == "Contiguous") return split_behavior::contiguous;
  bad(path, "unknown split behaviour \"" + b + "\"");
}

void read_pre_tokenizer(const json& j, const std::string& path, std::vector<split_step>& out) {
  if (j.is_null()) return;
  const std::string type = type_of(j, path);
  if (type == "Sequence") {
    const json& list = key(j, path, "pretokenizers");
    if (!list.is_array()) bad(path + ".pretokenizers", "expected a list");
    for (std::size_t i = 0; i < list.size(); ++i)
      read_pre_tokenizer(list[i], path + ".pretokenizers[" + std::to_string(i) + "]", out);
  } else if (type == "Split") {
    if (bool_at(key(j, path, "invert"), path + ".invert")) not_built(path + ".invert", "an inverted Split");
    split_step s{string_pattern(key(j, path, "pattern"), path + ".pattern"),
                 behavior_of(string_at(key(j, path, "behavior"), path + ".behavior"), path + ".behavior")};
    if (s.pattern.empty()) bad(path + ".pattern", "an empty pattern");
    out.push_back(std::move(s));
  } else {
    not_built(path, "the pre-tokenizer " + type);
  }
}

void read_decoder(const json& j, const std::string& path, std::vector<decoder_step>& out) {
  const std::string type = type_of(j, path);
  if (type == "Sequence") {
    const json& list = key(j, path, "decoders");
    if (!list.is_array()) bad(path + ".decoders", "expected a list");
    for (std::size_t i = 0; i < list.size(); ++i) read_decoder(list[i], path + ".decoders[" + std::to_string(i) + "]", out);
  } else if (type == "Replace") {
    decoder_step d;
    d.what = decoder_step::kind::replace;
    d.pattern = string_pattern(key(j, path, "pattern"), path + ".pattern");
    d.content = string_at(key(j, path, "content"), path + ".content");
    if (d.pattern.empty()) bad(path + ".pattern", "an empty pattern");
    out.push_back(std::move(d));
  } else if (type == "ByteFallback") {
    out.push_back({decoder_step::kind::byte_fallback, "", "", 0, 0});
  } else if (type == "Fuse") {
    out.push_back({decoder_step::kind::fuse, "", "", 0, 0});
  } else if (type == "Strip") {
    decoder_step d;
    d.what = decoder_step::kind::strip;
    d.content = string_at(key(j, path, "content"), path + ".content");
    d.start = int_at(key(j, path, "start"), path + ".start");
    d.stop = int_at(key(j, path, "stop"), path + ".stop");
    if (d.start < 0 || d.stop < 0) bad(path, "start and stop must be >= 0");
    out.push_back(std::move(d));
  } else {
    not_built(path, "the decoder " + type);
  }
}

void read_model(const json& j, const std::string& path, bpe_spec& m) {
  const std::string type = type_of(j, path);
  if (type != "BPE") not_built(path, "the model " + type);
  if (const auto it = j.find("dropout"); it != j.end() && !it->is_null()) not_built(path + ".dropout", "BPE dropout");
  for (const char* k : {"continuing_subword_prefix", "end_of_word_suffix"}) {
    const auto it = j.find(k);
    if (it != j.end() && !it->is_null() && !(it->is_string() && it->get<std::string>().empty()))
      not_built(path + "." + k, std::string("a ") + k);
  }
  if (const auto it = j.find("unk_token"); it != j.end() && !it->is_null()) m.unk_token = string_at(*it, path + ".unk_token");
  if (const auto it = j.find("fuse_unk"); it != j.end()) m.fuse_unk = bool_at(*it, path + ".fuse_unk");
  if (const auto it = j.find("byte_fallback"); it != j.end()) m.byte_fallback = bool_at(*it, path + ".byte_fallback");
  if (const auto it = j.find("ignore_merges"); it != j.end()) m.ignore_merges = bool_at(*it, path + ".ignore_merges");
  const json& vocab = key(j, path, "vocab");
  if (!vocab.is_object()) bad(path + ".vocab", "expected an object of token: id");
  for (const auto& [token, id] : vocab.items()) m.vocab.emplace(token, id_at(id, path + ".vocab[\"" + token + "\"]"));
  const json& merges = key(j, path, "merges");
  if (!merges.is_array()) bad(path + ".merges", "expected a list");
  m.merges.reserve(merges.size());
  for (std::size_t i = 0; i < merges.size(); ++i) {
    const std::string at = path + ".merges[" + std::to_string(i) + "]";
    const json& x = merges[i];
    if (x.is_string()) {  // the older spelling: "a b"
      const std::string s = x.get<std::string>();
      const auto space = s.find(' ');
      if (space == std::string::npos || s.find(' ', space + 1) != std::string::npos)
        bad(at, "a merge string must be two tokens and one space, got \"" + s + "\"");
      m.merges.emplace_back(s.substr(0, space), s.substr(space + 1));
    } else if (x.is_array() && x.size() == 2) {
      m.merges.emplace_back(string_at(x[0], at + "[0]"), string_at(x[1], at + "[1]"));
    } else {
      bad(at, "a merge must be [\"left\", \"right\"] or \"left right\"");
    }
  }
}

void read_added_tokens(const json& j, const std::string& path, std::vector<added_token>& out) {
  if (!j.is_array()) bad(path, "expected a list");
  for (std::size_t i = 0; i < j.size(); ++i) {
    const std::string at = path + "[" + std::to_string(i) + "]";
    added_token t;
    t.id = id_at(key(j[i], at, "id"), at + ".id");
    t.content = string_at(key(j[i], at, "content"), at + ".content");
    if (t.content.empty()) bad(at + ".content", "an empty added token");
    t.special = bool_at(key(j[i], at, "special"), at + ".special");
    t.normalized = bool_at(key(j[i], at, "normalized"), at + ".normalized");
    for (const char* k : {"lstrip", "rstrip", "single_word"}) {
      const auto it = j[i].find(k);
      if (it != j[i].end() && bool_at(*it, at + "." + k)) not_built(at + "." + k, std::string("an added token with ") + k);
    }
    out.push_back(std::move(t));
  }
}

void read_post_processor(const json& j, const std::string& path, std::vector<template_piece>& out) {
  if (j.is_null()) return;
  const std::string type = type_of(j, path);
  if (type != "TemplateProcessing") not_built(path, "the post-processor " + type);
  const json& specials = key(j, path, "special_tokens");
  const json& single = key(j, path, "single");
  if (!single.is_array()) bad(path + ".single", "expected a list");
  for (std::size_t i = 0; i < single.size(); ++i) {
    const std::string at = path + ".single[" + std::to_string(i) + "]";
    if (single[i].contains("Sequence")) {
      const std::string id = string_at(key(single[i]["Sequence"], at + ".Sequence", "id"), at + ".Sequence.id");
      if (id != "A") bad(at, "the single-sequence template can only name sequence A, got " + id);
      out.push_back({true, {}});
    } else if (single[i].contains("SpecialToken")) {
      const std::string name = string_at(key(single[i]["SpecialToken"], at + ".SpecialToken", "id"), at + ".SpecialToken.id");
      const json& entry = key(specials, path + ".special_tokens", name.c_str());
      const json& ids = key(entry, path + ".special_tokens." + name, "ids");
      if (!ids.is_array()) bad(path + ".special_tokens." + name + ".ids", "expected a list");
      template_piece p{false, {}};
      for (std::size_t k = 0; k < ids.size(); ++k) p.ids.push_back(id_at(ids[k], path + ".special_tokens." + name + ".ids[" + std::to_string(k) + "]"));
      out.push_back(std::move(p));
    } else {
      bad(at, "a template piece is {\"Sequence\": ...} or {\"SpecialToken\": ...}");
    }
  }
}

}  // namespace

tokenizer_result<tokenizer_spec> parse_tokenizer_json(std::string_view text, const std::string& where) {
  json j;
  try {
    j = json::parse(text);
  } catch (const json::parse_error& e) {
    return tokenizer_error{tokenizer_errc::bad_file, where + ": not JSON: " + e.what()};
  }
  try {
    tokenizer_spec s;
    if (!j.is_object()) bad(where, "expected an object");
    if (const auto it = j.find("normalizer"); it != j.end()) read_normalizer(*it, where + ": normalizer", s.normalizer);
    if (const auto it = j.find("pre_tokenizer"); it != j.end()) read_pre_tokenizer(*it, where + ": pre_tokenizer", s.pre_tokenizer);
    read_model(key(j, where, "model"), where + ": model", s.model);
    if (const auto it = j.find("added_tokens"); it != j.end()) read_added_tokens(*it, where + ": added_tokens", s.added_tokens);
    if (const auto it = j.find("post_processor"); it != j.end()) read_post_processor(*it, where + ": post_processor", s.single_template);
    if (const auto it = j.find("decoder"); it != j.end() && !it->is_null()) {
      s.has_decoder = true;
      read_decoder(*it, where + ": decoder", s.decoder);
    }
    for (const char* k : {"truncation", "padding"}) {
      const auto it = j.find(k);
      if (it != j.end() && !it->is_null()) not_built(where + ": " + k, std::string("tokenizer-side ") + k);
    }
    return s;
  } catch (const refusal& r) {
    return tokenizer_error{r.code, r.message};
  } catch (const json::exception& e) {
    return tokenizer_error{tokenizer_errc::bad_file, where + ": " + e.what()};
  }
}

}  // namespace tandem::tokenizer
