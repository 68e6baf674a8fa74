// The one main() of every Boost.Test executable.
#define BOOST_TEST_MODULE tandem
#include <boost/test/unit_test.hpp>
