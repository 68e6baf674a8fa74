// The forward over a paged KV cache (gpu/model/forward.h forward_cached, gpu/model/kv_cache.h):
// prefill-then-decode and every chunking of a prefill give the logits of one full forward over
// the same tokens bit for bit, alone or beside other sequences at other phases, on forked
// sequences sharing a prompt, and with sliding blocks trimmed to the window; on the committed
// all-features, sliding-only and full-only fixtures with sequences longer than their windows;
// rows that only pad a batch write the spare blocks and change nothing else.
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <map>

#include "gpu/core/exec_context.h"
#include "gpu/core/host_buffer.h"
#include "gpu/model/checkpoint.h"
#include "gpu/model/forward.h"
#include "gpu/model/kv_cache.h"
#include "gpu/model/model_weights.h"

namespace tg = tandem::gpu;
namespace fs = std::filesystem;

namespace {

const tg::exec_context ctx = tg::exec_context::cpu();

struct loaded {
  tg::checkpoint source;
  tg::slab weights;
  tg::model_weights w;
  const tg::model_config& c() const { return source.config; }
};

loaded load(const std::string& fixture) {
  auto c = tg::open_checkpoint(fs::path(TANDEM_SOURCE_DIR) / "tests/data/reference" / fixture, tg::dtype::float32);
  BOOST_REQUIRE_MESSAGE(c.has_value(), (c.has_value() ? "" : c.error().message()));
  loaded out{std::move(*c), {}, {}};
  auto s = tg::load_checkpoint(out.source, tg::device::cpu());
  BOOST_REQUIRE(s.has_value());
  out.weights = std::move(*s);
  auto w = tg::bind_weights(out.source.config, out.source.layout, out.weights);
  BOOST_REQUIRE(w.has_value());
  out.w = std::move(*w);
  return out;
}

std::vector<std::int32_t> sequence(std::size_t n, std::int32_t seed, std::int32_t vocab) {
  std::vector<std::int32_t> s(n);
  for (std::size_t i = 0; i < n; ++i) s[i] = static_cast<std::int32_t>((seed * 131 + static_cast<std::int32_t>(i) * 71 + 5) % vocab);
  return s;
}

/// Logits F32 [T, V] of one whole sequence through forward_hidden.
std::vector<float> full_logits(const loaded& m, const std::vector<std::int32_t>& seq) {
  const auto T = static_cast<std::int64_t>(seq.size());
  std::vector<std::int32_t> pos(seq.size());
  for (std::size_t i = 0; i < pos.size(); ++i) pos[i] = static_cast<std::int32_t>(i);
  auto ids = tg::host_buffer::of<std::int32_t>({T}, seq);
  auto positions = tg::host_buffer::of<std::int32_t>({T}, pos);
  auto cu = tg::host_buffer::of<std::int32_t>({2}, {0, static_cast<std::int32_t>(T)});
  tg::host_buffer hidden(tg::dtype::float32, {T, m.c().hidden_size}), logits(tg::dtype::float32, {T, m.c().vocab_size});
  BOOST_REQUIRE(tg::forward_hidden(ctx, m.c(), m.w, {ids, positions, cu}, hidden).is_ok());
  BOOST_REQUIRE(tg::head_logits(ctx, m.c(), m.w, hidden, logits).is_ok());
  return logits.to_vector<float>();
}

/// One cached step: for each (sequence, its tokens, its next position) the rows, in order.
struct part {
  tg::kv_cache::sequence_id id;
  std::vector<std::int32_t> tokens;
};

/// Reserves, runs forward_cached over `parts` and returns each part's logits rows [n_i, V].
std::vector<std::vector<float>> cached_step(const loaded& m, tg::kv_cache& cache, const std::vector<part>& parts) {
  std::vector<std::int32_t> tokens, positions, cu{0};
  std::vector<tg::kv_cache::sequence_id> ids;
  for (const part& p : parts) {
    const std::int64_t start = cache.length(p.id);
    BOOST_REQUIRE(cache.reserve(p.id, static_cast<std::int64_t>(p.tokens.size())).is_ok());
    for (std::size_t i = 0; i < p.tokens.size(); ++i) {
      tokens.push_back(p.tokens[i]);
      positions.push_back(static_cast<std::int32_t>(start + static_cast<std::int64_t>(i)));
    }
    cu.push_back(static_cast<std::int32_t>(tokens.size()));
    ids.push_back(p.id);
  }
  const auto n = static_cast<std::int64_t>(tokens.size());
  auto t = tg::host_buffer::of<std::int32_t>({n}, tokens);
  auto pos = tg::host_buffer::of<std::int32_t>({n}, positions);
  auto offsets = tg::host_buffer::of<std::int32_t>({static_cast<std::int64_t>(cu.size())}, cu);
  tg::host_buffer hidden(tg::dtype::float32, {n, m.c().hidden_size}), logits(tg::dtype::float32, {n, m.c().vocab_size});
  const tg::status s = tg::forward_cached(ctx, m.c(), m.w, cache, {t, pos, offsets, ids, {}, {}, {}, {}, {}}, hidden);
  BOOST_REQUIRE_MESSAGE(s.is_ok(), s.message());
  BOOST_REQUIRE(tg::head_logits(ctx, m.c(), m.w, hidden, logits).is_ok());
  std::vector<std::vector<float>> out;
  const std::int64_t V = m.c().vocab_size;
  for (std::size_t i = 0; i < parts.size(); ++i)
    out.emplace_back(logits.data<float>() + cu[i] * V, logits.data<float>() + cu[i + 1] * V);
  for (const part& p : parts) cache.trim_window(p.id);
  return out;
}

tg::kv_cache make_cache(const loaded& m, std::int64_t block_size, std::int64_t blocks) {
  tg::kv_cache_options o;
  o.block_size = block_size;
  o.full_blocks = o.sliding_blocks = blocks;
  auto cache = tg::kv_cache::create(tg::exec_context::cpu(), m.c(), tg::dtype::float32, o);
  BOOST_REQUIRE_MESSAGE(cache.has_value(), (cache.has_value() ? "" : cache.error().message()));
  return std::move(*cache);
}

bool has(const tg::model_config& c, tg::layer_type t) {
  for (const auto& L : c.layers)
    if (L.type == t) return true;
  return false;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(cached_forward)

BOOST_AUTO_TEST_CASE(prefill_then_decode_and_every_chunking_give_the_full_forwards_logits_bit_for_bit) {
  for (const std::string fixture : {"all_features", "sliding_only", "full_only"}) {
    const loaded m = load(fixture);
    const auto seq = sequence(23, 3, static_cast<std::int32_t>(m.c().vocab_size));
    BOOST_REQUIRE(static_cast<std::int64_t>(seq.size()) > 2 * m.c().sliding_window);
    const std::vector<float> want = full_logits(m, seq);
    const std::int64_t V = m.c().vocab_size;
    const std::vector<std::vector<std::size_t>> chunkings = {{23}, {10, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1}, {3, 3, 3, 3, 3, 3, 3, 2},
                                                             std::vector<std::size_t>(23, 1), {1, 22}, {7, 9, 7}};
    for (const std::int64_t block : {1, 4, 16}) {
      for (const auto& chunks : chunkings) {
        BOOST_TEST_CONTEXT(fixture << ", blocks of " << block << ", chunks of the first " << chunks.front()) {
          tg::kv_cache cache = make_cache(m, block, 64);
          const auto id = cache.add_sequence();
          std::size_t at = 0;
          for (const std::size_t n : chunks) {
            const auto rows = cached_step(m, cache, {{id, {seq.begin() + static_cast<std::ptrdiff_t>(at), seq.begin() + static_cast<std::ptrdiff_t>(at + n)}}});
            BOOST_TEST(std::memcmp(rows[0].data(), want.data() + at * V, n * V * 4) == 0, "rows " << at << " to " << at + n - 1);
            at += n;
            if (has(m.c(), tg::layer_type::sliding))  // the window and the block the next row starts
              BOOST_TEST(cache.mapped_blocks(id, tg::layer_type::sliding) <= (m.c().sliding_window - 1) / block + 2 + static_cast<std::int64_t>(n) / block);
          }
          BOOST_TEST(at == seq.size());
          cache.release(id);
          BOOST_TEST(cache.used_blocks(tg::layer_type::full) + cache.used_blocks(tg::layer_type::sliding) == 0);
        }
      }
    }
  }
}

BOOST_AUTO_TEST_CASE(a_sequence_gives_the_same_rows_beside_others_at_other_phases) {
  const loaded m = load("all_features");
  const auto V = static_cast<std::size_t>(m.c().vocab_size);
  const auto vocab = static_cast<std::int32_t>(m.c().vocab_size);
  const auto a = sequence(17, 1, vocab), b = sequence(12, 2, vocab), d = sequence(9, 4, vocab);
  const std::vector<float> want_a = full_logits(m, a), want_b = full_logits(m, b), want_d = full_logits(m, d);
  tg::kv_cache cache = make_cache(m, 4, 64);
  const auto ia = cache.add_sequence(), ib = cache.add_sequence(), id = cache.add_sequence();
  // a prefills 8, then decodes; b joins at step 2 with a chunk of 5; d prefills whole at step 3.
  std::map<tg::kv_cache::sequence_id, std::size_t> at{{ia, 0}, {ib, 0}, {id, 0}};
  const std::map<tg::kv_cache::sequence_id, const std::vector<std::int32_t>*> seqs{{ia, &a}, {ib, &b}, {id, &d}};
  const std::map<tg::kv_cache::sequence_id, const std::vector<float>*> wants{{ia, &want_a}, {ib, &want_b}, {id, &want_d}};
  const std::vector<std::vector<std::pair<tg::kv_cache::sequence_id, std::size_t>>> steps = {
      {{ia, 8}}, {{ia, 1}, {ib, 5}}, {{ib, 1}, {id, 9}, {ia, 1}}, {{ia, 1}, {ib, 6}}, {{ia, 6}}};
  for (std::size_t k = 0; k < steps.size(); ++k) {
    std::vector<part> parts;
    for (const auto& [s, n] : steps[k]) parts.push_back({s, {seqs.at(s)->begin() + static_cast<std::ptrdiff_t>(at[s]),
                                                              seqs.at(s)->begin() + static_cast<std::ptrdiff_t>(at[s] + n)}});
    const auto rows = cached_step(m, cache, parts);
    for (std::size_t i = 0; i < parts.size(); ++i) {
      const auto s = parts[i].id;
      const std::size_t n = parts[i].tokens.size();
      BOOST_TEST(std::memcmp(rows[i].data(), wants.at(s)->data() + at[s] * V, n * V * 4) == 0,
                 "step " << k << ", sequence " << s << ", rows " << at[s] << " to " << at[s] + n - 1);
      at[s] += n;
    }
  }
  BOOST_TEST(at[ia] == a.size());
  BOOST_TEST(at[ib] == b.size());
}

BOOST_AUTO_TEST_CASE(forked_generations_share_their_prompt_and_each_equals_its_own_full_forward) {
  const loaded m = load("all_features");
  const auto V = static_cast<std::size_t>(m.c().vocab_size);
  const auto vocab = static_cast<std::int32_t>(m.c().vocab_size);
  const auto prompt = sequence(10, 6, vocab);  // 10 positions: two full blocks of 4 and a partial one
  tg::kv_cache cache = make_cache(m, 4, 64);
  const auto parent = cache.add_sequence();
  cached_step(m, cache, {{parent, prompt}});
  const std::int64_t after_prompt = cache.used_blocks(tg::layer_type::full);
  std::vector<tg::kv_cache::sequence_id> children;
  for (int i = 0; i < 3; ++i) {
    auto child = cache.fork(parent);
    BOOST_REQUIRE(child.has_value());
    children.push_back(*child);
  }
  BOOST_TEST(cache.used_blocks(tg::layer_type::full) == after_prompt + 3);  // one copied partial block each
  cache.release(parent);
  for (std::size_t i = 0; i < children.size(); ++i) {
    auto full = prompt;
    for (int k = 0; k < 5; ++k) {
      const std::int32_t token = static_cast<std::int32_t>((17 * (i + 1) + 3 * k) % vocab);
      const auto rows = cached_step(m, cache, {{children[i], {token}}});
      full.push_back(token);
      const std::vector<float> want = full_logits(m, full);
      BOOST_TEST(std::memcmp(rows[0].data(), want.data() + (full.size() - 1) * V, V * 4) == 0,
                 "generation " << i << ", token " << k);
    }
  }
  for (const auto c : children) cache.release(c);
  BOOST_TEST(cache.used_blocks(tg::layer_type::full) == 0);
  BOOST_TEST(cache.used_blocks(tg::layer_type::sliding) == 0);
}

BOOST_AUTO_TEST_CASE(a_reserve_that_does_not_fit_takes_nothing_and_names_the_pool) {
  const loaded m = load("all_features");
  tg::kv_cache cache = make_cache(m, 4, 3);
  const auto a = cache.add_sequence();
  BOOST_REQUIRE(cache.reserve(a, 8).is_ok());  // 2 blocks of each type
  const auto b = cache.add_sequence();
  const tg::status s = cache.reserve(b, 8);
  BOOST_TEST((s.code() == tg::status_code::out_of_memory));
  BOOST_TEST(s.message() == "kv_cache: sequence 1 needs 2 more sliding_attention blocks, 1 are free");
  BOOST_TEST(cache.length(b) == 0);
  BOOST_TEST(cache.free_blocks(tg::layer_type::full) == 1);
  BOOST_TEST(cache.free_blocks(tg::layer_type::sliding) == 1);
  cache.release(a);
  BOOST_TEST(cache.reserve(b, 8).is_ok());
}

BOOST_AUTO_TEST_CASE(a_row_whose_keys_are_not_in_the_cache_is_refused_by_sequence_and_position) {
  const loaded m = load("full_only");
  tg::kv_cache cache = make_cache(m, 4, 8);
  const auto id = cache.add_sequence();
  BOOST_REQUIRE(cache.reserve(id, 2).is_ok());
  auto t = tg::host_buffer::of<std::int32_t>({1}, {5});
  auto pos = tg::host_buffer::of<std::int32_t>({1}, {6});  // block 1 was never reserved
  auto cu = tg::host_buffer::of<std::int32_t>({2}, {0, 1});
  tg::host_buffer hidden(tg::dtype::float32, {1, m.c().hidden_size});
  const tg::status s = tg::forward_cached(ctx, m.c(), m.w, cache, {t, pos, cu, {id}, t, pos, cu, {}, {}}, hidden);
  BOOST_REQUIRE(!s.is_ok());
  BOOST_TEST(s.message() == "layer 0: paged_kv_write: sequence 0, position 6: logical block 1 is not mapped", s.message());
}

BOOST_AUTO_TEST_CASE(padding_rows_write_only_the_spare_blocks_and_leave_the_real_rows_bits) {
  const loaded m = load("all_features");
  const std::int64_t V = m.c().vocab_size, H = m.c().hidden_size, width = 4;
  const auto seq = sequence(7, 3, static_cast<std::int32_t>(V));
  const std::vector<std::int32_t> prompt(seq.begin(), seq.end() - 1);
  // Alone: the prompt, then its last token.
  tg::kv_cache alone = make_cache(m, 4, 8);
  const auto a = alone.add_sequence();
  cached_step(m, alone, {{a, prompt}});
  const std::vector<float> want = cached_step(m, alone, {{a, {seq.back()}}}).at(0);
  // Padded: the same, then the last token beside three padding rows.
  tg::kv_cache padded = make_cache(m, 4, 8);
  const auto b = padded.add_sequence();
  cached_step(m, padded, {{b, prompt}});
  BOOST_REQUIRE(padded.reserve(b, 1).is_ok());
  auto tokens = tg::host_buffer::of<std::int32_t>({4}, {seq.back(), 0, 0, 0});
  auto positions = tg::host_buffer::of<std::int32_t>({4}, {6, 0, 0, 0});
  auto cu = tg::host_buffer::of<std::int32_t>({5}, {0, 1, 2, 3, 4});
  tg::host_buffer tables[2] = {tg::host_buffer(tg::dtype::int32, {4, width}), tg::host_buffer(tg::dtype::int32, {4, width})};
  const std::vector<tg::kv_cache::sequence_id> ids{b};
  for (const tg::layer_type t : {tg::layer_type::sliding, tg::layer_type::full}) {
    std::int32_t* table = tables[static_cast<int>(t)].data<std::int32_t>();
    BOOST_REQUIRE(padded.write_block_table(t, ids, width, {table, static_cast<std::size_t>(width)}).is_ok());
    for (std::int64_t r = 1; r < 4; ++r) {
      std::fill(table + r * width, table + (r + 1) * width, -1);
      table[r * width] = padded.spare_block(t);
    }
  }
  tg::cached_batch batch{tokens, positions, cu, ids, tokens, positions, cu, {tables[0], tables[1]}, {tables[0], tables[1]}};
  batch.padding = 3;
  tg::host_buffer hidden(tg::dtype::float32, {4, H}), logits(tg::dtype::float32, {1, V});
  const tg::status s = tg::forward_cached(ctx, m.c(), m.w, padded, batch, hidden);
  BOOST_REQUIRE_MESSAGE(s.is_ok(), s.message());
  BOOST_REQUIRE(tg::head_logits(ctx, m.c(), m.w, hidden.view().rows(0, 1), logits).is_ok());
  BOOST_TEST(std::memcmp(logits.data<float>(), want.data(), want.size() * 4) == 0, "the real row's logits");
  // Every pool block holds what the cache alone holds; the padding went to the spare block.
  bool spare_written = false;
  for (int l = 0; l < m.c().num_hidden_layers; ++l) {
    const tg::layer_config& L = m.c().layers[static_cast<std::size_t>(l)];
    if (L.is_kv_shared) continue;
    for (const bool keys : {true, false}) {
      const tg::tensor x = keys ? alone.k(l) : alone.v(l), y = keys ? padded.k(l) : padded.v(l);
      const std::int64_t block = x.numel() / x.dim(0), pool = x.dim(0) - 1;
      BOOST_TEST(pool == padded.spare_block(L.type));
      BOOST_TEST(std::memcmp(x.data(), y.data(), static_cast<std::size_t>(pool * block) * 4) == 0, "layer " << l);
      const float* spare = static_cast<const float*>(y.data()) + pool * block;
      spare_written = spare_written || std::any_of(spare, spare + block, [](float v) { return v != 0.0f; });
    }
  }
  BOOST_TEST(spare_written);
  // A table wider than the width asked for is refused by sequence.
  std::vector<std::int32_t> narrow(1);
  const tg::status w = padded.write_block_table(tg::layer_type::full, ids, 1, narrow);
  BOOST_TEST(w.message() == "kv_cache: write_block_table: sequence 0 maps 2 full_attention blocks, more than the width 1", w.message());
}

BOOST_AUTO_TEST_SUITE_END()
