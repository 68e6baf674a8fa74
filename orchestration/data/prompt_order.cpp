// Seeded prompt order (prompt_order.h).
#include "orchestration/data/prompt_order.h"

#include "plain/splitmix64.h"

namespace tandem::data {
namespace {

/// SplitMix64: the next value of the stream whose state is `x`.
std::uint64_t next_draw(std::uint64_t& x) {
  const std::uint64_t r = plain::splitmix64(x);
  x += plain::splitmix64_increment;
  return r;
}

/// A uniform draw from [0, bound) (bound >= 1), by rejection of the top partial range.
std::uint64_t below(std::uint64_t& state, std::uint64_t bound) {
  const std::uint64_t limit = ~std::uint64_t{0} - (~std::uint64_t{0} % bound + 1) % bound;  // a multiple of bound, minus 1
  for (;;) {
    const std::uint64_t r = next_draw(state);
    if (r <= limit) return r % bound;
  }
}

/// The seed of epoch `epoch` of a run seeded with `seed`.
std::uint64_t epoch_seed(std::uint64_t seed, std::uint64_t epoch) {
  return plain::splitmix64(seed ^ (epoch * 0xD1B54A32D192ED03ull));
}

}  // namespace

std::vector<std::size_t> seeded_permutation(std::size_t size, std::uint64_t seed) {
  std::vector<std::size_t> p(size);
  for (std::size_t i = 0; i < size; ++i) p[i] = i;
  std::uint64_t state = seed;
  for (std::size_t i = size; i > 1; --i) {
    const auto j = static_cast<std::size_t>(below(state, i));
    std::swap(p[i - 1], p[j]);
  }
  return p;
}

prompt_order::prompt_order(std::size_t size, bool shuffle, std::uint64_t seed)
    : size_(size == 0 ? 1 : size), shuffle_(shuffle), seed_(seed) {}

std::size_t prompt_order::at(std::uint64_t position) {
  const std::size_t k = static_cast<std::size_t>(position % size_);
  if (!shuffle_) return k;
  const std::uint64_t epoch = position / size_;
  if (epoch != cached_epoch_) {
    permutation_ = seeded_permutation(size_, epoch_seed(seed_, epoch));
    cached_epoch_ = epoch;
  }
  return permutation_[k];
}

}  // namespace tandem::data
