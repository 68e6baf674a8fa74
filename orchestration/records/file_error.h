// What can go wrong with a run's directory and the files in it, as typed errors: a code and the
// message the user reads, which names the path and, for a failed system call, the OS reason
// ("cannot write logs/x/generations.jsonl: No space left on device").
#pragma once

#include <cstdio>
#include <cstdlib>
#include <string>
#include <utility>
#include <variant>

namespace tandem::records {

enum class file_errc {
  cannot_create_directory,  ///< the directory or one of its parents could not be made
  not_a_directory,          ///< the path, or one of its parents, is not a directory
  holds_another_run,        ///< the directory holds another run's records (run_directory.h)
  no_free_directory,        ///< --fresh found no free sibling directory
  cannot_create,            ///< a file could not be made in the directory
  cannot_write,             ///< a write failed; the file keeps only its whole records
};

/// The name of a code ("cannot_write").
const char* to_string(file_errc code);

struct file_error {
  file_errc code = file_errc::cannot_write;
  std::string message;  ///< the whole sentence, naming the path
};

/// "<action> <path>: <the OS reason for os_error>", e.g. "cannot create logs/x/metrics.jsonl:
/// Read-only file system".
file_error os_file_error(file_errc code, const std::string& action, const std::string& path, int os_error);

/// The OS's text for an errno value ("No space left on device").
std::string os_reason(int os_error);

/// A value or the reason there is none. value() on an error (or error() on a value) is a
/// programming error: it prints what was called and aborts.
template <class T>
class file_result {
 public:
  file_result(T v) : v_(std::in_place_index<0>, std::move(v)) {}
  file_result(file_error e) : v_(std::in_place_index<1>, std::move(e)) {}

  explicit operator bool() const { return v_.index() == 0; }
  T& value() {
    if (v_.index() != 0) misuse("value", std::get<1>(v_).message);
    return std::get<0>(v_);
  }
  const file_error& error() const {
    if (v_.index() != 1) misuse("error", "it holds a value");
    return std::get<1>(v_);
  }
  T& operator*() { return value(); }
  T* operator->() { return &value(); }

 private:
  [[noreturn]] static void misuse(const char* call, const std::string& what) {
    std::fprintf(stderr, "tandem::records::file_result::%s() called wrongly: %s\n", call, what.c_str());
    std::abort();
  }
  std::variant<T, file_error> v_;
};

}  // namespace tandem::records
