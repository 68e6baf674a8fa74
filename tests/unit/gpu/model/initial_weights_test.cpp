// Gemma 4's initial weights (gpu/model/initial_weights.h): a slab filled in place holds the very
// bytes `tandem init` wrote for the committed tiny-arithmetic model (seed 1), and initializer_range
// is read or refused by name.
#include <boost/test/unit_test.hpp>

#include <cstring>
#include <filesystem>

#include "gpu/model/checkpoint.h"
#include "gpu/model/initial_weights.h"
#include "gpu/model/json_text.h"

namespace tg = tandem::gpu;

BOOST_AUTO_TEST_SUITE(initial_weights)

BOOST_AUTO_TEST_CASE(a_filled_slab_holds_the_bytes_tandem_init_wrote_for_the_committed_model) {
  const auto dir = std::filesystem::path(TANDEM_SOURCE_DIR) / "configs/models/tiny-arithmetic";
  auto c = tg::open_checkpoint(dir, tg::dtype::float32);
  BOOST_REQUIRE_MESSAGE(c.has_value(), (c.has_value() ? "" : c.error().message()));
  auto loaded = tg::load_checkpoint(*c, tg::device::cpu());
  BOOST_REQUIRE(loaded.has_value());
  auto filled = tg::slab::create("parameters", c->layout.total_bytes(), tg::device::cpu());
  BOOST_REQUIRE(filled.has_value());
  BOOST_REQUIRE(tg::fill_initial_weights(tg::exec_context::cpu(), c->layout, *filled, 1, 0.02).is_ok());
  const auto bytes = [](const tg::slab& s) { return s.view_of(0, tg::dtype::uint8, std::vector<std::int64_t>{s.bytes()})->data(); };
  BOOST_TEST(std::memcmp(bytes(*loaded), bytes(*filled), static_cast<std::size_t>(loaded->bytes())) == 0);
}

BOOST_AUTO_TEST_CASE(initializer_range_defaults_to_two_hundredths_and_must_be_positive) {
  BOOST_TEST(*tg::initializer_range(R"({"hidden_size": 8})", "c.json") == 0.02);
  BOOST_TEST(*tg::initializer_range(R"({"initializer_range": 0.5})", "c.json") == 0.5);
  const auto bad = tg::initializer_range(R"({"initializer_range": -1})", "c.json");
  BOOST_REQUIRE(!bad.has_value());
  BOOST_TEST(bad.error().message() == "c.json: initializer_range must be a positive number");
}

BOOST_AUTO_TEST_SUITE_END()
