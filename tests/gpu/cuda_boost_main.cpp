// The main() of the Boost.Test executables that need a CUDA device: exits 77 (CTest: skipped)
// with the reason where none is visible, else runs the tests.
#define BOOST_TEST_MODULE tandem_cuda
#define BOOST_TEST_NO_MAIN
#include <boost/test/unit_test.hpp>

#include <cstdio>

#include "gpu/core/device_query.h"

int main(int argc, char* argv[]) {
  const tandem::gpu::backend_info info = tandem::gpu::query_backend();
  if (info.devices.empty()) {
    std::printf("skipped: no CUDA device is visible (%s)\n", info.device_problem.c_str());
    return 77;
  }
  std::printf("cuda:0 is %s, compute capability %d.%d\n", info.devices[0].name.c_str(), info.devices[0].compute_major,
              info.devices[0].compute_minor);
#ifdef BOOST_TEST_DYN_LINK
  return boost::unit_test::unit_test_main(&init_unit_test, argc, argv);
#else
  return boost::unit_test::unit_test_main(&init_unit_test_suite, argc, argv);
#endif
}
