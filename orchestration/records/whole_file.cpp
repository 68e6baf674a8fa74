// Temp file, fsync, rename.
#include "orchestration/records/whole_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <string>

namespace tandem::records {

std::optional<file_error> write_whole_file(const std::filesystem::path& path, std::string_view text,
                                           const std::function<void()>& synced) {
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
  if (synced) synced();
  if (::rename(temp.c_str(), path.c_str()) != 0) {
    const int reason = errno;
    ::unlink(temp.c_str());
    return os_file_error(file_errc::cannot_write, "cannot write", path.string(), reason);
  }
  return std::nullopt;
}

std::optional<file_error> read_prefix(const std::filesystem::path& path, std::uint64_t bytes, std::string& out) {
  out.assign(static_cast<std::size_t>(bytes), '\0');
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return os_file_error(file_errc::cannot_create, "cannot read", path.string(), errno);
  std::size_t done = 0;
  while (done < out.size()) {
    const ssize_t n = ::read(fd, out.data() + done, out.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int err = n == 0 ? EIO : errno;
      ::close(fd);
      return file_error{file_errc::cannot_create, "cannot read " + path.string() + ": " +
                                                      (n == 0 ? "it holds fewer than " + std::to_string(bytes) + " bytes" : os_reason(err))};
    }
    done += static_cast<std::size_t>(n);
  }
  ::close(fd);
  return std::nullopt;
}

}  // namespace tandem::records
