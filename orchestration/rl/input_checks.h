// The input checks every RL step function runs before it computes anything: lists of one length,
// finite numbers, group indices in range. Each returns nullopt when the input holds, or an
// invalid_input error naming the list and the entry ("rewards[7] is nan").
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "orchestration/rl/rl_error.h"

namespace tandem::rl {

/// The shortest text that reads back as `v` ("0.5", "-1", "nan", "inf").
std::string format_number(double v);

/// `name` holds `size` entries where `expected_name` holds `expected`: an error unless equal
/// ("response_lengths has 3 entries but rewards has 4").
std::optional<rl_error> check_same_size(std::string_view name, std::size_t size, std::string_view expected_name,
                                        std::size_t expected);

/// Every entry of `values` is finite ("rewards[7] is nan").
std::optional<rl_error> check_finite(std::span<const double> values, std::string_view name);

/// Every entry of `groups` lies in [0, group_count) ("groups[2] is 5, outside [0, 4)").
std::optional<rl_error> check_groups(std::span<const std::int64_t> groups, std::int64_t group_count,
                                     std::string_view name);

/// Every entry of `values` is >= 0 ("response_lengths[1] is -3, below 0").
std::optional<rl_error> check_not_negative(std::span<const std::int64_t> values, std::string_view name);

/// One setting is finite: an invalid_setting error naming it otherwise.
std::optional<rl_error> check_finite_setting(double value, std::string_view name);

}  // namespace tandem::rl
