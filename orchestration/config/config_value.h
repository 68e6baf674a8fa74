// A checked value of one recipe key, independent of YAML.
#pragma once

#include <cstdint>
#include <string>
#include <variant>
#include <vector>

namespace tandem::config {

/// null, bool, integer, real, string (also enum choices), or a list of integers, reals or strings.
using config_value = std::variant<std::monostate, bool, std::int64_t, double, std::string,
                                  std::vector<std::int64_t>, std::vector<double>,
                                  std::vector<std::string>>;

/// The value as YAML flow text: null, true, 42, 1e-06, "text" (quoted only when needed), [1, 2].
std::string to_yaml(const config_value& value);

}  // namespace tandem::config
