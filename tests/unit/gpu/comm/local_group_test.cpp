// The in-process communicator: every collective's result on every rank, typed counts, mismatches.
#include <boost/test/unit_test.hpp>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "gpu/comm/local_group.h"

using namespace tandem::gpu;

namespace {

/// Runs body(comm) on one thread per rank and joins them.
void on_ranks(int n, const std::function<void(communicator&)>& body) {
  auto group = make_local_group(n);
  std::vector<std::thread> threads;
  for (auto& c : group) threads.emplace_back([&body, &c] { body(*c); });
  for (auto& t : threads) t.join();
}

}  // namespace

BOOST_AUTO_TEST_SUITE(local_group_test)

BOOST_AUTO_TEST_CASE(all_reduce_gives_every_rank_the_same_sum) {
  std::vector<std::vector<float>> data(3);
  on_ranks(3, [&](communicator& c) {
    auto& d = data[static_cast<std::size_t>(c.rank())];
    d = {1.0f * static_cast<float>(c.rank()), 0.1f, 10.0f};
    BOOST_REQUIRE(c.all_reduce(std::span<float>(d)).is_ok());
  });
  for (const auto& d : data) {
    BOOST_TEST(d[0] == 3.0f);
    BOOST_TEST(d[2] == 30.0f);
    BOOST_TEST(d[1] == data[0][1]);  // bitwise identical across ranks
  }
}

BOOST_AUTO_TEST_CASE(broadcast_copies_the_root_buffer_to_every_rank) {
  std::vector<std::vector<bfloat16>> data(4);
  on_ranks(4, [&](communicator& c) {
    auto& d = data[static_cast<std::size_t>(c.rank())];
    d.assign(5, to_bfloat16(static_cast<float>(c.rank())));
    BOOST_REQUIRE(c.broadcast(std::span<bfloat16>(d), 2).is_ok());
  });
  for (const auto& d : data)
    for (auto x : d) BOOST_TEST(to_float(x) == 2.0f);
}

BOOST_AUTO_TEST_CASE(all_gather_concatenates_in_rank_order) {
  std::vector<std::vector<std::int32_t>> out(3, std::vector<std::int32_t>(6));
  on_ranks(3, [&](communicator& c) {
    const std::vector<std::int32_t> in{c.rank() * 10, c.rank() * 10 + 1};
    BOOST_REQUIRE(c.all_gather<std::int32_t>(in, std::span<std::int32_t>(out[static_cast<std::size_t>(c.rank())])).is_ok());
  });
  for (const auto& o : out) BOOST_TEST((o == std::vector<std::int32_t>{0, 1, 10, 11, 20, 21}));
}

BOOST_AUTO_TEST_CASE(reduce_scatter_leaves_each_rank_its_shard_of_the_sum) {
  std::vector<std::vector<double>> out(2, std::vector<double>(2));
  on_ranks(2, [&](communicator& c) {
    const double r = c.rank();
    const std::vector<double> in{1 + r, 2 + r, 3 + r, 4 + r};
    BOOST_REQUIRE(c.reduce_scatter<double>(in, std::span<double>(out[static_cast<std::size_t>(c.rank())])).is_ok());
  });
  BOOST_TEST((out[0] == std::vector<double>{3, 5}));
  BOOST_TEST((out[1] == std::vector<double>{7, 9}));
}

BOOST_AUTO_TEST_CASE(ranks_passing_different_counts_all_get_an_error) {
  std::vector<std::string> errors(2);
  on_ranks(2, [&](communicator& c) {
    std::vector<float> d(static_cast<std::size_t>(3 + c.rank()));
    errors[static_cast<std::size_t>(c.rank())] = c.all_reduce(std::span<float>(d)).message();
  });
  BOOST_TEST(errors[0] == "all_reduce: rank 1 passed 4 elements, rank 0 3");
  BOOST_TEST(errors[1] == "all_reduce: rank 0 passed 3 elements, rank 1 4");
}

BOOST_AUTO_TEST_CASE(gather_output_of_the_wrong_size_is_refused_before_any_exchange) {
  auto group = make_local_group(2);
  std::vector<float> in(3), out(5);
  const status s = group[0]->all_gather<float>(in, std::span<float>(out));
  BOOST_TEST(s.message() == "all_gather: output size must be the input size times the group size (or its inverse)");
}

BOOST_AUTO_TEST_CASE(a_bad_broadcast_root_fails_on_every_rank_without_hanging) {
  std::vector<std::string> errors(2);
  on_ranks(2, [&](communicator& c) {
    std::vector<float> d(4);
    errors[static_cast<std::size_t>(c.rank())] = c.broadcast(std::span<float>(d), 5).message();
  });
  BOOST_TEST(errors[0] == "broadcast: root 5 is not a rank");
  BOOST_TEST(errors[1] == "broadcast: root 5 is not a rank");
}

BOOST_AUTO_TEST_CASE(bytes_are_broadcast_and_gathered_as_bytes_with_no_padding) {
  static_assert(dtype_of<std::byte>() == dtype::uint8 && dtype_of<std::uint8_t>() == dtype::uint8);
  static_assert(size_of(dtype::uint8) == 1 && to_string(dtype::uint8) == "uint8");
  // 7 bytes: not a whole number of words of any wider type
  std::vector<std::vector<std::byte>> data(3, std::vector<std::byte>(7));
  std::vector<std::vector<std::uint8_t>> gathered(3, std::vector<std::uint8_t>(9));
  on_ranks(3, [&](communicator& c) {
    const auto r = static_cast<std::size_t>(c.rank());
    for (std::size_t i = 0; i < 7; ++i) data[r][i] = static_cast<std::byte>(c.rank() == 1 ? 0xf0 + i : 0);
    BOOST_REQUIRE(c.broadcast(std::span<std::byte>(data[r]), 1).is_ok());
    const std::vector<std::uint8_t> in{static_cast<std::uint8_t>(r), 0xff, static_cast<std::uint8_t>(0x80 + r)};
    BOOST_REQUIRE(c.all_gather<std::uint8_t>(in, std::span<std::uint8_t>(gathered[r])).is_ok());
  });
  for (const auto& d : data)
    for (std::size_t i = 0; i < 7; ++i) BOOST_TEST(std::to_integer<int>(d[i]) == static_cast<int>(0xf0 + i));
  for (const auto& g : gathered)
    BOOST_TEST((g == std::vector<std::uint8_t>{0, 0xff, 0x80, 1, 0xff, 0x81, 2, 0xff, 0x82}));
}

BOOST_AUTO_TEST_CASE(a_reduction_over_bytes_is_refused_on_every_rank_naming_the_op_and_the_dtype) {
  std::vector<std::string> reduce_errors(2), scatter_errors(2);
  std::vector<std::vector<std::byte>> data(2, std::vector<std::byte>(4, std::byte{3}));
  on_ranks(2, [&](communicator& c) {
    const auto r = static_cast<std::size_t>(c.rank());
    const status s = c.all_reduce(std::span<std::byte>(data[r]));
    BOOST_TEST((s.code() == status_code::invalid_argument));
    reduce_errors[r] = s.message();
    std::vector<std::byte> out(2);
    scatter_errors[r] = c.reduce_scatter<std::byte>(data[r], std::span<std::byte>(out)).message();
    // the group stays in step: a broadcast after the refusals works
    std::vector<float> f(2, static_cast<float>(c.rank()));
    BOOST_REQUIRE(c.broadcast(std::span<float>(f), 0).is_ok());
    BOOST_TEST(f[1] == 0.0f);
  });
  for (const auto& e : reduce_errors)
    BOOST_TEST(e == "all_reduce: uint8 elements are opaque bytes and cannot be reduced (broadcast and all_gather move them)");
  for (const auto& e : scatter_errors)
    BOOST_TEST(e == "reduce_scatter: uint8 elements are opaque bytes and cannot be reduced (broadcast and all_gather move them)");
  for (const auto& d : data) BOOST_TEST((d == std::vector<std::byte>(4, std::byte{3})));  // untouched
}

BOOST_AUTO_TEST_SUITE_END()
