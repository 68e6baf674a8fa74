// The input checks shared by the RL step functions (input_checks.h).
#include "orchestration/rl/input_checks.h"

#include <charconv>
#include <cmath>

namespace tandem::rl {

std::string format_number(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  char buf[64];
  const auto r = std::to_chars(buf, buf + sizeof buf, v);
  return std::string(buf, r.ptr);
}

std::optional<rl_error> check_same_size(std::string_view name, std::size_t size, std::string_view expected_name,
                                        std::size_t expected) {
  if (size == expected) return std::nullopt;
  return rl_error{rl_errc::invalid_input, std::string(name) + " has " + std::to_string(size) + " entries but " +
                                              std::string(expected_name) + " has " + std::to_string(expected)};
}

std::optional<rl_error> check_finite(std::span<const double> values, std::string_view name) {
  for (std::size_t i = 0; i < values.size(); ++i)
    if (!std::isfinite(values[i]))
      return rl_error{rl_errc::invalid_input,
                      std::string(name) + "[" + std::to_string(i) + "] is " + format_number(values[i])};
  return std::nullopt;
}

std::optional<rl_error> check_groups(std::span<const std::int64_t> groups, std::int64_t group_count,
                                     std::string_view name) {
  if (group_count < 0)
    return rl_error{rl_errc::invalid_input, "group_count is " + std::to_string(group_count) + ", below 0"};
  for (std::size_t i = 0; i < groups.size(); ++i)
    if (groups[i] < 0 || groups[i] >= group_count)
      return rl_error{rl_errc::invalid_input, std::string(name) + "[" + std::to_string(i) + "] is " +
                                                  std::to_string(groups[i]) + ", outside [0, " +
                                                  std::to_string(group_count) + ")"};
  return std::nullopt;
}

std::optional<rl_error> check_not_negative(std::span<const std::int64_t> values, std::string_view name) {
  for (std::size_t i = 0; i < values.size(); ++i)
    if (values[i] < 0)
      return rl_error{rl_errc::invalid_input,
                      std::string(name) + "[" + std::to_string(i) + "] is " + std::to_string(values[i]) + ", below 0"};
  return std::nullopt;
}

std::optional<rl_error> check_finite_setting(double value, std::string_view name) {
  if (std::isfinite(value)) return std::nullopt;
  return rl_error{rl_errc::invalid_setting, std::string(name) + " is " + format_number(value)};
}

}  // namespace tandem::rl
