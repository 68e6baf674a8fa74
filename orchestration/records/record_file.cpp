// Whole-record appends: one write(2) per line, undone by ftruncate when it fails or falls short.
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

record_file::~record_file() {
  if (fd_ >= 0) ::close(fd_);
}

std::optional<file_error> record_file::append(std::string_view line) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (failure_) return failure_;
  std::string text;
  text.reserve(line.size() + 1);
  text.append(line);
  text.push_back('\n');
  // One write of the whole line. A regular file writes less only when it cannot take more (a
  // size limit, a full disk) or a signal arrived: the rest is tried once more, which either
  // completes the line or says why it cannot be.
  std::size_t done = 0;
  int reason = 0;
  while (done < text.size()) {
    const ssize_t n = ::write(fd_, text.data() + done, text.size() - done);
    if (n > 0) {
      done += static_cast<std::size_t>(n);
    } else if (n < 0 && errno == EINTR) {
      continue;
    } else {
      reason = n < 0 ? errno : EIO;  // no progress and no reason: report it as an I/O error
      break;
    }
  }
  if (done == text.size()) {
    size_ += done;
    return std::nullopt;
  }
  file_error e = os_file_error(file_errc::cannot_write, "cannot write", path_.string(), reason);
  if (::ftruncate(fd_, static_cast<off_t>(size_)) != 0)
    e.message += " (and cannot cut it back to its last whole record at byte " + std::to_string(size_) +
                 ": " + os_reason(errno) + ")";
  ::lseek(fd_, static_cast<off_t>(size_), SEEK_SET);
  failure_ = e;
  return failure_;
}

std::optional<file_error> record_file::failure() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return failure_;
}

std::uint64_t record_file::size() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return size_;
}

}  // namespace tandem::records
