// The NCCL group at world size 1 on cuda:0 (gpu/comm/nccl_group.h): it forms from its own id, and
// every collective keeps the contract of communicator.h on device memory (a group of one: the
// reduction is the input, the gather is the input, the broadcast keeps the root's data); bytes
// have no sum. The multi-rank tests need two GPUs (the refit issue).
#include <boost/test/unit_test.hpp>

#include <vector>

#include "gpu/comm/nccl_group.h"
#include "gpu/core/device_buffer.h"
#include "gpu/core/memory.h"

namespace tg = tandem::gpu;

namespace {

const tg::exec_context on_cuda{tg::device::cuda(0), {}, nullptr};

std::vector<float> read(const tg::device_buffer& b) {
  auto out = b.read<float>(on_cuda);
  BOOST_REQUIRE(out.has_value());
  return *out;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(nccl_group)

BOOST_AUTO_TEST_CASE(a_group_of_one_forms_from_its_id_and_keeps_every_collective_contract) {
  const auto id = tg::nccl_group::make_id();
  BOOST_REQUIRE_MESSAGE(id.has_value(), (id.has_value() ? "" : id.error().message()));
  auto g = tg::nccl_group::create(on_cuda, *id, 0, 1, 60);
  BOOST_REQUIRE_MESSAGE(g.has_value(), (g.has_value() ? "" : g.error().message()));
  tg::communicator& c = **g;
  BOOST_TEST(c.rank() == 0);
  BOOST_TEST(c.size() == 1);
  BOOST_TEST((c.context().dev == tg::device::cuda(0)));

  const std::vector<float> values{1.5f, -2.0f, 3.25f, 0.0f, 7.0f};
  tg::device_buffer a, out;
  BOOST_REQUIRE(tg::allocate_buffers(on_cuda, tg::dtype::float32, {{&a, {5}}, {&out, {5}}}).is_ok());
  BOOST_REQUIRE(tg::copy_to_device(on_cuda, a.data<float>(), values.data(), 20).is_ok());
  BOOST_REQUIRE(c.all_reduce(std::span<float>(a.data<float>(), 5)).is_ok());
  BOOST_TEST((read(a) == values));
  BOOST_REQUIRE(c.all_reduce(std::span<float>(a.data<float>(), 5), tg::reduce_op::max).is_ok());
  BOOST_TEST((read(a) == values));
  BOOST_REQUIRE(c.broadcast(std::span<float>(a.data<float>(), 5), 0).is_ok());
  BOOST_TEST((read(a) == values));
  BOOST_REQUIRE(c.all_gather<float>(std::span<const float>(a.data<float>(), 5), std::span<float>(out.data<float>(), 5)).is_ok());
  BOOST_TEST((read(out) == values));
  BOOST_REQUIRE(c.reduce_scatter<float>(std::span<const float>(a.data<float>(), 5), std::span<float>(out.data<float>(), 5)).is_ok());
  BOOST_TEST((read(out) == values));

  const tg::status bytes = c.all_reduce(std::span<std::byte>(a.data<std::byte>(), 4));
  BOOST_TEST((bytes.code() == tg::status_code::invalid_argument));
  BOOST_TEST(bytes.message() == "all_reduce: bytes (uint8) have no sum");
  BOOST_TEST(!c.broadcast(std::span<float>(a.data<float>(), 5), 1).is_ok(), "root 1 is not a rank of a group of one");
}

BOOST_AUTO_TEST_SUITE_END()
