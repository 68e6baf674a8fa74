// Device buffers for the CUDA op tests: random contents uploaded from the host in float32,
// bfloat16 or int32, read back as raw bytes or as float64, freed with the buffer.
#pragma once

#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include <boost/test/unit_test.hpp>

#include "gpu/core/half.h"
#include "gpu/core/memory.h"
#include "gpu/core/tensor.h"

namespace tandem::test::cuda {

/// One tensor on cuda:0 that frees its memory with it.
class device_buffer {
 public:
  device_buffer(gpu::dtype type, std::vector<std::int64_t> shape) : type_(type), shape_(std::move(shape)) {
    numel_ = 1;
    for (auto d : shape_) numel_ *= d;
    auto p = gpu::device_allocate(gpu::device::cuda(0), std::max<std::int64_t>(bytes(), 1));
    BOOST_REQUIRE_MESSAGE(p.has_value(), "device_allocate of " << bytes() << " bytes failed");
    data_ = *p;
  }
  device_buffer(const device_buffer&) = delete;
  device_buffer& operator=(const device_buffer&) = delete;
  ~device_buffer() { gpu::device_free(gpu::device::cuda(0), data_); }

  gpu::tensor view() const { return gpu::tensor::contiguous(data_, type_, shape_, gpu::device::cuda(0)); }
  std::int64_t bytes() const { return numel_ * static_cast<std::int64_t>(gpu::size_of(type_)); }
  std::int64_t numel() const { return numel_; }

  /// Uniform values in [lo, hi) from `seed`, rounded to the buffer's dtype (float32, bfloat16).
  void fill_uniform(std::uint64_t seed, double lo = -1, double hi = 1) {
    std::mt19937_64 rng(seed);
    std::uniform_real_distribution<float> u(static_cast<float>(lo), static_cast<float>(hi));
    std::vector<float> host(static_cast<std::size_t>(numel_));
    for (float& v : host) v = u(rng);
    upload_floats(host);
  }
  void upload_floats(const std::vector<float>& host) {
    BOOST_REQUIRE(static_cast<std::int64_t>(host.size()) == numel_);
    if (type_ == gpu::dtype::float32) return upload(host.data());
    BOOST_REQUIRE((type_ == gpu::dtype::bfloat16));
    std::vector<std::uint16_t> narrow(host.size());
    for (std::size_t i = 0; i < host.size(); ++i) narrow[i] = gpu::to_bfloat16(host[i]).bits;
    upload(narrow.data());
  }
  void upload_ints(const std::vector<std::int32_t>& host) {
    BOOST_REQUIRE((type_ == gpu::dtype::int32 && static_cast<std::int64_t>(host.size()) == numel_));
    upload(host.data());
  }
  /// Writes `host` (float32 values, rounded to the dtype) at element `offset`.
  void upload_floats_at(std::int64_t offset, const std::vector<float>& host) {
    BOOST_REQUIRE(offset >= 0 && offset + static_cast<std::int64_t>(host.size()) <= numel_);
    const std::int64_t width = static_cast<std::int64_t>(gpu::size_of(type_));
    std::vector<unsigned char> bytes_of(host.size() * static_cast<std::size_t>(width));
    for (std::size_t i = 0; i < host.size(); ++i) {
      if (type_ == gpu::dtype::float32) {
        std::memcpy(&bytes_of[i * 4], &host[i], 4);
      } else {
        const std::uint16_t b = gpu::to_bfloat16(host[i]).bits;
        std::memcpy(&bytes_of[i * 2], &b, 2);
      }
    }
    const gpu::status s = gpu::copy_to_device(gpu::device::cuda(0), static_cast<char*>(data_) + offset * width,
                                              bytes_of.data(), static_cast<std::int64_t>(bytes_of.size()));
    BOOST_REQUIRE_MESSAGE(s.is_ok(), s.message());
  }
  /// Elements [offset, offset + count) as float64.
  std::vector<double> floats_at(std::int64_t offset, std::int64_t count) const {
    BOOST_REQUIRE(offset >= 0 && offset + count <= numel_);
    const std::int64_t width = static_cast<std::int64_t>(gpu::size_of(type_));
    std::vector<unsigned char> host(static_cast<std::size_t>(count * width));
    const gpu::status s = gpu::copy_to_host(gpu::device::cuda(0), host.data(), static_cast<const char*>(data_) + offset * width,
                                            count * width);
    BOOST_REQUIRE_MESSAGE(s.is_ok(), s.message());
    std::vector<double> out(static_cast<std::size_t>(count));
    for (std::int64_t i = 0; i < count; ++i) {
      if (type_ == gpu::dtype::float32) {
        float f;
        std::memcpy(&f, &host[static_cast<std::size_t>(i * 4)], 4);
        out[static_cast<std::size_t>(i)] = f;
      } else {
        gpu::bfloat16 b;
        std::memcpy(&b.bits, &host[static_cast<std::size_t>(i * 2)], 2);
        out[static_cast<std::size_t>(i)] = gpu::to_float(b);
      }
    }
    return out;
  }
  void upload(const void* host) {
    const gpu::status s = gpu::copy_to_device(gpu::device::cuda(0), data_, host, bytes());
    BOOST_REQUIRE_MESSAGE(s.is_ok(), s.message());
  }
  std::vector<unsigned char> raw() const {
    std::vector<unsigned char> host(static_cast<std::size_t>(bytes()));
    const gpu::status s = gpu::copy_to_host(gpu::device::cuda(0), host.data(), data_, bytes());
    BOOST_REQUIRE_MESSAGE(s.is_ok(), s.message());
    return host;
  }

 private:
  gpu::dtype type_;
  std::vector<std::int64_t> shape_;
  std::int64_t numel_ = 0;
  void* data_ = nullptr;
};

}  // namespace tandem::test::cuda
