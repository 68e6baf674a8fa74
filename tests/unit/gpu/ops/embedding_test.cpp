// Embedding lookup: hand-computed rows, float32 against the float64 reference, column windows of
// the per-layer table, the scatter-add backward against finite differences, the padding row, and
// refused arguments.
#include <boost/test/unit_test.hpp>

#include <cstdint>
#include <vector>

#include "gpu/ops/embedding.h"
#include "support/op_harness.h"

#include "gpu/core/exec_context.h"

namespace {
// Every op of this file runs on the CPU, on the calling thread.
const tandem::gpu::exec_context ctx = tandem::gpu::exec_context::cpu();
}  // namespace

using namespace tandem::gpu;
using namespace tandem::test;

BOOST_AUTO_TEST_SUITE(embedding_test)

BOOST_AUTO_TEST_CASE(rows_of_the_ids_come_out_multiplied_by_the_scale) {
  const auto table = host_buffer::of<double>({4, 3}, {0, 1, 2, 10, 11, 12, 20, 21, 22, 30, 31, 32});
  const auto ids = host_buffer::of<std::int32_t>({3}, {2, 0, 3});
  host_buffer out(dtype::float64, {3, 3});
  BOOST_REQUIRE(ops::embedding_forward(ctx, ids, table, 0.5, out).is_ok());
  const std::vector<double> want = {10, 10.5, 11, 0, 0.5, 1, 15, 15.5, 16};
  expect_close(out, host_buffer::of<double>({3, 3}, want), {0, 0}, "out");
}

BOOST_AUTO_TEST_CASE(forward_in_float32_matches_the_float64_reference) {
  const auto table = random_buffer(dtype::float64, {11, 6}, 1);
  const auto ids = random_indices({9}, 2, 0, 11);
  host_buffer out64(dtype::float64, {9, 6}), out32(dtype::float32, {9, 6});
  BOOST_REQUIRE(ops::embedding_forward(ctx, ids, table, 39.25, out64).is_ok());
  BOOST_REQUIRE(ops::embedding_forward(ctx, ids, converted(table, dtype::float32), 39.25, out32).is_ok());
  expect_close(out32, out64, tolerance_for(dtype::float32), "out");
}

BOOST_AUTO_TEST_CASE(a_column_window_looks_up_one_layer_of_the_per_layer_table) {
  const std::int64_t layers = 3, p = 4, vocab = 7, tokens = 5;
  const auto table = random_buffer(dtype::float64, {vocab, layers * p}, 3);
  const auto ids = random_indices({tokens}, 4, 0, static_cast<std::int32_t>(vocab));
  host_buffer whole(dtype::float64, {tokens, layers * p}), slice(dtype::float64, {tokens, p});
  BOOST_REQUIRE(ops::embedding_forward(ctx, ids, table, 16.0, whole).is_ok());
  for (std::int64_t l = 0; l < layers; ++l) {
    BOOST_REQUIRE(ops::embedding_forward(ctx, ids, table, 16.0, slice, l * p).is_ok());
    for (std::int64_t t = 0; t < tokens; ++t)
      for (std::int64_t j = 0; j < p; ++j) {
        const double want = 16.0 * value_at(table, ids.data<std::int32_t>()[t] * layers * p + l * p + j);
        BOOST_TEST(value_at(slice, t * p + j) == want);
        BOOST_TEST(value_at(whole, t * layers * p + l * p + j) == want);
      }
  }
}

BOOST_AUTO_TEST_CASE(backward_matches_finite_differences_and_accumulates) {
  const auto table = random_buffer(dtype::float64, {7, 5}, 5);
  const auto ids = host_buffer::of<std::int32_t>({6}, {3, 1, 3, 6, 0, 3});  // repeated ids sum
  const auto g = random_buffer(dtype::float64, {6, 5}, 6);
  host_buffer out(dtype::float64, {6, 5}), d_table(dtype::float64, {7, 5});
  auto loss = [&] {
    BOOST_REQUIRE(ops::embedding_forward(ctx, ids, table, 2.5, out).is_ok());
    return weighted_sum(out, g);
  };
  BOOST_REQUIRE(ops::embedding_backward(ctx, ids, g, 2.5, d_table).is_ok());
  check_gradient("d_table", table, loss, d_table);
  for (std::int64_t j = 0; j < 5; ++j) {  // row 3 = 2.5 · (g0 + g2 + g5); rows 2, 4, 5 unseen
    const double want = 2.5 * (value_at(g, j) + value_at(g, 10 + j) + value_at(g, 25 + j));
    BOOST_TEST(value_at(d_table, 15 + j) == want, boost::test_tools::tolerance(1e-14));
    BOOST_TEST(value_at(d_table, 10 + j) == 0.0);
  }
  const auto first = converted(d_table, dtype::float64);
  BOOST_REQUIRE(ops::embedding_backward(ctx, ids, g, 2.5, d_table).is_ok());
  for (std::int64_t i = 0; i < first.numel(); ++i) set_value(first, i, 2 * value_at(first, i));
  expect_close(d_table, first, tolerance_for(dtype::float64), "d_table accumulated twice");
}

BOOST_AUTO_TEST_CASE(backward_in_float32_matches_the_float64_reference) {
  const auto ids = random_indices({40}, 7, 0, 9);
  const auto g = random_buffer(dtype::float64, {40, 300}, 8);  // wider than one column block
  host_buffer d64(dtype::float64, {9, 300}), d32(dtype::float32, {9, 300});
  BOOST_REQUIRE(ops::embedding_backward(ctx, ids, g, 16.0, d64, 0).is_ok());
  BOOST_REQUIRE(ops::embedding_backward(ctx, ids, converted(g, dtype::float32), 16.0, d32, 0).is_ok());
  expect_close(d32, d64, {1e-5, 1e-5}, "d_table");
}

BOOST_AUTO_TEST_CASE(the_padding_row_is_looked_up_but_gets_no_gradient) {
  const auto table = random_buffer(dtype::float64, {5, 4}, 9);
  const auto ids = host_buffer::of<std::int32_t>({4}, {0, 2, 0, 4});
  const auto g = random_buffer(dtype::float64, {4, 4}, 10);
  host_buffer out(dtype::float64, {4, 4});
  BOOST_REQUIRE(ops::embedding_forward(ctx, ids, table, 1.0, out).is_ok());
  BOOST_TEST(value_at(out, 1) == value_at(table, 1));  // token 0 reads row 0
  host_buffer padded(dtype::float64, {5, 4}), plain(dtype::float64, {5, 4});
  for (std::int64_t i = 0; i < padded.numel(); ++i) set_value(padded, i, 0.25);
  for (std::int64_t i = 0; i < plain.numel(); ++i) set_value(plain, i, 0.25);
  BOOST_REQUIRE(ops::embedding_backward(ctx, ids, g, 3.0, padded, 0).is_ok());
  BOOST_REQUIRE(ops::embedding_backward(ctx, ids, g, 3.0, plain).is_ok());
  for (std::int64_t j = 0; j < 4; ++j) {
    BOOST_TEST(value_at(padded, j) == 0.25);  // row 0 untouched
    BOOST_TEST(value_at(plain, j) != 0.25);   // which it would not be without padding
  }
  for (std::int64_t i = 4; i < padded.numel(); ++i) BOOST_TEST(value_at(padded, i) == value_at(plain, i));
}

BOOST_AUTO_TEST_CASE(backward_through_a_column_window_touches_only_those_columns) {
  const auto ids = host_buffer::of<std::int32_t>({2}, {1, 1});
  const auto g = host_buffer::of<double>({2, 2}, {1, 2, 3, 4});
  host_buffer d_table(dtype::float64, {3, 6});
  BOOST_REQUIRE(ops::embedding_backward(ctx, ids, g, 2.0, d_table, std::nullopt, 2).is_ok());
  const std::vector<double> want = {0, 0, 0, 0, 0, 0, 0, 0, 8, 12, 0, 0, 0, 0, 0, 0, 0, 0};
  expect_close(d_table, host_buffer::of<double>({3, 6}, want), {0, 0}, "d_table");
}

BOOST_AUTO_TEST_CASE(an_id_outside_the_vocabulary_is_refused_naming_its_position_and_value) {
  host_buffer table(dtype::float32, {5, 3}), out(dtype::float32, {3, 3}), d_table(dtype::float32, {5, 3});
  const auto high = host_buffer::of<std::int32_t>({3}, {1, 4, 5});
  status s = ops::embedding_forward(ctx, high, table, 1.0, out);
  BOOST_TEST((s.code() == status_code::invalid_argument));
  BOOST_TEST(s.message() == "embedding_forward: ids: position 2 holds 5, outside [0, 5)");
  const auto negative = host_buffer::of<std::int32_t>({3}, {-1, 0, 9});
  s = ops::embedding_backward(ctx, negative, out, 1.0, d_table);
  BOOST_TEST(s.message() == "embedding_backward: ids: position 0 holds -1, outside [0, 5)");
  for (std::int64_t i = 0; i < d_table.numel(); ++i) BOOST_TEST(value_at(d_table, i) == 0.0);
}

BOOST_AUTO_TEST_CASE(ids_with_a_host_mirror_are_checked_on_the_mirror) {
  host_buffer table(dtype::float32, {5, 3}), out(dtype::float32, {3, 3});
  const auto ids = host_buffer::of<std::int32_t>({3}, {1, 4, 2});
  BOOST_TEST(ops::embedding_forward(ctx, ids, table, 1.0, out, 0, ids).is_ok());
  const auto bad_mirror = host_buffer::of<std::int32_t>({3}, {1, 7, 2});
  BOOST_TEST(ops::embedding_forward(ctx, ids, table, 1.0, out, 0, bad_mirror).message() ==
             "embedding_forward: ids: position 1 holds 7, outside [0, 5)");
  const auto short_mirror = host_buffer::of<std::int32_t>({2}, {1, 4});
  BOOST_TEST(ops::embedding_forward(ctx, ids, table, 1.0, out, 0, short_mirror).message() ==
             "embedding_forward: host_ids: expected [3], got I32 [2] cpu");
}

BOOST_AUTO_TEST_CASE(wrong_shapes_dtypes_windows_and_padding_ids_are_refused_naming_the_tensor) {
  host_buffer table(dtype::float32, {5, 3}), out(dtype::float32, {3, 3});
  const auto ids = host_buffer::of<std::int32_t>({3}, {0, 1, 2});
  BOOST_TEST(ops::embedding_forward(ctx, converted(ids, dtype::float32), table, 1.0, out).message() ==
             "embedding_forward: ids: expected dtype int32, got F32 [3] cpu");
  host_buffer short_out(dtype::float32, {2, 3});
  BOOST_TEST(ops::embedding_forward(ctx, ids, table, 1.0, short_out).message() ==
             "embedding_forward: out: expected [3, *], got F32 [2, 3] cpu");
  host_buffer out64(dtype::float64, {3, 3});
  BOOST_TEST(ops::embedding_forward(ctx, ids, table, 1.0, out64).message() ==
             "embedding_forward: out: expected dtype float32, got F64 [3, 3] cpu");
  host_buffer narrow(dtype::float32, {3, 2});
  BOOST_TEST(ops::embedding_forward(ctx, ids, table, 1.0, narrow, 2).message() ==
             "embedding_forward: out: columns [2, 4) fall outside the table's 3 columns");
  BOOST_TEST(ops::embedding_backward(ctx, ids, out, 1.0, table, 5).message() ==
             "embedding_backward: padding_id 5 is outside [0, 5)");
}

BOOST_AUTO_TEST_SUITE_END()
