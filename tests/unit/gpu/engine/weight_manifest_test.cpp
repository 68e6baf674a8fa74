// Refit manifest checks and bucket plans.
#include <boost/test/unit_test.hpp>

#include <algorithm>

#include "gpu/engine/weight_manifest.h"

using namespace tandem::gpu;

namespace {
weight_manifest sample() {
  return {{"a", {4, 4}, dtype::bfloat16},   // 32 bytes
          {"b", {10}, dtype::float32},      // 40 bytes
          {"c", {3}, dtype::bfloat16}};     // 6 bytes
}
}  // namespace

BOOST_AUTO_TEST_SUITE(weight_manifest_test)

BOOST_AUTO_TEST_CASE(buckets_cut_the_tensor_stream_into_equal_byte_ranges) {
  const bucket_plan plan(sample(), 30);
  BOOST_TEST(plan.total_bytes() == 78);
  BOOST_TEST(plan.bucket_count() == 3u);
  BOOST_TEST(plan.bucket_size(2) == 18);
  const auto b0 = plan.pieces(0);
  BOOST_REQUIRE(b0.size() == 1u);  // a alone, first 30 of its 32 bytes
  BOOST_TEST(b0[0].bytes == 30);
  const auto b1 = plan.pieces(1);
  BOOST_REQUIRE(b1.size() == 2u);  // the rest of a, then 28 bytes of b
  BOOST_TEST(b1[0].entry == 0u);
  BOOST_TEST(b1[0].entry_offset == 30);
  BOOST_TEST(b1[0].bytes == 2);
  BOOST_TEST(b1[1].entry == 1u);
  BOOST_TEST(b1[1].bucket_offset == 2);
  BOOST_TEST(b1[1].bytes == 28);
  const auto b2 = plan.pieces(2);
  BOOST_REQUIRE(b2.size() == 2u);
  BOOST_TEST(b2[1].entry == 2u);
  BOOST_TEST(b2[1].bucket_offset == 12);
}

BOOST_AUTO_TEST_CASE(every_byte_of_every_tensor_is_in_exactly_one_bucket) {
  const auto m = sample();
  for (std::int64_t size : {1, 7, 32, 78, 1000}) {
    const bucket_plan plan(m, size);
    std::vector<int> seen(78, 0);
    std::int64_t base[] = {0, 32, 72};
    for (std::size_t b = 0; b < plan.bucket_count(); ++b)
      for (const auto& p : plan.pieces(b))
        for (std::int64_t i = 0; i < p.bytes; ++i) ++seen[static_cast<std::size_t>(base[p.entry] + p.entry_offset + i)];
    BOOST_TEST(std::count(seen.begin(), seen.end(), 1) == 78, "bucket size " << size);
  }
}

BOOST_AUTO_TEST_CASE(a_manifest_that_differs_is_refused_at_the_first_difference) {
  auto theirs = sample();
  BOOST_TEST(check_manifest(sample(), theirs).is_ok());
  theirs[1].shape = {11};
  BOOST_TEST(check_manifest(sample(), theirs).message() == "manifest entry 1: b: shape [11] vs [10]");
  theirs = sample();
  theirs[2].type = dtype::float32;
  BOOST_TEST(check_manifest(sample(), theirs).message() == "manifest entry 2: c: dtype float32 vs bfloat16");
  theirs = sample();
  theirs.pop_back();
  BOOST_TEST(check_manifest(sample(), theirs).message() == "manifest has 2 entries, expected 3");
}

BOOST_AUTO_TEST_SUITE_END()
