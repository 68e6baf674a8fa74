// The NCCL group's refusals that need no GPU (gpu/comm/nccl_group.h): a CPU context, a rank
// outside the group, a timeout that is not positive. Its collectives run in the gpu tests.
#include <boost/test/unit_test.hpp>

#include "gpu/comm/nccl_group.h"

namespace tg = tandem::gpu;

BOOST_AUTO_TEST_SUITE(nccl_group_refusals)

BOOST_AUTO_TEST_CASE(a_cpu_context_a_rank_outside_the_group_or_no_timeout_is_refused_by_name) {
  const tg::nccl_unique_id id;
  const tg::exec_context cuda{tg::device::cuda(0), {}, nullptr};
  const auto on_cpu = tg::nccl_group::create(tg::exec_context::cpu(), id, 0, 1);
  BOOST_REQUIRE(!on_cpu.has_value());
#if TANDEM_HAVE_CUDA
  BOOST_TEST(on_cpu.error().message() == "nccl_group: runs on a CUDA device, the context is the CPU");
  const auto rank = tg::nccl_group::create(cuda, id, 2, 2);
  BOOST_REQUIRE(!rank.has_value());
  BOOST_TEST(rank.error().message() == "nccl_group: rank 2 of 2 is not a rank of the group");
  const auto timeout = tg::nccl_group::create(cuda, id, 0, 1, 0);
  BOOST_REQUIRE(!timeout.has_value());
  BOOST_TEST(timeout.error().message() == "nccl_group: the timeout must be positive");
#else
  BOOST_TEST(on_cpu.error().message() == "nccl_group: this build has no CUDA backend");
  (void)cuda;
#endif
}

BOOST_AUTO_TEST_SUITE_END()
