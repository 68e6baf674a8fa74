// Status and result types of the compute module: library code never exits the process, it returns
// a status that names what failed and where, and the caller (an actor, the CLI) decides.
#pragma once

#include <string>
#include <utility>
#include <variant>

namespace tandem::gpu {

/// What kind of failure a status carries. Actors map these onto their own error enum.
enum class status_code {
  ok = 0,
  invalid_argument,  ///< the caller passed something malformed (a config, a shape, a name)
  not_found,         ///< a file, tensor or device that should exist does not
  io_error,          ///< reading or writing a file failed
  unsupported,       ///< valid input asking for something not built (yet)
  device_error,      ///< CUDA, cuBLAS or NCCL reported a failure
  out_of_memory,     ///< an allocation failed; the call left no partial state behind
};

/// Human-readable name of a status code, e.g. "invalid_argument".
const char* to_string(status_code code);

/// Outcome of a call: ok, or a code plus a message that names the file, key, tensor or statement.
class [[nodiscard]] status {
 public:
  status() = default;
  status(status_code code, std::string message) : code_(code), message_(std::move(message)) {}

  static status ok() { return {}; }

  bool is_ok() const { return code_ == status_code::ok; }
  explicit operator bool() const { return is_ok(); }
  status_code code() const { return code_; }
  const std::string& message() const { return message_; }

 private:
  status_code code_ = status_code::ok;
  std::string message_;
};

/// A value or the status that explains why there is none (std::expected is C++23).
template <class T>
class [[nodiscard]] result {
 public:
  result(T value) : v_(std::move(value)) {}                 // NOLINT: implicit by design
  result(status error) : v_(std::move(error)) {}            // NOLINT: implicit by design

  bool has_value() const { return std::holds_alternative<T>(v_); }
  explicit operator bool() const { return has_value(); }

  T& value() & { return std::get<T>(v_); }
  const T& value() const& { return std::get<T>(v_); }
  T&& value() && { return std::get<T>(std::move(v_)); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }

  /// The failure; only valid when !has_value().
  const status& error() const { return std::get<status>(v_); }

 private:
  std::variant<T, status> v_;
};

}  // namespace tandem::gpu
