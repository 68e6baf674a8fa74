// The BPE model (bpe_model.h).
#include "orchestration/tokenizer/bpe_model.h"

#include <cstdio>
#include <queue>

#include "orchestration/tokenizer/utf8.h"

namespace tandem::tokenizer {

tokenizer_result<bpe_model> bpe_model::build(const bpe_spec& spec, const std::string& where) {
  bpe_model m;
  m.vocab_ = spec.vocab;
  m.fuse_unk_ = spec.fuse_unk;
  m.ignore_merges_ = spec.ignore_merges;
  const auto id = [&](const std::string& token) -> std::optional<std::int32_t> {
    const auto it = m.vocab_.find(token);
    if (it == m.vocab_.end()) return std::nullopt;
    return it->second;
  };
  if (spec.unk_token) {
    m.unk_ = id(*spec.unk_token);
    if (!m.unk_) return tokenizer_error{tokenizer_errc::bad_file, where + ": model.unk_token \"" + *spec.unk_token + "\" is not in model.vocab"};
  }
  m.byte_fallback_ = spec.byte_fallback;
  for (int b = 0; b < 256; ++b) {
    char name[8];
    std::snprintf(name, sizeof name, "<0x%02X>", b);
    m.byte_ids_[b] = id(name).value_or(-1);
  }
  m.merges_.reserve(spec.merges.size());
  for (std::size_t r = 0; r < spec.merges.size(); ++r) {
    const auto& [left, right] = spec.merges[r];
    const auto a = id(left), b = id(right), c = id(left + right);
    if (!a || !b || !c)
      return tokenizer_error{tokenizer_errc::bad_file, where + ": model.merges[" + std::to_string(r) + "]: \"" +
                                                           (!a ? left : !b ? right : left + right) +
                                                           "\" is not in model.vocab"};
    m.merges_.emplace(pair_key(*a, *b), merge{static_cast<std::int32_t>(r), *c});  // a repeated pair keeps its first rank
  }
  return m;
}

std::optional<bpe_model::merge> bpe_model::merge_of(std::int32_t a, std::int32_t b) const {
  const auto it = merges_.find(pair_key(a, b));
  if (it == merges_.end()) return std::nullopt;
  return it->second;
}

bool bpe_model::covered_by_bytes(std::string_view ch) const {
  for (const char c : ch)
    if (byte_ids_[static_cast<unsigned char>(c)] < 0) return false;
  return true;
}

std::optional<tokenizer_error> bpe_model::encode(std::string_view word, std::vector<std::int32_t>& out) const {
  if (ignore_merges_) {
    if (const auto it = vocab_.find(word); it != vocab_.end()) {
      out.push_back(it->second);
      return std::nullopt;
    }
  }
  // The initial symbols, a doubly linked list over this vector (a merged-away symbol is dead).
  struct symbol {
    std::int32_t id;
    int prev, next;
    bool alive;
  };
  std::vector<symbol> s;
  s.reserve(word.size());
  const auto add = [&](std::int32_t id) {
    const int i = static_cast<int>(s.size());
    s.push_back({id, i - 1, i + 1, true});
  };
  bool pending_unk = false;  // fuse_unk: one unknown token for a run of uncovered characters
  for (std::size_t at = 0; at < word.size();) {
    const std::size_t n = utf8_length(word, at);
    const std::string_view ch = word.substr(at, n);
    if (const auto it = vocab_.find(ch); it != vocab_.end()) {
      if (pending_unk) add(*unk_), pending_unk = false;
      add(it->second);
    } else if (byte_fallback_ && covered_by_bytes(ch)) {
      // As Hugging Face's model does, a pending unknown token is not added first: it follows.
      for (const char c : ch) add(byte_ids_[static_cast<unsigned char>(c)]);
    } else if (unk_) {
      if (pending_unk && !fuse_unk_) add(*unk_);
      pending_unk = true;
    } else {
      return tokenizer_error{tokenizer_errc::invalid_input,
                             "the character \"" + std::string(ch) + "\" at byte " + std::to_string(at) +
                                 " of \"" + std::string(word) + "\" has no token, no byte tokens and no unknown token"};
    }
    at += n;
  }
  if (pending_unk) add(*unk_);
  if (s.empty()) return std::nullopt;
  s.back().next = -1;

  struct candidate {
    std::int32_t rank;
    int pos;
    std::int32_t result;
    bool operator<(const candidate& o) const {  // the queue's top: the lowest rank, then the leftmost
      return rank != o.rank ? rank > o.rank : pos > o.pos;
    }
  };
  std::priority_queue<candidate> queue;
  for (int i = 0; i + 1 < static_cast<int>(s.size()); ++i)
    if (const auto m = merge_of(s[i].id, s[i + 1].id)) queue.push({m->rank, i, m->result});
  while (!queue.empty()) {
    const candidate top = queue.top();
    queue.pop();
    symbol& left = s[top.pos];
    if (!left.alive || left.next < 0) continue;
    const symbol& right = s[left.next];
    const auto m = merge_of(left.id, right.id);
    if (!m || m->result != top.result) continue;  // the pair changed since it was queued
    const int right_next = right.next;
    s[left.next].alive = false;
    left.id = top.result;
    left.next = right_next;
    if (right_next >= 0) s[right_next].prev = top.pos;
    if (left.prev >= 0)
      if (const auto p = merge_of(s[left.prev].id, left.id)) queue.push({p->rank, left.prev, p->result});
    if (left.next >= 0)
      if (const auto p = merge_of(left.id, s[left.next].id)) queue.push({p->rank, top.pos, p->result});
  }
  for (const symbol& x : s)
    if (x.alive) out.push_back(x.id);
  return std::nullopt;
}

}  // namespace tandem::tokenizer
