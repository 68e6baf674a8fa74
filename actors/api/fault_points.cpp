// Fault-injection points (fault_points.hpp).
#include "actors/api/fault_points.hpp"

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace tandem {
namespace {

/// Whether `spec` (one POINT[@STEP] of the variable) names `p` at `step`.
bool names(std::string_view spec, fault_point p, std::uint64_t step) {
  const auto at = spec.find('@');
  if (spec.substr(0, at) != to_string(p)) return false;
  if (at == std::string_view::npos) return true;
  const std::string digits(spec.substr(at + 1));
  if (digits.empty() || digits.find_first_not_of("0123456789") != std::string::npos) return false;
  return std::strtoull(digits.c_str(), nullptr, 10) == step;
}

}  // namespace

std::string_view to_string(fault_point p) {
  switch (p) {
    case fault_point::generate: return "generate";
    case fault_point::train: return "train";
    case fault_point::save_weights_before: return "save_weights_before";
    case fault_point::save_weights_after: return "save_weights_after";
    case fault_point::rank_part_before: return "rank_part_before";
    case fault_point::rank_part_during: return "rank_part_during";
    case fault_point::rank_part_after: return "rank_part_after";
    case fault_point::commit_before: return "commit_before";
    case fault_point::commit_after: return "commit_after";
  }
  return "unknown";
}

void reach(fault_point p, std::uint64_t step) {
  const char* value = std::getenv("TANDEM_FAULT_KILL_AT");
  if (value == nullptr) return;
  std::string_view rest(value);
  while (!rest.empty()) {
    const auto comma = rest.find(',');
    if (names(rest.substr(0, comma), p, step)) {
      std::fprintf(stderr, "tandem: fault injection: killed at %.*s of step %llu\n", static_cast<int>(to_string(p).size()),
                   to_string(p).data(), static_cast<unsigned long long>(step));
      std::fflush(stderr);
      std::raise(SIGKILL);
    }
    if (comma == std::string_view::npos) break;
    rest.remove_prefix(comma + 1);
  }
}

}  // namespace tandem
