// When a CPU kernel fans out over OpenMP threads: only above a minimum of work. Starting and
// joining a parallel region costs microseconds, more than a small op's whole work (the tiny
// models of tests and CI, decoding one row per sequence), and on an oversubscribed machine a
// region waits for a descheduled thread. Results never depend on this choice: every kernel's
// threads split independent rows or columns and each element is computed in one fixed order.
#pragma once

#include <cstdint>

namespace tandem::gpu::ops::cpu {

/// Elements (or multiply-adds) below which a kernel runs on the calling thread.
constexpr std::int64_t parallel_min_work = std::int64_t{1} << 16;

/// For `#pragma omp parallel ... if (parallel_worth(work))`.
constexpr bool parallel_worth(std::int64_t work) { return work >= parallel_min_work; }

}  // namespace tandem::gpu::ops::cpu
