// Tests of the placement plan (orchestration/topology/placement.h): which member process, on which
// node and device, hosts which actors, with its data-parallel and rollout ranks, for colocated,
// one-node dedicated and multi-node dedicated recipes; the control endpoint; the data-parallel size.
#include "orchestration/topology/placement.h"

#include <boost/test/unit_test.hpp>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>

#include "orchestration/config/resolve.h"
#include "support/temp_dir.h"

namespace fs = std::filesystem;
using tandem::test::temp_dir;
namespace tc = tandem::config;
namespace tt = tandem::topology;

namespace {

/// A fresh folder under the system temp directory, removed with its contents at scope exit.

/// The typed configuration of a recipe made of `yaml` (a valid recipe; the test stops otherwise).
tc::recipe_config resolve_text(const std::string& yaml) {
  const temp_dir dir;
  const fs::path file = dir.path() / "recipe.yaml";
  std::ofstream(file) << "policy:\n  model_name: tiny-all\n" << yaml;
  const tc::resolution r = tc::resolve_recipe(file.string());
  BOOST_REQUIRE_MESSAGE(r.errors.empty(), tc::to_string(r.errors));
  return r.recipe->config;
}

tc::recipe_config resolve_shipped(const std::string& name) {
  const tc::resolution r = tc::resolve_recipe(std::string(TANDEM_SOURCE_DIR) + "/configs/recipes/" + name);
  BOOST_REQUIRE_MESSAGE(r.errors.empty(), tc::to_string(r.errors));
  return r.recipe->config;
}

/// Checks one member against the expected placement.
void check_member(const tt::member_plan& w, std::int64_t rank, std::int64_t node, std::int64_t device, bool policy,
                  bool rollout, std::int64_t dp_rank, std::int64_t rollout_rank) {
  BOOST_TEST_CONTEXT("member " << rank) {
    BOOST_TEST(w.rank == rank);
    BOOST_TEST(w.node == node);
    BOOST_TEST(w.device == device);
    BOOST_TEST(w.hosts_policy == policy);
    BOOST_TEST(w.hosts_rollout == rollout);
    BOOST_TEST(w.data_parallel_rank == dp_rank);
    BOOST_TEST(w.rollout_rank == rollout_rank);
  }
}

}  // namespace

BOOST_AUTO_TEST_SUITE(placement_test)

BOOST_AUTO_TEST_CASE(every_colocated_member_on_one_node_hosts_both_actors_with_ranks_in_device_order) {
  const tt::placement_plan p = tt::plan_placement(resolve_text("cluster:\n  gpus_per_node: 4\n"));
  BOOST_TEST(p.sizes.colocated);
  BOOST_TEST(p.sizes.data_parallel_size == 4);
  BOOST_TEST(p.sizes.generation_devices == 4);
  BOOST_REQUIRE_EQUAL(p.members.size(), 4u);
  for (std::int64_t i = 0; i < 4; ++i)
    check_member(p.members[static_cast<std::size_t>(i)], i, 0, i, true, true, i, i);
}

BOOST_AUTO_TEST_CASE(dedicated_generation_on_one_node_trains_on_the_first_devices_and_generates_on_the_last) {
  const tt::placement_plan p = tt::plan_placement(resolve_text(
      "  generation:\n    colocated:\n      enabled: false\n      resources:\n        gpus_per_node: 2\n"
      "cluster:\n  gpus_per_node: 6\n"));
  BOOST_TEST(!p.sizes.colocated);
  BOOST_TEST(p.sizes.training_devices == 4);
  BOOST_TEST(p.sizes.generation_devices == 2);
  BOOST_REQUIRE_EQUAL(p.members.size(), 6u);
  for (std::int64_t i = 0; i < 4; ++i) check_member(p.members[static_cast<std::size_t>(i)], i, 0, i, true, false, i, -1);
  check_member(p.members[4], 4, 0, 4, false, true, -1, 0);
  check_member(p.members[5], 5, 0, 5, false, true, -1, 1);
}

BOOST_AUTO_TEST_CASE(dedicated_generation_on_several_nodes_puts_whole_training_nodes_first_then_rollout_nodes) {
  const tt::placement_plan p = tt::plan_placement(resolve_text(
      "  generation:\n    colocated:\n      enabled: false\n      resources:\n        num_nodes: 1\n"
      "cluster:\n  num_nodes: 3\n  gpus_per_node: 4\n"));
  BOOST_TEST(p.sizes.training_nodes == 2);
  BOOST_TEST(p.sizes.generation_nodes == 1);
  BOOST_REQUIRE_EQUAL(p.members.size(), 12u);
  for (std::int64_t r = 0; r < 8; ++r)
    check_member(p.members[static_cast<std::size_t>(r)], r, r / 4, r % 4, true, false, r, -1);
  for (std::int64_t r = 8; r < 12; ++r)
    check_member(p.members[static_cast<std::size_t>(r)], r, 2, r % 4, false, true, -1, r - 8);
}

BOOST_AUTO_TEST_CASE(two_rollout_nodes_out_of_three_leave_one_training_node) {
  const tt::placement_plan p = tt::plan_placement(resolve_text(
      "  generation:\n    colocated:\n      enabled: false\n      resources:\n        num_nodes: 2\n"
      "cluster:\n  num_nodes: 3\n  gpus_per_node: 2\n"));
  BOOST_REQUIRE_EQUAL(p.members.size(), 6u);
  check_member(p.members[0], 0, 0, 0, true, false, 0, -1);
  check_member(p.members[1], 1, 0, 1, true, false, 1, -1);
  for (std::int64_t r = 2; r < 6; ++r)
    check_member(p.members[static_cast<std::size_t>(r)], r, r / 2, r % 2, false, true, -1, r - 2);
}

BOOST_AUTO_TEST_CASE(colocated_members_on_several_nodes_are_ranked_node_major) {
  const tt::placement_plan p = tt::plan_placement(resolve_text("cluster:\n  num_nodes: 2\n  gpus_per_node: 4\n"));
  BOOST_REQUIRE_EQUAL(p.members.size(), 8u);
  for (std::int64_t r = 0; r < 8; ++r)
    check_member(p.members[static_cast<std::size_t>(r)], r, r / 4, r % 4, true, true, r, r);
}

BOOST_AUTO_TEST_CASE(the_control_endpoint_is_tcp_to_the_controller_host_and_port) {
  BOOST_TEST(tt::plan_placement(resolve_text("")).control_endpoint == "tcp://127.0.0.1:29650");
  const tt::placement_plan p =
      tt::plan_placement(resolve_text("cluster:\n  controller_host: node-07.cluster\n  controller_port: 31000\n"));
  BOOST_TEST(p.control_endpoint == "tcp://node-07.cluster:31000");
}

BOOST_AUTO_TEST_CASE(the_data_parallel_size_counts_the_training_devices) {
  BOOST_TEST(tt::plan_placement(resolve_text("cluster:\n  num_nodes: 2\n")).sizes.data_parallel_size == 16);
  BOOST_TEST(tt::plan_placement(resolve_shipped("tiny-fake-cpu.yaml")).sizes.data_parallel_size == 2);
  BOOST_TEST(tt::plan_placement(resolve_shipped("tiny-fake-cpu-dedicated.yaml")).sizes.data_parallel_size == 2);
  BOOST_TEST(tt::plan_placement(resolve_shipped("dapo-gemma4-12b-3n8g-dedicated.yaml")).sizes.data_parallel_size == 16);
  BOOST_TEST(tt::plan_placement(resolve_shipped("dapo-gemma4-31b-6n8g-dedicated.yaml")).sizes.data_parallel_size == 32);
  BOOST_TEST(tt::plan_placement(resolve_shipped("dapo-gemma4-31b-4n8g-colocated.yaml")).sizes.data_parallel_size == 32);
}

BOOST_AUTO_TEST_CASE(the_plan_carries_the_worlds_of_the_recipe) {
  const tc::recipe_config c = resolve_shipped("dapo-gemma4-e4b-2n8g-dedicated.yaml");
  const tt::worlds w = tt::compute_worlds(c);
  const tt::placement_plan p = tt::plan_placement(c);
  BOOST_TEST(p.sizes.training_devices == w.training_devices);
  BOOST_TEST(p.sizes.generation_devices == w.generation_devices);
  BOOST_TEST(p.sizes.data_parallel_size == 8);
  std::int64_t policy = 0, rollout = 0;
  for (const auto& member : p.members) {
    policy += member.hosts_policy ? 1 : 0;
    rollout += member.hosts_rollout ? 1 : 0;
  }
  BOOST_TEST(policy == 8);
  BOOST_TEST(rollout == 8);
}

BOOST_AUTO_TEST_SUITE_END()
