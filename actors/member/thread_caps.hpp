// Each process's share of the cores (DESIGN.md section 1): a member caps its BLAS/OpenMP threads
// and its CAF scheduler so that the members of one node together use the node's cores once.
//
// OpenMP (libgomp) and OpenBLAS read OMP_NUM_THREADS / OPENBLAS_NUM_THREADS when the libraries are
// loaded, before main: a controller therefore puts the share into its children's environment
// (local_members), and a member started by a launcher sets it at run time through
// omp_set_num_threads / openblas_set_num_threads, before any BLAS call. Both also export the
// variables so that processes they start inherit the cap.
#pragma once

#include <cstddef>

namespace tandem {

/// CPUs this process may run on (its affinity mask; at least 1).
std::size_t available_cores();

/// Caps OpenMP and OpenBLAS to `threads` (>= 1) now, and exports OMP_NUM_THREADS and
/// OPENBLAS_NUM_THREADS for child processes.
void cap_blas_threads(std::size_t threads);

}  // namespace tandem
