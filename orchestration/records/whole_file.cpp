// Temp file, fsync, rename.
#include "orchestration/records/whole_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <string>

namespace tandem::records {

std::optional<file_error> write_whole_file(const std::filesystem::path& path, std::string_view text) {
  const std::filesystem::path temp = path.string() + ".tmp";
  const int fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return os_file_error(file_errc::cannot_create, "cannot create", temp.string(), errno);
  const auto fail = [&](int reason) {
    ::close(fd);
    ::unlink(temp.c_str());
    return os_file_error(file_errc::cannot_write, "cannot write", path.string(), reason);
  };
  std::size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n > 0) done += static_cast<std::size_t>(n);
    else if (n < 0 && errno == EINTR) continue;
    else return fail(n < 0 ? errno : EIO);
  }
  if (::fsync(fd) != 0) return fail(errno);
  if (::close(fd) != 0) {
    const int reason = errno;
    ::unlink(temp.c_str());
    return os_file_error(file_errc::cannot_write, "cannot write", path.string(), reason);
  }
  if (::rename(temp.c_str(), path.c_str()) != 0) {
    const int reason = errno;
    ::unlink(temp.c_str());
    return os_file_error(file_errc::cannot_write, "cannot write", path.string(), reason);
  }
  return std::nullopt;
}

}  // namespace tandem::records
