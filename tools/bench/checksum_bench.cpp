// Refit checksum throughput: the chunked XXH3-64 (gpu/core/chunked_hash.h), one-shot and streamed
// in pieces that straddle chunks, and the byte-at-a-time FNV-1a 64 it replaced, each printed beside
// memcpy of the same buffer measured in the same run (the ceiling: a hash reads every byte once).
// Best of several repetitions, one thread. A figure to read, not a gate.
// Usage: checksum_bench [--quick]   (buffer: 256 MiB, --quick: 32 MiB)
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <span>
#include <vector>

#include "gpu/core/chunked_hash.h"

using namespace tandem::gpu;
using clock_type = std::chrono::steady_clock;

namespace {

/// The old refit checksum, kept here only to compare against: FNV-1a 64, one byte per step.
std::uint64_t fnv1a_64(std::span<const std::byte> bytes) {
  std::uint64_t h = 0xcbf29ce484222325ull;
  for (const std::byte b : bytes) {
    h ^= static_cast<std::uint64_t>(b);
    h *= 0x100000001b3ull;
  }
  return h;
}

/// Where every measured call's result goes, so the work cannot be dropped.
volatile std::uint64_t sink = 0;

/// Best seconds of `reps` runs of `f` after one warm-up.
double best_of(int reps, const std::function<std::uint64_t()>& f) {
  sink = sink ^ f();
  double best = 1e30;
  for (int i = 0; i < reps; ++i) {
    const auto a = clock_type::now();
    sink = sink ^ f();
    best = std::min(best, std::chrono::duration<double>(clock_type::now() - a).count());
  }
  return best;
}

void row(const char* what, std::size_t bytes, double seconds, double memcpy_gbs, std::uint64_t value) {
  const double gbs = static_cast<double>(bytes) / seconds / 1e9;
  std::printf("%-40s %9.3f ms %8.2f GB/s %6.1f%% of memcpy's %.2f GB/s   (value %016llx)\n", what, seconds * 1e3, gbs,
              100 * gbs / memcpy_gbs, memcpy_gbs, static_cast<unsigned long long>(value));
}

}  // namespace

int main(int argc, char** argv) {
  const bool quick = argc > 1 && std::strcmp(argv[1], "--quick") == 0;
  const int reps = quick ? 3 : 5;
  const std::size_t n = (quick ? 32u : 256u) << 20;
  std::vector<std::byte> in(n), out(n);
  std::uint32_t s = 12345;
  for (auto& b : in) {
    s = s * 1664525u + 1013904223u;
    b = static_cast<std::byte>(s >> 24);
  }
  std::fill(out.begin(), out.end(), std::byte{0});
  const std::span<const std::byte> bytes(in);

  const double t_copy = best_of(reps, [&] {
    std::memcpy(out.data(), in.data(), n);
    return static_cast<std::uint64_t>(out[n / 2]);
  });
  const double memcpy_gbs = static_cast<double>(n) / t_copy / 1e9;
  std::printf("checksum_bench: %zu MiB buffer, best of %d, one thread; GB/s = buffer bytes per second "
              "(memcpy moves each byte twice: %.2f GB/s of read + write; a hash reads the buffer only, so where "
              "it fits in the last-level cache a hash can pass memcpy)\n\n", n >> 20, reps, 2 * memcpy_gbs);
  std::printf("%-40s %9.3f ms %8.2f GB/s %6.1f%% of memcpy's %.2f GB/s\n", "memcpy (the ceiling)", t_copy * 1e3,
              memcpy_gbs, 100.0, memcpy_gbs);

  const std::uint64_t chunked = chunked_xxh3(bytes);
  row("chunked XXH3-64, one-shot", n, best_of(reps, [&] { return chunked_xxh3(bytes); }), memcpy_gbs, chunked);
  // Pieces of 1,000,003 bytes: almost every chunk straddles two pieces (XXH3's streaming state).
  const std::size_t piece = 1000003;
  const auto streamed = [&] {
    chunked_xxh3_stream h;
    for (std::size_t at = 0; at < n; at += piece) h.update(bytes.subspan(at, std::min(piece, n - at)));
    return h.digest();
  };
  const std::uint64_t streamed_value = streamed();
  row("chunked XXH3-64, streamed in 1000003 B", n, best_of(reps, streamed), memcpy_gbs, streamed_value);
  row("FNV-1a 64, byte at a time (the old one)", n, best_of(reps, [&] { return fnv1a_64(bytes); }), memcpy_gbs,
      fnv1a_64(bytes));

  if (streamed_value != chunked) {
    std::fprintf(stderr, "checksum_bench: the streamed hash %016llx differs from the one-shot %016llx\n",
                 static_cast<unsigned long long>(streamed_value), static_cast<unsigned long long>(chunked));
    return 1;
  }
  return 0;
}
