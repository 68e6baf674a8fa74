// Argument checks of ops.
#include "gpu/ops/op_check.h"

#include <sstream>

namespace tandem::gpu::ops {

std::string number(double v) {
  std::ostringstream s;
  s << v;
  return s.str();
}

status require(bool condition, std::string_view op, const std::string& message) {
  if (condition) return status::ok();
  return {status_code::invalid_argument, std::string(op) + ": " + message};
}

status expect_shape(const tensor& t, std::string_view op, std::string_view name,
                    std::initializer_list<std::int64_t> shape) {
  std::string want = "[";
  bool first = true;
  for (auto d : shape) {
    want += (first ? "" : ", ") + (d == any ? std::string("*") : std::to_string(d));
    first = false;
  }
  want += "]";
  auto fail = [&](const std::string& why) {
    return status{status_code::invalid_argument,
                  std::string(op) + ": " + std::string(name) + ": expected " + want + ", got " +
                      (t.empty() ? std::string("no tensor") : t.describe()) + why};
  };
  if (t.empty() && t.rank() == 0) return fail("");
  if (t.rank() != static_cast<int>(shape.size())) return fail("");
  int i = 0;
  for (auto d : shape) {
    if (d != any && t.dim(i) != d) return fail("");
    ++i;
  }
  if (!t.is_contiguous()) return fail(" (not contiguous)");
  return status::ok();
}

status expect_type(const tensor& t, std::string_view op, std::string_view name, dtype type) {
  if (t.type() == type) return status::ok();
  return {status_code::invalid_argument, std::string(op) + ": " + std::string(name) + ": expected dtype " +
                                             std::string(to_string(type)) + ", got " + t.describe()};
}

status expect_same_device(const tensor& t, const tensor& reference, std::string_view op, std::string_view name) {
  if (t.dev() == reference.dev()) return status::ok();
  return {status_code::invalid_argument, std::string(op) + ": " + std::string(name) + " is on " + t.dev().to_string() +
                                             ", the other operands on " + reference.dev().to_string()};
}

}  // namespace tandem::gpu::ops
