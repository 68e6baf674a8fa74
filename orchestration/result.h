// A value or the reason there is none, for every plain error type of orchestration/ (E has a
// `message` string): records::file_result, records::metrics_result and rl::rl_result are this
// template with their own error. value() on an error (or error() on a value) is a programming
// error: it prints what was called and aborts.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <string>
#include <utility>
#include <variant>

namespace tandem {

template <class T, class E>
class result_or {
 public:
  result_or(T v) : v_(std::in_place_index<0>, std::move(v)) {}
  result_or(E e) : v_(std::in_place_index<1>, std::move(e)) {}

  explicit operator bool() const { return v_.index() == 0; }
  T& value() {
    if (v_.index() != 0) misuse("value", std::get<1>(v_).message);
    return std::get<0>(v_);
  }
  const T& value() const {
    if (v_.index() != 0) misuse("value", std::get<1>(v_).message);
    return std::get<0>(v_);
  }
  const E& error() const {
    if (v_.index() != 1) misuse("error", "it holds a value");
    return std::get<1>(v_);
  }
  T& operator*() { return value(); }
  const T& operator*() const { return value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

 private:
  [[noreturn]] static void misuse(const char* call, const std::string& what) {
    std::fprintf(stderr, "tandem::result_or::%s() called wrongly: %s\n", call, what.c_str());
    std::abort();
  }
  std::variant<T, E> v_;
};

}  // namespace tandem
