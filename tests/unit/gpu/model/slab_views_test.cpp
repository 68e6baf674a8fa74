// Model state addressed through the layout table inside slabs of different element types.
#include <boost/test/unit_test.hpp>

#include <cstdint>
#include <string>

#include "gpu/model/config.h"
#include "gpu/model/slab_views.h"

using namespace tandem::gpu;

namespace {
// The slab's first byte.
void* tg_base(const slab& s, const model_layout& layout) { return view_in(s, layout.tensors.front(), dtype::bfloat16)->data(); }
}  // namespace

BOOST_AUTO_TEST_SUITE(slab_views_test)

BOOST_AUTO_TEST_CASE(every_tensor_of_the_layout_gets_its_own_disjoint_aligned_view) {
  auto config = load_model_config(std::string(TANDEM_SOURCE_DIR) + "/configs/models/tiny-all");
  BOOST_REQUIRE(config.has_value());
  const model_layout layout = build_layout(*config, dtype::float32);
  auto params = slab::create("parameters", slab_bytes(layout, dtype::bfloat16), device::cpu());
  BOOST_REQUIRE(params.has_value());
  char* end = nullptr;
  for (const auto& e : layout.tensors) {
    auto v = view_in(*params, e, dtype::bfloat16);
    BOOST_REQUIRE_MESSAGE(v.has_value(), e.name);
    BOOST_TEST(v->numel() == e.elements());
    BOOST_TEST((v->type() == dtype::bfloat16));
    if (end) BOOST_TEST(static_cast<char*>(v->data()) >= end, e.name << " overlaps the previous tensor");
    const auto from_base = static_cast<char*>(v->data()) - static_cast<char*>(tg_base(*params, layout));
    BOOST_TEST(from_base % 128 == 0, e.name << " is not 128-byte aligned in bfloat16");
    end = static_cast<char*>(v->data()) + v->bytes();
  }
  auto q = layout.find("layers.2.self_attn.q_proj.weight");
  BOOST_REQUIRE(q);
  BOOST_TEST(view_in(*params, *q, dtype::bfloat16)->shape_string() == "[128, 64]");  // 4 heads x 32 on a full layer
}

BOOST_AUTO_TEST_CASE(a_slab_too_small_for_the_layout_is_refused) {
  auto config = load_model_config(std::string(TANDEM_SOURCE_DIR) + "/configs/models/tiny-dense");
  const model_layout layout = build_layout(*config, dtype::float32);
  auto small = slab::create("master", slab_bytes(layout, dtype::bfloat16), device::cpu());  // half of float32
  const auto& last = layout.tensors.back();
  BOOST_TEST(!view_in(*small, last, dtype::float32).has_value());
}

BOOST_AUTO_TEST_SUITE_END()
