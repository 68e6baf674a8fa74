// Element conversion: one loop per (from, to) pair, element loads and stores through memcpy so
// unaligned data is read correctly.
#include "gpu/core/convert.h"

#include <cstring>

#include "gpu/core/half.h"

namespace tandem::gpu {
namespace {

float load(const unsigned char* p, dtype t) {
  switch (t) {
    case dtype::bfloat16: {
      bfloat16 v;
      std::memcpy(&v.bits, p, 2);
      return to_float(v);
    }
    case dtype::float16: {
      float16 v;
      std::memcpy(&v.bits, p, 2);
      return to_float(v);
    }
    default: {
      float v;
      std::memcpy(&v, p, 4);
      return v;
    }
  }
}

void store(unsigned char* p, dtype t, float f) {
  switch (t) {
    case dtype::bfloat16: {
      const bfloat16 v = to_bfloat16(f);
      std::memcpy(p, &v.bits, 2);
      break;
    }
    case dtype::float16: {
      const float16 v = to_float16(f);
      std::memcpy(p, &v.bits, 2);
      break;
    }
    default:
      std::memcpy(p, &f, 4);
  }
}

template <dtype From, dtype To>
void convert_block(const unsigned char* src, unsigned char* dst, std::int64_t count) {
  constexpr std::size_t in = size_of(From), out = size_of(To);
  for (std::int64_t i = 0; i < count; ++i) store(dst + i * out, To, load(src + i * in, From));
}

template <dtype From>
void convert_from(const unsigned char* src, unsigned char* dst, dtype to, std::int64_t count) {
  switch (to) {
    case dtype::bfloat16: convert_block<From, dtype::bfloat16>(src, dst, count); break;
    case dtype::float16: convert_block<From, dtype::float16>(src, dst, count); break;
    default: convert_block<From, dtype::float32>(src, dst, count); break;
  }
}

void convert_range(const unsigned char* src, dtype from, unsigned char* dst, dtype to, std::int64_t count) {
  if (from == to) {
    std::memcpy(dst, src, static_cast<std::size_t>(count) * size_of(from));
    return;
  }
  switch (from) {
    case dtype::bfloat16: convert_from<dtype::bfloat16>(src, dst, to, count); break;
    case dtype::float16: convert_from<dtype::float16>(src, dst, to, count); break;
    default: convert_from<dtype::float32>(src, dst, to, count); break;
  }
}

}  // namespace

void convert_elements(const void* src, dtype from, void* dst, dtype to, std::int64_t count) {
  constexpr std::int64_t block = std::int64_t{1} << 18;
  const auto* s = static_cast<const unsigned char*>(src);
  auto* d = static_cast<unsigned char*>(dst);
  const std::int64_t blocks = (count + block - 1) / block;
  const std::int64_t in = static_cast<std::int64_t>(size_of(from)), out = static_cast<std::int64_t>(size_of(to));
#pragma omp parallel for schedule(static) if (blocks > 4)
  for (std::int64_t b = 0; b < blocks; ++b) {
    const std::int64_t first = b * block;
    const std::int64_t n = first + block <= count ? block : count - first;
    convert_range(s + first * in, from, d + first * out, to, n);
  }
}

}  // namespace tandem::gpu
