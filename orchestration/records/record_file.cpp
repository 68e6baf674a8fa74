// Whole lines appended under a lock (the writing and undoing: record_appender.cpp).
#include "orchestration/records/record_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <string>

namespace tandem::records {

file_result<std::shared_ptr<record_file>> record_file::create(const std::filesystem::path& path) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) return os_file_error(file_errc::cannot_create, "cannot create", path.string(), errno);
  return std::shared_ptr<record_file>(new record_file(fd, path));
}

std::optional<file_error> record_file::check_record_end(int fd, const std::filesystem::path& path, std::uint64_t size) {
  if (size == 0) return std::nullopt;  // nothing kept: the cut is at the start
  char last = 0;
  ssize_t n = 0;
  do n = ::pread(fd, &last, 1, static_cast<off_t>(size - 1));
  while (n < 0 && errno == EINTR);
  if (n < 0) return os_file_error(file_errc::cannot_create, "cannot reopen", path.string(), errno);
  if (n != 1 || last != '\n')
    return file_error{file_errc::cannot_create, path.string() + ": byte " + std::to_string(size) + " is not the end of a record"};
  return std::nullopt;
}

std::optional<file_error> record_file::check_reopen(const std::filesystem::path& path, std::uint64_t size) {
  int fd = -1;
  if (auto e = open_for_cut(path, size, fd)) return e;
  auto e = check_record_end(fd, path, size);
  ::close(fd);
  return e;
}

file_result<std::shared_ptr<record_file>> record_file::reopen(const std::filesystem::path& path, std::uint64_t size) {
  int fd = -1;
  if (auto e = open_for_cut(path, size, fd)) return *e;
  if (auto e = check_record_end(fd, path, size)) {
    ::close(fd);
    return *e;
  }
  if (auto e = cut_to(fd, path, size)) return *e;
  return std::shared_ptr<record_file>(new record_file(fd, path, size));
}

file_result<std::shared_ptr<record_file>> record_file::append_to(const std::filesystem::path& path) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
  if (fd < 0) return os_file_error(file_errc::cannot_create, "cannot reopen", path.string(), errno);
  const off_t end = ::lseek(fd, 0, SEEK_END);
  if (end < 0) {
    const int err = errno;
    ::close(fd);
    return os_file_error(file_errc::cannot_create, "cannot reopen", path.string(), err);
  }
  return std::shared_ptr<record_file>(new record_file(fd, path, static_cast<std::uint64_t>(end)));
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
