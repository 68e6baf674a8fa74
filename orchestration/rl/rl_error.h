// What can go wrong in the RL step computations, as typed errors: a code and the sentence the user
// reads, which names the input or setting at fault ("rewards[7] is nan", "dynamic sampling ran out
// of rounds: ..."). Nothing in orchestration/rl/ asserts or exits on bad input; it returns these.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <string>
#include <utility>
#include <variant>

namespace tandem::rl {

enum class rl_errc {
  invalid_input,    ///< sizes disagree, a value is not finite, a group index is out of range
  invalid_setting,  ///< a setting cannot be used (source_max <= source_min, clip_low > clip_high)
  count_overflow,   ///< a count derived from the settings does not fit in int64
  does_not_divide,  ///< the step's samples do not split into whole global batches
  out_of_rounds,    ///< dynamic sampling used its last generation round without filling the batch
  wrong_state,      ///< a call the dynamic-sampling cache does not take in its present state
};

/// The name of a code ("out_of_rounds").
const char* to_string(rl_errc code);

struct rl_error {
  rl_errc code = rl_errc::invalid_input;
  std::string message;  ///< the whole sentence, naming what was wrong
};

/// A value or the reason there is none. value() on an error (or error() on a value) is a
/// programming error: it prints what was called and aborts.
template <class T>
class rl_result {
 public:
  rl_result(T v) : v_(std::in_place_index<0>, std::move(v)) {}
  rl_result(rl_error e) : v_(std::in_place_index<1>, std::move(e)) {}

  explicit operator bool() const { return v_.index() == 0; }
  T& value() {
    if (v_.index() != 0) misuse("value", std::get<1>(v_).message);
    return std::get<0>(v_);
  }
  const T& value() const {
    if (v_.index() != 0) misuse("value", std::get<1>(v_).message);
    return std::get<0>(v_);
  }
  const rl_error& error() const {
    if (v_.index() != 1) misuse("error", "it holds a value");
    return std::get<1>(v_);
  }
  T& operator*() { return value(); }
  const T& operator*() const { return value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

 private:
  [[noreturn]] static void misuse(const char* call, const std::string& what) {
    std::fprintf(stderr, "tandem::rl::rl_result::%s() called wrongly: %s\n", call, what.c_str());
    std::abort();
  }
  std::variant<T, rl_error> v_;
};

}  // namespace tandem::rl
