// upload_batch (gpu/core/upload_batch.h): arrays added on the host arrive on the device in one
// copy, each readable on both sides with its shape; the staging grows across batches and keeps
// every earlier array of a batch; a batch is not added to once sent; a shape that does not hold
// the values is refused.
#include <boost/test/unit_test.hpp>

#include <numeric>
#include <vector>

#include "gpu/core/upload_batch.h"

namespace tg = tandem::gpu;

namespace {

std::vector<std::int32_t> values_of(const tg::tensor& t) {
  const auto* p = t.as<std::int32_t>();
  return {p, p + t.numel()};
}

}  // namespace

BOOST_AUTO_TEST_SUITE(upload_batch_test)

BOOST_AUTO_TEST_CASE(arrays_arrive_on_the_device_with_their_shapes_and_stay_readable_on_the_host) {
  const tg::exec_context ctx = tg::exec_context::cpu();
  tg::upload_batch u(ctx.dev);
  for (int round = 0; round < 3; ++round) {
    BOOST_REQUIRE(u.begin(ctx).is_ok());
    std::vector<std::int32_t> tokens(5 + 3000 * round), table(6, -1);
    std::iota(tokens.begin(), tokens.end(), round);
    table[2] = 7;
    const auto a = u.add(tokens, {static_cast<std::int64_t>(tokens.size())});
    const auto b = u.add(table, {2, 3});
    const auto empty = u.add({}, {0});
    BOOST_REQUIRE(a.has_value() && b.has_value() && empty.has_value());
    BOOST_REQUIRE(u.send(ctx).is_ok());
    u.mark_complete();
    BOOST_TEST(values_of(u.on_device(*a)) == tokens, "round " << round);
    BOOST_TEST(values_of(u.host(*a)) == tokens);
    BOOST_TEST(values_of(u.on_device(*b)) == table);
    BOOST_TEST(u.on_device(*b).dim(0) == 2);
    BOOST_TEST(u.on_device(*b).dim(1) == 3);
    BOOST_TEST(u.on_device(*empty).numel() == 0);
    BOOST_TEST(reinterpret_cast<std::uintptr_t>(u.on_device(*b).data()) % 16 == 0u, "16-byte aligned");
  }
}

BOOST_AUTO_TEST_CASE(a_sent_batch_takes_no_more_arrays_and_a_shape_must_hold_the_values) {
  const tg::exec_context ctx = tg::exec_context::cpu();
  tg::upload_batch u(ctx.dev);
  BOOST_REQUIRE(u.begin(ctx).is_ok());
  const std::vector<std::int32_t> v{1, 2, 3};
  BOOST_TEST(u.add(v, {2}).error().message() == "upload_batch::add: 3 values for a shape of 2 elements");
  BOOST_REQUIRE(u.add(v, {3}).has_value());
  BOOST_REQUIRE(u.send(ctx).is_ok());
  BOOST_TEST(u.add(v, {3}).error().message() == "upload_batch::add: the batch was sent (begin() a new one)");
  BOOST_REQUIRE(u.begin(ctx).is_ok());  // in flight: begin waits, then takes arrays again
  BOOST_TEST(u.add(v, {3}).has_value());
  const tg::exec_context cuda{tg::device::cuda(0), {}, nullptr};
  BOOST_TEST(u.send(cuda).message() == "upload_batch::send: the staging is for cpu, the context runs on cuda:0");
}

BOOST_AUTO_TEST_SUITE_END()
