// policy.precision: the Gemma 4 engines' dtype follows the backend unless the recipe names one
// (orchestration/config/recipe.h: compute_dtype), and bfloat16 on the CPU is refused as not built.
#include <boost/test/unit_test.hpp>

#include "orchestration/config/resolve.h"
#include "support/small_recipe.h"

namespace tc = tandem::config;

BOOST_AUTO_TEST_SUITE(compute_dtype_test)

BOOST_AUTO_TEST_CASE(policy_precision_auto_is_float32_on_cpu_and_bfloat16_on_cuda_and_an_explicit_value_wins) {
  tc::recipe_config c = tandem::test::small_recipe();
  BOOST_TEST((c.policy.precision == tc::compute_precision::automatic));
  BOOST_TEST((tc::compute_dtype(c) == tc::state_dtype::float32));
  c.cluster.backend = tc::compute_backend::cuda;
  BOOST_TEST((tc::compute_dtype(c) == tc::state_dtype::bfloat16));
  c.policy.precision = tc::compute_precision::float32;
  BOOST_TEST((tc::compute_dtype(c) == tc::state_dtype::float32));
  c = tandem::test::small_recipe({"policy.precision=float32"});
  BOOST_TEST((tc::compute_dtype(c) == tc::state_dtype::float32));
}

BOOST_AUTO_TEST_SUITE_END()
