// Thread caps of a member process.
#include "actors/member/thread_caps.hpp"

#include <omp.h>
#include <sched.h>

#include <algorithm>
#include <cstdlib>
#include <string>
#include <thread>

#include <cblas.h>

namespace tandem {

std::size_t available_cores() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (::sched_getaffinity(0, sizeof set, &set) == 0) return std::max(1, CPU_COUNT(&set));
  return std::max(1u, std::thread::hardware_concurrency());
}

void cap_blas_threads(std::size_t threads) {
  const int n = static_cast<int>(std::max<std::size_t>(1, threads));
  const std::string text = std::to_string(n);
  ::setenv("OMP_NUM_THREADS", text.c_str(), 1);
  ::setenv("OPENBLAS_NUM_THREADS", text.c_str(), 1);
  omp_set_num_threads(n);
  openblas_set_num_threads(n);
}

}  // namespace tandem
