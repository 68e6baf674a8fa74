// Slabs: views by offset, and release / offload / restore keeping or dropping contents.
#include <boost/test/unit_test.hpp>

#include "gpu/core/slab.h"

using namespace tandem::gpu;

BOOST_AUTO_TEST_SUITE(slab_test)

BOOST_AUTO_TEST_CASE(offload_then_restore_keeps_the_contents) {
  auto s = slab::create("parameters", 64 * 4, device::cpu());
  BOOST_REQUIRE(s.has_value());
  auto v = s->view(16, dtype::float32, {4, 4});
  BOOST_REQUIRE(v.has_value());
  for (int i = 0; i < 16; ++i) v->as<float>()[i] = static_cast<float>(i) * 0.5f;
  BOOST_REQUIRE(s->offload().is_ok());
  BOOST_TEST((s->state() == slab_state::offloaded));
  BOOST_TEST(!s->view(0, dtype::float32, {1}).has_value());
  BOOST_REQUIRE(s->restore().is_ok());
  auto again = s->view(16, dtype::float32, {4, 4});
  for (int i = 0; i < 16; ++i) BOOST_TEST(again->as<float>()[i] == static_cast<float>(i) * 0.5f);
}

BOOST_AUTO_TEST_CASE(the_host_memory_of_an_offload_serves_the_next_one_until_release) {
  auto s = slab::create("moments", 64, device::cpu());
  BOOST_REQUIRE(s.has_value());
  BOOST_TEST(s->host_bytes() == 0);
  for (float value : {1.5f, -2.0f}) {
    s->view(0, dtype::float32, {16})->as<float>()[5] = value;
    BOOST_REQUIRE(s->offload().is_ok());
    BOOST_TEST(s->host_bytes() == 64);
    BOOST_REQUIRE(s->restore().is_ok());
    BOOST_TEST(s->host_bytes() == 64, "kept for the next offload");
    BOOST_TEST(s->view(0, dtype::float32, {16})->as<float>()[5] == value, "the second offload copied afresh");
  }
  BOOST_REQUIRE(s->release().is_ok());
  BOOST_TEST(s->host_bytes() == 0);
}

BOOST_AUTO_TEST_CASE(release_then_restore_gives_zeroed_memory) {
  auto s = slab::create("activations", 32, device::cpu());
  BOOST_REQUIRE(s.has_value());
  s->view(0, dtype::float32, {8})->as<float>()[3] = 7.0f;
  BOOST_REQUIRE(s->release().is_ok());
  BOOST_TEST((s->state() == slab_state::released));
  BOOST_REQUIRE(s->restore().is_ok());
  BOOST_TEST(s->view(0, dtype::float32, {8})->as<float>()[3] == 0.0f);
}

BOOST_AUTO_TEST_CASE(a_view_past_the_end_is_refused_with_the_slab_name) {
  auto s = slab::create("gradients", 40, device::cpu());
  auto v = s->view(8, dtype::float32, {3, 3});
  BOOST_REQUIRE(!v.has_value());
  BOOST_TEST(v.error().message() == "slab gradients: view of 36 bytes at 8 exceeds its 40 bytes");
}

BOOST_AUTO_TEST_CASE(offloading_a_released_slab_is_refused_and_changes_nothing) {
  auto s = slab::create("optimizer", 16, device::cpu());
  BOOST_REQUIRE(s->release().is_ok());
  const status st = s->offload();
  BOOST_TEST(!st.is_ok());
  BOOST_TEST((s->state() == slab_state::released));
}

BOOST_AUTO_TEST_CASE(moving_a_slab_moves_ownership) {
  auto s = slab::create("x", 16, device::cpu());
  slab moved = std::move(*s);
  BOOST_TEST((moved.state() == slab_state::resident));
  BOOST_TEST((s->state() == slab_state::released));
}

BOOST_AUTO_TEST_SUITE_END()
