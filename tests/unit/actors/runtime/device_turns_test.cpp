// A colocated member's device turns (actors/runtime/device_turns.hpp) over the Gemma 4 CPU engines
// of a test checkpoint: the generator made in the generation turn after the optimizer state left,
// each turn's handover, the no-op of a turn taken twice, and the figures each turn adds.
#include "actors/runtime/device_turns.hpp"

#include <boost/test/unit_test.hpp>

#include <filesystem>
#include <memory>
#include <string>

#include "gpu/engine/gemma4_generate_engine.h"
#include "gpu/engine/gemma4_train_engine.h"
#include "gpu/model/checkpoint.h"

namespace tg = tandem::gpu;
namespace fs = std::filesystem;

namespace {

const fs::path checkpoint = fs::path(TANDEM_SOURCE_DIR) / "tests/data/reference/sliding_only";

std::shared_ptr<tg::gemma4_train_engine> trainer() {
  auto source = tg::open_checkpoint(checkpoint, tg::dtype::float32);
  BOOST_TEST_REQUIRE(bool(source), (source ? "" : source.error().message()));
  auto e = tg::gemma4_train_engine::create(tg::exec_context::cpu(), std::move(*source), {});
  BOOST_TEST_REQUIRE(bool(e), (e ? "" : e.error().message()));
  return std::shared_ptr<tg::gemma4_train_engine>(std::move(*e));
}

/// The turns of `train` with a generator over its weights; `seen` records the trainer's state as
/// the generator was made.
std::shared_ptr<tandem::device_turns> turns_of(const std::shared_ptr<tg::gemma4_train_engine>& train, bool offload,
                                               tg::train_memory_state* seen = nullptr) {
  const auto make = [&]() -> tg::result<std::shared_ptr<tg::generate_engine>> {
    if (seen) *seen = train->memory_state();
    auto source = tg::open_checkpoint(checkpoint, tg::dtype::float32);
    if (!source) return source.error();
    auto e = tg::gemma4_generate_engine::create_sharing(tg::exec_context::cpu(), std::move(*source), train->shared_weights(), {});
    if (!e) return e.error();
    return std::shared_ptr<tg::generate_engine>(std::move(*e));
  };
  auto t = tandem::device_turns::create(train, make, tg::exec_context::cpu(), offload);
  BOOST_TEST_REQUIRE(bool(t), (t ? "" : t.error().message()));
  return *t;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(device_turns_test)

BOOST_AUTO_TEST_CASE(the_generator_is_made_in_the_generation_turn_after_the_optimizer_state_left_and_that_turn_is_kept_apart) {
  const auto train = trainer();
  auto seen = tg::train_memory_state::resident;
  const auto turns = turns_of(train, true, &seen);
  BOOST_TEST((seen == tg::train_memory_state::offloaded), "the KV cache was made beside the optimizer state");
  BOOST_TEST(turns->generator()->cache_resident());
  const tandem::plain::device_turn_figures& start = turns->startup_figures();
  BOOST_TEST(start.offloads == 1u);
  BOOST_TEST(start.offloaded_bytes == static_cast<std::uint64_t>(train->offloaded_state_bytes()));
  BOOST_TEST(train->offloaded_state_bytes() > 0);  // AdamW's two float32 moments
  BOOST_TEST(start.host_link_gb_per_s > 0);
  const auto f = turns->take_figures();  // the first step's: the start-up offload is not in them
  BOOST_TEST(f.offloads == 0u);
  BOOST_TEST(f.offloaded_bytes == 0u);
  BOOST_TEST(f.host_link_gb_per_s > 0);
}

BOOST_AUTO_TEST_CASE(the_training_turn_frees_the_cache_and_brings_the_state_back_and_a_turn_taken_twice_does_nothing) {
  const auto train = trainer();
  const auto turns = turns_of(train, true);
  (void)turns->take_figures();
  BOOST_REQUIRE(turns->for_training().is_ok());
  BOOST_TEST(!turns->generator()->cache_resident());
  BOOST_TEST((train->memory_state() == tg::train_memory_state::resident));
  BOOST_REQUIRE(turns->for_training().is_ok());
  auto f = turns->take_figures();
  BOOST_TEST(f.restores == 1u);
  BOOST_TEST(f.restored_bytes == static_cast<std::uint64_t>(train->offloaded_state_bytes()));
  BOOST_TEST(f.cache_release_seconds > 0);
  BOOST_REQUIRE(turns->for_generation().is_ok());
  BOOST_REQUIRE(turns->for_generation().is_ok());
  BOOST_TEST((train->memory_state() == tg::train_memory_state::offloaded));
  BOOST_TEST(turns->generator()->cache_resident());
  f = turns->take_figures();
  BOOST_TEST(f.offloads == 1u);
  BOOST_TEST(f.restores == 0u);
  BOOST_TEST(f.cache_restore_seconds > 0);
  BOOST_TEST(f.host_link_gb_per_s > 0, "the host link, measured once, comes with every take");
  BOOST_TEST(f.training_in_use_bytes == 0u);  // the CPU's device memory is the host's: not measured
}

BOOST_AUTO_TEST_CASE(without_offloading_only_the_kv_cache_changes_hands) {
  const auto train = trainer();
  const auto turns = turns_of(train, false);
  for (int round = 0; round < 2; ++round) {
    BOOST_REQUIRE(turns->for_training().is_ok());
    BOOST_TEST((train->memory_state() == tg::train_memory_state::resident));
    BOOST_TEST(!turns->generator()->cache_resident());
    BOOST_REQUIRE(turns->for_generation().is_ok());
    BOOST_TEST((train->memory_state() == tg::train_memory_state::resident));
    BOOST_TEST(turns->generator()->cache_resident());
  }
  const auto f = turns->take_figures();
  BOOST_TEST(f.offloads == 0u);
  BOOST_TEST(f.restores == 0u);
  BOOST_TEST(f.host_link_gb_per_s == 0.0);
  BOOST_TEST(f.cache_release_seconds > 0);
}

BOOST_AUTO_TEST_CASE(a_generator_that_cannot_be_made_fails_the_turns_saying_why) {
  const auto train = trainer();
  const auto make = []() -> tg::result<std::shared_ptr<tg::generate_engine>> {
    return tg::status{tg::status_code::out_of_memory, "the KV cache: 12 bytes did not fit"};
  };
  const auto t = tandem::device_turns::create(train, make, tg::exec_context::cpu(), true);
  BOOST_TEST_REQUIRE(!t);
  BOOST_TEST((t.error().code() == tg::status_code::out_of_memory));
  BOOST_TEST(t.error().message() == "the KV cache: 12 bytes did not fit");
}

BOOST_AUTO_TEST_SUITE_END()
