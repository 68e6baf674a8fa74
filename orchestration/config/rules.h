// Cross-field rules of a recipe: combinations of individually valid values that cannot run.
#pragma once

#include <string>

#include "orchestration/config/config_error.h"

namespace tandem::config {

struct resolved_recipe;

/// Every violated rule, each located at the involved key that was set last (an override before
/// the recipe's own file before its parents; schema defaults last).
config_errors check_rules(const resolved_recipe& r);

/// True for a loopback host: "localhost", "::1" or an IPv4 address 127.x.x.x. The one definition
/// cluster.secure: false and the members' own checks share.
bool loopback_host(const std::string& host);

}  // namespace tandem::config
