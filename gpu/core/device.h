// Where a tensor's memory lives.
#pragma once

#include <string>

namespace tandem::gpu {

enum class device_kind { cpu, cuda };

struct device {
  device_kind kind = device_kind::cpu;
  int index = 0;  ///< CUDA device ordinal; 0 on the CPU

  static device cpu() { return {}; }
  static device cuda(int index) { return {device_kind::cuda, index}; }
  bool is_cpu() const { return kind == device_kind::cpu; }
  bool operator==(const device&) const = default;

  /// "cpu" or "cuda:3".
  std::string to_string() const { return is_cpu() ? "cpu" : "cuda:" + std::to_string(index); }
};

}  // namespace tandem::gpu
