// The names and texts of the run directory's errors.
#include "orchestration/records/file_error.h"

#include <system_error>

namespace tandem::records {

const char* to_string(file_errc code) {
  switch (code) {
    case file_errc::cannot_create_directory: return "cannot_create_directory";
    case file_errc::not_a_directory: return "not_a_directory";
    case file_errc::holds_another_run: return "holds_another_run";
    case file_errc::no_free_directory: return "no_free_directory";
    case file_errc::cannot_create: return "cannot_create";
    case file_errc::cannot_write: return "cannot_write";
  }
  return "unknown";
}

std::string os_reason(int os_error) { return std::generic_category().message(os_error); }

file_error os_file_error(file_errc code, const std::string& action, const std::string& path, int os_error) {
  return {code, action + " " + path + ": " + os_reason(os_error)};
}

}  // namespace tandem::records
