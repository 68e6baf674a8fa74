// A SentencePiece tokenizer.model (sentencepiece_model.h).
#include "orchestration/tokenizer/sentencepiece_model.h"


#include <sentencepiece_processor.h>

#include "orchestration/tokenizer/utf8.h"

namespace tandem::tokenizer {

sentencepiece_model::~sentencepiece_model() = default;

tokenizer_result<std::shared_ptr<const sentencepiece_model>> sentencepiece_model::load(const std::filesystem::path& file) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(file, ec))
    return tokenizer_error{tokenizer_errc::bad_file, file.string() + ": cannot be read"};
  std::shared_ptr<sentencepiece_model> m(new sentencepiece_model());
  m->sp_ = std::make_unique<sentencepiece::SentencePieceProcessor>();
  if (const auto s = m->sp_->Load(file.string()); !s.ok())
    return tokenizer_error{tokenizer_errc::bad_file, file.string() + ": not a SentencePiece model: " + s.ToString()};
  const int n = m->sp_->GetPieceSize();
  if (n <= 0) return tokenizer_error{tokenizer_errc::bad_file, file.string() + ": the model has no pieces"};
  std::vector<added_token> whole;
  m->special_.assign(static_cast<std::size_t>(n), false);
  for (int id = 0; id < n; ++id) {
    // User-defined pieces need nothing here: SentencePiece itself finds them whole.
    const bool special = m->sp_->IsControl(id) || m->sp_->IsUnknown(id);
    m->special_[static_cast<std::size_t>(id)] = special;
    if (special && !m->sp_->IdToPiece(id).empty()) whole.push_back({id, m->sp_->IdToPiece(id), true, false});
  }
  m->whole_ = added_token_set(whole, false);
  return std::shared_ptr<const sentencepiece_model>(std::move(m));
}

tokenizer_result<std::vector<std::int32_t>> sentencepiece_model::encode(std::string_view text, bool add_bos) const {
  if (auto bad = utf8_refusal(text)) return tokenizer_error{tokenizer_errc::invalid_input, std::move(*bad)};
  std::vector<std::int32_t> ids;
  if (add_bos && sp_->bos_id() >= 0) ids.push_back(sp_->bos_id());
  std::vector<int> part;
  for (const text_piece& p : whole_.split(text)) {
    if (p.token) {
      ids.push_back(*p.token);
      continue;
    }
    part.clear();
    if (const auto s = sp_->Encode(p.text, &part); !s.ok())
      return tokenizer_error{tokenizer_errc::invalid_input, "SentencePiece cannot encode the text: " + s.ToString()};
    ids.insert(ids.end(), part.begin(), part.end());
  }
  return ids;
}

tokenizer_result<std::string> sentencepiece_model::decode(std::span<const std::int32_t> ids, bool skip_special_tokens) const {
  std::string out, piece;
  std::vector<int> run;
  auto flush = [&]() -> std::optional<tokenizer_error> {
    if (run.empty()) return std::nullopt;
    piece.clear();
    if (const auto s = sp_->Decode(run, &piece); !s.ok())
      return tokenizer_error{tokenizer_errc::bad_file, "SentencePiece cannot decode the ids: " + s.ToString()};
    out += piece;
    run.clear();
    return std::nullopt;
  };
  for (std::size_t i = 0; i < ids.size(); ++i) {
    const std::int32_t id = ids[i];
    if (id < 0 || id >= vocab_size())
      return tokenizer_error{tokenizer_errc::unknown_id, "id " + std::to_string(id) + " at position " + std::to_string(i) +
                                                             " is outside the vocabulary (" + std::to_string(vocab_size()) +
                                                             " ids)"};
    if (!special_[static_cast<std::size_t>(id)]) {
      run.push_back(id);
      continue;
    }
    if (auto e = flush()) return *e;
    if (!skip_special_tokens) out += sp_->IdToPiece(id);
  }
  if (auto e = flush()) return *e;
  return out;
}

std::optional<std::int32_t> sentencepiece_model::token_to_id(std::string_view token) const {
  const int id = sp_->PieceToId(std::string(token));
  // PieceToId answers the unknown id for a piece it does not have.
  if (id < 0 || (sp_->IsUnknown(id) && sp_->IdToPiece(id) != token)) return std::nullopt;
  return id;
}

std::optional<std::string> sentencepiece_model::id_to_token(std::int32_t id) const {
  if (id < 0 || id >= vocab_size()) return std::nullopt;
  return sp_->IdToPiece(id);
}

std::int32_t sentencepiece_model::vocab_size() const { return sp_->GetPieceSize(); }

std::int32_t sentencepiece_model::eos_id() const { return sp_->eos_id(); }

}  // namespace tandem::tokenizer
