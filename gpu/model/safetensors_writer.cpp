// The safetensors writer: pwrite of the header and of each filled chunk, zero blocks skipped.
#include "gpu/model/safetensors_writer.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <unistd.h>

#include "gpu/model/json_text.h"

namespace tandem::gpu {
namespace {

constexpr std::int64_t hole_block = 64 * 1024;
constexpr std::int64_t chunk_bytes = std::int64_t{64} << 20;

bool all_zero(const std::byte* p, std::int64_t n) {
  static const std::byte zeros[hole_block] = {};
  return std::memcmp(p, zeros, static_cast<std::size_t>(n)) == 0;
}

status io_failure(const std::filesystem::path& path, const std::string& what) {
  return status(status_code::io_error, path.string() + ": " + what + ": " + std::strerror(errno));
}

status write_all(int fd, const std::filesystem::path& path, const std::byte* p, std::int64_t n, std::int64_t at) {
  while (n > 0) {
    const ssize_t w = ::pwrite(fd, p, static_cast<std::size_t>(std::min<std::int64_t>(n, 1 << 30)), at);
    if (w < 0) {
      if (errno == EINTR) continue;
      return io_failure(path, "write at byte " + std::to_string(at) + " failed");
    }
    p += w;
    n -= w;
    at += w;
  }
  return status::ok();
}

// Writes `n` bytes at file offset `at`, leaving aligned all-zero blocks unwritten.
status write_sparse(int fd, const std::filesystem::path& path, const std::byte* p, std::int64_t n, std::int64_t at) {
  std::int64_t done = 0;
  while (done < n) {
    const std::int64_t pos = at + done;
    const std::int64_t block_end = std::min(n, done + (hole_block - pos % hole_block));
    const std::int64_t len = block_end - done;
    if (!(len == hole_block && all_zero(p + done, len))) {
      if (status s = write_all(fd, path, p + done, len, pos); !s) return s;
    }
    done = block_end;
  }
  return status::ok();
}

}  // namespace

std::int64_t st_write_item::bytes() const {
  std::int64_t n = 1;
  for (std::int64_t e : shape) n *= e;
  return n * bits_of(type) / 8;
}

status sync_path(const std::filesystem::path& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return io_failure(path, "cannot open to sync");
  const int rc = ::fsync(fd);
  const int e = errno;
  ::close(fd);
  errno = e;
  return rc == 0 ? status::ok() : io_failure(path, "fsync failed");
}

status write_st_file(const std::filesystem::path& path, const std::vector<st_write_item>& items,
                     const std::map<std::string, std::string>& metadata) {
  std::vector<st_tensor> tensors;
  std::int64_t offset = 0;
  for (const st_write_item& item : items) {
    st_tensor t{item.name, item.type, item.shape, offset, offset + item.bytes()};
    offset = t.end;
    tensors.push_back(std::move(t));
  }
  const std::string header = st_serialize_header(tensors, metadata);
  const std::int64_t data_begin = static_cast<std::int64_t>(header.size());

  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) return io_failure(path, "cannot create");
  auto fail = [&](status s) {
    ::close(fd);
    std::error_code ec;
    std::filesystem::remove(path, ec);
    return s;
  };
  if (status s = write_all(fd, path, reinterpret_cast<const std::byte*>(header.data()), data_begin, 0); !s) return fail(s);
  // A multiple of 8 bytes, so every chunk starts on an element of any whole-byte dtype.
  std::vector<std::byte> buffer(static_cast<std::size_t>(std::clamp<std::int64_t>((offset + 7) / 8 * 8, 8, chunk_bytes)));
  for (std::size_t i = 0; i < items.size(); ++i) {
    const st_tensor& t = tensors[i];
    for (std::int64_t at = 0; at < t.bytes(); at += static_cast<std::int64_t>(buffer.size())) {
      const std::int64_t n = std::min<std::int64_t>(static_cast<std::int64_t>(buffer.size()), t.bytes() - at);
      std::span<std::byte> out(buffer.data(), static_cast<std::size_t>(n));
      if (status s = items[i].fill(at, out); !s)
        return fail(status(s.code(), path.string() + ": tensor " + quote_name(t.name) + ": " + s.message()));
      if (status s = write_sparse(fd, path, out.data(), n, data_begin + t.begin + at); !s) return fail(s);
    }
  }
  if (::ftruncate(fd, data_begin + offset) != 0) return fail(io_failure(path, "cannot set the file size"));
  if (::fsync(fd) != 0) return fail(io_failure(path, "fsync failed"));
  if (::close(fd) != 0) {
    std::error_code ec;
    std::filesystem::remove(path, ec);
    return io_failure(path, "close failed");
  }
  return status::ok();
}

}  // namespace tandem::gpu
