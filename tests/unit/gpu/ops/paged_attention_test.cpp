// Attention over a paged KV cache: rows give the bits the packed attention gives the same
// positions (float32 and the float64 reference, with and without a window, GQA, scrambled block
// tables, a chunk of the last rows only), the K/V write lands in the mapped slots, and unmapped
// blocks, bad offsets and foreign devices are refused by name.
#include <boost/test/unit_test.hpp>

#include <cstring>
#include <vector>

#include "gpu/core/exec_context.h"
#include "gpu/ops/attention.h"
#include "gpu/ops/paged_attention.h"
#include "support/op_harness.h"

using namespace tandem::gpu;
using namespace tandem::gpu::ops;
using namespace tandem::test;

namespace {

const exec_context ctx = exec_context::cpu();

constexpr std::int64_t H = 4, G = 2, d = 8, B = 2;

/// Two sequences of 9 and 5 tokens, their keys in blocks of 2 scattered over a pool of 16 (block
/// b of sequence s at 15 - (2b + s)).
struct setup {
  dtype type;
  host_buffer q, k, v, cu;      // packed: [14, H, d], [14, G, d], [14, G, d], I32 [3]
  host_buffer k_cache, v_cache; // [16, B, G, d]
  host_buffer table;            // I32 [2, 5]
  explicit setup(dtype t)
      : type(t),
        q(random_buffer(t, {14, H, d}, 1)),
        k(random_buffer(t, {14, G, d}, 2)),
        v(random_buffer(t, {14, G, d}, 3)),
        cu(host_buffer::of<std::int32_t>({3}, {0, 9, 14})),
        k_cache(t, {16, B, G, d}),
        v_cache(t, {16, B, G, d}),
        table(dtype::int32, {2, 5}) {
    for (std::int32_t s = 0; s < 2; ++s)
      for (std::int32_t b = 0; b < 5; ++b) table.data<std::int32_t>()[s * 5 + b] = s == 1 && b > 2 ? -1 : 15 - (2 * b + s);
  }
  /// Rows [first, last) of the packed batch as paged rows (positions within their sequence).
  paged_rows rows(std::vector<std::int32_t>& cu_rows, std::vector<std::int32_t>& positions, std::int64_t from_0,
                  std::int64_t from_1) {
    positions.clear();
    for (std::int32_t p = static_cast<std::int32_t>(from_0); p < 9; ++p) positions.push_back(p);
    for (std::int32_t p = static_cast<std::int32_t>(from_1); p < 5; ++p) positions.push_back(p);
    cu_rows = {0, static_cast<std::int32_t>(9 - from_0), static_cast<std::int32_t>(9 - from_0 + 5 - from_1)};
    return {table, tensor(cu_rows.data(), dtype::int32, {3}),
            tensor(positions.data(), dtype::int32, {static_cast<std::int64_t>(positions.size())})};
  }
};

/// Rows [from, 9) of sequence 0 and [from1, 5) of sequence 1 out of a packed tensor [14, ...].
host_buffer pick(const host_buffer& b, std::int64_t from0, std::int64_t from1) {
  std::vector<std::int64_t> shape = b.shape();
  const std::int64_t row = b.numel() / shape[0] * static_cast<std::int64_t>(size_of(b.type()));
  shape[0] = 9 - from0 + 5 - from1;
  host_buffer out(b.type(), shape);
  auto* dst = out.data<std::byte>();
  const auto* src = b.data<std::byte>();
  std::memcpy(dst, src + from0 * row, static_cast<std::size_t>((9 - from0) * row));
  std::memcpy(dst + (9 - from0) * row, src + (9 + from1) * row, static_cast<std::size_t>((5 - from1) * row));
  return out;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(paged_attention_test)

BOOST_AUTO_TEST_CASE(paged_rows_give_the_bits_of_the_packed_attention_at_the_same_positions) {
  for (const dtype type : {dtype::float32, dtype::float64})
    for (const std::int64_t window : {0, 3})
      for (const auto& [from0, from1] : {std::pair<std::int64_t, std::int64_t>{0, 0}, {8, 4}, {5, 2}}) {
        BOOST_TEST_CONTEXT(to_string(type) << ", window " << window << ", rows from " << from0 << " and " << from1) {
          setup s(type);
          attention_options o;
          o.sliding_window = window;
          host_buffer out(type, {14, H, d}), lse(type, {14, H});
          BOOST_REQUIRE(attention_forward(ctx, s.q, s.k, s.v, s.cu, out, lse, o).is_ok());
          std::vector<std::int32_t> cu_all, pos_all, cu_rows, positions;
          BOOST_REQUIRE(paged_kv_write(ctx, s.k, s.v, s.rows(cu_all, pos_all, 0, 0), s.k_cache, s.v_cache).is_ok());
          const paged_rows rows = s.rows(cu_rows, positions, from0, from1);
          const host_buffer q = pick(s.q, from0, from1);
          host_buffer p_out(type, {q.shape()[0], H, d}), p_lse(type, {q.shape()[0], H});
          const status st = paged_attention_forward(ctx, q, s.k_cache, s.v_cache, rows, p_out, p_lse, o);
          BOOST_REQUIRE_MESSAGE(st.is_ok(), st.message());
          expect_close(p_out, pick(out, from0, from1), {0.0, 0.0}, "out");
          expect_close(p_lse, pick(lse, from0, from1), {0.0, 0.0}, "lse");
        }
      }
}

BOOST_AUTO_TEST_CASE(the_kv_write_fills_exactly_the_slots_of_the_rows_positions) {
  setup s(dtype::float32);
  std::vector<std::int32_t> cu_rows, positions;
  BOOST_REQUIRE(paged_kv_write(ctx, pick(s.k, 7, 3), pick(s.v, 7, 3), s.rows(cu_rows, positions, 7, 3), s.k_cache, s.v_cache).is_ok());
  // Sequence 0, position 8: block 4 -> 15 - 8 = 7, slot 0; sequence 1, position 3: block 1 -> 12, slot 1.
  const float* k = s.k_cache.data<float>();
  BOOST_TEST(std::memcmp(k + (7 * B + 0) * G * d, s.k.data<float>() + 8 * G * d, G * d * 4) == 0);
  BOOST_TEST(std::memcmp(k + (12 * B + 1) * G * d, s.k.data<float>() + (9 + 3) * G * d, G * d * 4) == 0);
  std::size_t nonzero = 0;
  for (std::int64_t i = 0; i < s.k_cache.numel(); ++i) nonzero += k[i] != 0.0f;
  BOOST_TEST(nonzero == static_cast<std::size_t>(4 * G * d));  // rows 7, 8 and 3, 4: nothing else written
}

BOOST_AUTO_TEST_CASE(unmapped_blocks_bad_offsets_and_foreign_devices_are_refused_by_name) {
  setup s(dtype::float32);
  std::vector<std::int32_t> cu_rows, positions;
  paged_rows rows = s.rows(cu_rows, positions, 0, 0);
  s.table.data<std::int32_t>()[1 * 5 + 1] = -1;  // sequence 1 loses logical block 1 (positions 2, 3)
  BOOST_TEST(paged_attention_forward(ctx, s.q, s.k_cache, s.v_cache, rows, host_buffer(dtype::float32, {14, H, d}),
                                     host_buffer(dtype::float32, {14, H}))
                 .message() == "paged_attention_forward: sequence 1, position 2: logical block 1 is not mapped");
  s.table.data<std::int32_t>()[1 * 5 + 1] = 16;
  BOOST_TEST(paged_kv_write(ctx, s.k, s.v, rows, s.k_cache, s.v_cache).message() ==
             "paged_kv_write: sequence 1, position 2: logical block 1 maps to block 16, outside the 16 blocks of the cache");
  s.table.data<std::int32_t>()[1 * 5 + 1] = 3;
  cu_rows[1] = 10;
  cu_rows[2] = 9;
  BOOST_TEST(paged_kv_write(ctx, s.k, s.v, rows, s.k_cache, s.v_cache).message() ==
             "paged_kv_write: cu_rows must run from 0 to the 14 rows");
  cu_rows = {0, 9, 14};
  const exec_context cuda{device::cuda(0), {}, nullptr};
  BOOST_TEST(paged_kv_write(cuda, s.k, s.v, rows, s.k_cache, s.v_cache).message() ==
             "paged_kv_write: the input is on cpu, but the call runs on cuda:0");
}

BOOST_AUTO_TEST_CASE(rows_with_a_host_mirror_are_checked_on_the_mirror_and_a_mirror_of_another_shape_is_refused) {
  setup s(dtype::float32);
  std::vector<std::int32_t> cu_rows, positions, mirror_cu, mirror_positions;
  paged_rows rows = s.rows(cu_rows, positions, 7, 3);
  host_buffer mirror_table(dtype::int32, {2, 5});
  std::memcpy(mirror_table.data<std::int32_t>(), s.table.data<std::int32_t>(), 10 * 4);
  paged_rows mirror = s.rows(mirror_cu, mirror_positions, 7, 3);
  mirror.block_table = mirror_table;
  rows.host = &mirror;
  const host_buffer out(dtype::float32, {4, H, d}), lse(dtype::float32, {4, H});
  BOOST_TEST(paged_kv_write(ctx, pick(s.k, 7, 3), pick(s.v, 7, 3), rows, s.k_cache, s.v_cache).is_ok());
  BOOST_TEST(paged_attention_forward(ctx, pick(s.q, 7, 3), s.k_cache, s.v_cache, rows, out, lse).is_ok());
  // The mirror is what the checks read: a fault only there refuses the call.
  mirror_table.data<std::int32_t>()[1 * 5 + 1] = -1;
  BOOST_TEST(paged_attention_forward(ctx, pick(s.q, 7, 3), s.k_cache, s.v_cache, rows, out, lse).message() ==
             "paged_attention_forward: sequence 1, position 3: logical block 1 is not mapped");
  mirror_table.data<std::int32_t>()[1 * 5 + 1] = s.table.data<std::int32_t>()[1 * 5 + 1];
  mirror_positions[0] = -4;
  BOOST_TEST(paged_kv_write(ctx, pick(s.k, 7, 3), pick(s.v, 7, 3), rows, s.k_cache, s.v_cache).message() ==
             "paged_kv_write: row 0 has position -4");
  const tensor short_positions(mirror_positions.data(), dtype::int32, {3});
  mirror.positions = short_positions;
  BOOST_TEST(paged_kv_write(ctx, pick(s.k, 7, 3), pick(s.v, 7, 3), rows, s.k_cache, s.v_cache).message().find("host positions") !=
             std::string::npos);
}

BOOST_AUTO_TEST_SUITE_END()
