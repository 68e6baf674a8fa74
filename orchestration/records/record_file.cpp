// Whole lines appended under a lock (the writing and undoing: record_appender.cpp).
#include "orchestration/records/record_file.h"

#include <fcntl.h>

#include <cerrno>
#include <string>

namespace tandem::records {

file_result<std::shared_ptr<record_file>> record_file::create(const std::filesystem::path& path) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) return os_file_error(file_errc::cannot_create, "cannot create", path.string(), errno);
  return std::shared_ptr<record_file>(new record_file(fd, path));
}

std::optional<file_error> record_file::append(std::string_view line) {
  std::lock_guard<std::mutex> lock(mutex_);
  std::string text;
  text.reserve(line.size() + 1);
  text.append(line);
  text.push_back('\n');
  return file_.append(text);
}

std::optional<file_error> record_file::failure() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return file_.failure();
}

std::uint64_t record_file::size() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return file_.size();
}

}  // namespace tandem::records
