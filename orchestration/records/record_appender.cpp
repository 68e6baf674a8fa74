// Whole-record appends: one write(2) per record, undone by ftruncate when it fails or falls short.
#include "orchestration/records/record_appender.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <string>
#include <utility>

namespace tandem::records {

record_appender::record_appender(int fd, std::filesystem::path path, std::string unit, std::uint64_t size)
    : fd_(fd), path_(std::move(path)), unit_(std::move(unit)), size_(size) {}

std::optional<file_error> open_for_cut(const std::filesystem::path& path, std::uint64_t size, int& fd_out) {
  fd_out = -1;
  const int fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
  if (fd < 0) return os_file_error(file_errc::cannot_create, "cannot reopen", path.string(), errno);
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    const int err = errno;
    ::close(fd);
    return os_file_error(file_errc::cannot_create, "cannot reopen", path.string(), err);
  }
  const auto have = static_cast<std::uint64_t>(st.st_size);
  if (have < size) {
    ::close(fd);
    return file_error{file_errc::cannot_create, path.string() + " holds " + std::to_string(have) + " bytes, fewer than the " +
                                                    std::to_string(size) + " its checkpoint recorded"};
  }
  fd_out = fd;
  return std::nullopt;
}

std::optional<file_error> cut_to(int& fd, const std::filesystem::path& path, std::uint64_t size) {
  if (::ftruncate(fd, static_cast<off_t>(size)) != 0 || ::fsync(fd) != 0 || ::lseek(fd, static_cast<off_t>(size), SEEK_SET) < 0) {
    const int err = errno;
    ::close(fd);
    fd = -1;
    return os_file_error(file_errc::cannot_write, "cannot cut", path.string() + " back to " + std::to_string(size) + " bytes", err);
  }
  return std::nullopt;
}

record_appender::~record_appender() {
  if (fd_ >= 0) ::close(fd_);
}

std::optional<file_error> record_appender::append(std::string_view record) {
  if (failure_) return failure_;
  // A regular file writes less only when it cannot take more (a size limit, a full disk) or a
  // signal arrived: the rest is tried once more, which either completes the record or says why not.
  std::size_t done = 0;
  int reason = 0;
  while (done < record.size()) {
    const ssize_t n = ::write(fd_, record.data() + done, record.size() - done);
    if (n > 0) {
      done += static_cast<std::size_t>(n);
    } else if (n < 0 && errno == EINTR) {
      continue;
    } else {
      reason = n < 0 ? errno : EIO;  // no progress and no reason: report it as an I/O error
      break;
    }
  }
  if (done == record.size()) {
    size_ += done;
    return std::nullopt;
  }
  file_error e = os_file_error(file_errc::cannot_write, "cannot write", path_.string(), reason);
  if (::ftruncate(fd_, static_cast<off_t>(size_)) != 0)
    e.message += " (and cannot cut it back to its last whole " + unit_ + " at byte " + std::to_string(size_) + ": " +
                 os_reason(errno) + ")";
  ::lseek(fd_, static_cast<off_t>(size_), SEEK_SET);
  failure_ = e;
  return failure_;
}

}  // namespace tandem::records
