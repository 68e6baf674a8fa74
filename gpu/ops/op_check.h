// Argument checks shared by every op: a failed check returns invalid_argument naming the op, the
// tensor and what was expected, e.g. "linear_forward: w: expected [*, 6], got F32 [5, 7] cpu".
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>

#include "gpu/core/status.h"
#include "gpu/core/tensor.h"

/// Returns the status of `expr` from the enclosing function when it is not ok.
#define TANDEM_RETURN_IF_ERROR(expr)              \
  do {                                            \
    ::tandem::gpu::status tandem_status_ = (expr); \
    if (!tandem_status_) return tandem_status_;   \
  } while (0)

namespace tandem::gpu::ops {

/// Dimension wildcard for expect_shape.
constexpr std::int64_t any = -1;

/// A double as messages show it: "0", "1e-06", "-2.5" (iostream's default format).
std::string number(double v);

/// invalid_argument "<op>: <message>" unless `condition`.
status require(bool condition, std::string_view op, const std::string& message);

/// `t` is non-empty, contiguous, of rank shape.size(), matching every non-wildcard dimension.
status expect_shape(const tensor& t, std::string_view op, std::string_view name,
                    std::initializer_list<std::int64_t> shape);

/// `t` has dtype `type`.
status expect_type(const tensor& t, std::string_view op, std::string_view name, dtype type);

/// `t` lives on the same device as `reference`.
status expect_same_device(const tensor& t, const tensor& reference, std::string_view op, std::string_view name);

}  // namespace tandem::gpu::ops
