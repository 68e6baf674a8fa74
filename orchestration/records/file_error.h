// What can go wrong with a run's directory and the files in it, as typed errors: a code and the
// message the user reads, which names the path and, for a failed system call, the OS reason
// ("cannot write logs/x/generations.jsonl: No space left on device").
#pragma once

#include <string>
#include <utility>

#include "orchestration/result.h"

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

/// A value or the reason there is none (orchestration/result.h).
template <class T>
using file_result = result_or<T, file_error>;

}  // namespace tandem::records
