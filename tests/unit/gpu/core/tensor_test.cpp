// Tensor views: geometry, reshapes, row slices, descriptions.
#include <boost/test/unit_test.hpp>

#include "gpu/core/host_buffer.h"

using namespace tandem::gpu;

BOOST_AUTO_TEST_SUITE(tensor_test)

BOOST_AUTO_TEST_CASE(a_contiguous_view_has_row_major_strides) {
  host_buffer b(dtype::float32, {2, 3, 4});
  const tensor t = b;
  BOOST_TEST(t.rank() == 3);
  BOOST_TEST(t.numel() == 24);
  BOOST_TEST(t.bytes() == 96);
  BOOST_TEST(t.stride(0) == 12);
  BOOST_TEST(t.stride(-1) == 1);
  BOOST_TEST(t.dim(-1) == 4);
  BOOST_TEST(t.is_contiguous());
  BOOST_TEST(t.describe() == "F32 [2, 3, 4] cpu");
}

BOOST_AUTO_TEST_CASE(rows_and_reshapes_address_the_same_memory) {
  auto b = host_buffer::of<double>({3, 2}, {0, 1, 2, 3, 4, 5});
  const tensor r = b.view().rows(1, 3);
  BOOST_TEST(r.dim(0) == 2);
  BOOST_TEST(r.as<double>()[0] == 2.0);
  const tensor flat = b.view().reshaped({6});
  BOOST_TEST(flat.as<double>()[5] == 5.0);
  BOOST_TEST(flat.describe() == "F64 [6] cpu");
}

BOOST_AUTO_TEST_SUITE_END()
