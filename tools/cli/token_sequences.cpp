// Reading and packing token sequences.
#include "tools/cli/token_sequences.h"

#include <fstream>
#include <sstream>

#include "gpu/model/json_text.h"

namespace tandem::cli {

std::optional<std::vector<std::vector<std::int32_t>>> read_sequences(const std::string& file, std::int64_t vocab,
                                                                     std::string& problem) {
  std::ifstream in(file, std::ios::binary);
  if (!in) {
    problem = file + ": cannot open for reading";
    return std::nullopt;
  }
  std::stringstream text;
  text << in.rdbuf();
  auto doc = gpu::parse_json_strict(text.str(), file);
  if (!doc) {
    problem = doc.error().message();
    return std::nullopt;
  }
  if (!doc->is_array()) {
    problem = file + ": expected a JSON array of token-id arrays";
    return std::nullopt;
  }
  std::vector<std::vector<std::int32_t>> out;
  for (std::size_t s = 0; s < doc->size(); ++s) {
    const auto& seq = (*doc)[s];
    const std::string where = file + ": sequence " + std::to_string(s);
    if (!seq.is_array()) {
      problem = where + ": expected an array of token ids";
      return std::nullopt;
    }
    std::vector<std::int32_t> ids;
    for (std::size_t t = 0; t < seq.size(); ++t) {
      const auto& id = seq[t];
      if (!id.is_number_integer() || id.get<std::int64_t>() < 0 || id.get<std::int64_t>() >= vocab) {
        problem = where + ", token " + std::to_string(t) + ": " + id.dump().substr(0, 40) + " is not a token id in [0, " +
                  std::to_string(vocab) + ")";
        return std::nullopt;
      }
      ids.push_back(static_cast<std::int32_t>(id.get<std::int64_t>()));
    }
    out.push_back(std::move(ids));
  }
  return out;
}

gpu::result<packed_sequences> pack(const std::vector<std::vector<std::int32_t>>& sequences, const gpu::exec_context& ctx) {
  std::vector<std::int32_t> tokens;
  packed_sequences p;
  p.offsets.push_back(0);
  for (const auto& seq : sequences) {
    tokens.insert(tokens.end(), seq.begin(), seq.end());
    if (!seq.empty()) p.predicted += static_cast<std::int64_t>(seq.size()) - 1;
    p.offsets.push_back(static_cast<std::int32_t>(tokens.size()));
  }
  auto packed = gpu::pack_tokens(ctx, tokens, p.offsets);
  if (!packed) return packed.error();
  p.packed = std::move(*packed);
  return p;
}

}  // namespace tandem::cli
