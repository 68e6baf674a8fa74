// The one translation unit of tandem_actor_tests holding CAF's test runner and main(); every
// suite lives in its own file with `#define CAF_SUITE <name>` and <caf/test/dsl.hpp>.
#include <caf/test/unit_test_impl.hpp>
