// Injected op failures (gpu/ops/fault_injection.h): the armed call of the named op fails before
// it writes anything, once; other ops and other calls run.
#include <boost/test/unit_test.hpp>

#include "gpu/core/exec_context.h"
#include "gpu/core/host_buffer.h"
#include "gpu/ops/elementwise.h"
#include "gpu/ops/fault_injection.h"

namespace tg = tandem::gpu;

BOOST_AUTO_TEST_SUITE(fault_injection)

BOOST_AUTO_TEST_CASE(the_armed_call_of_the_named_op_fails_once_before_it_writes) {
  const auto ctx = tg::exec_context::cpu();
  const auto x = tg::host_buffer::of<float>({1, 2}, {1, 2});
  tg::host_buffer y(tg::dtype::float32, {1, 2});
  tg::ops::inject_op_failure("scale_forward", 2);
  BOOST_TEST(tg::ops::add_forward(ctx, x, x, y).is_ok(), "another op runs");
  BOOST_TEST(tg::ops::scale_forward(ctx, x, 3.0, y).is_ok(), "the first call runs");
  BOOST_TEST(y.data<float>()[1] == 6.0f);
  const tg::status s = tg::ops::scale_forward(ctx, x, 5.0, y);
  BOOST_TEST((s.code() == tg::status_code::device_error));
  BOOST_TEST(s.message() == "scale_forward: injected failure (call 2)");
  BOOST_TEST(y.data<float>()[1] == 6.0f, "nothing was written");
  BOOST_TEST(tg::ops::scale_forward(ctx, x, 5.0, y).is_ok(), "it fires once");
  tg::ops::inject_op_failure("scale_forward", 1);
  tg::ops::inject_op_failure("");  // disarmed
  BOOST_TEST(tg::ops::scale_forward(ctx, x, 5.0, y).is_ok());
}

BOOST_AUTO_TEST_SUITE_END()
