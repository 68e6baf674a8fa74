// mmap of a safetensors file and the validation of its header.
#include "gpu/model/safetensors_file.h"

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

namespace tandem::gpu {

struct st_file::mapping {
  std::filesystem::path path;
  st_header header;
  std::int64_t bytes = 0;
  const std::byte* base = nullptr;

  mapping() = default;
  mapping(const mapping&) = delete;
  mapping& operator=(const mapping&) = delete;
  ~mapping() {
    if (base) ::munmap(const_cast<std::byte*>(base), static_cast<std::size_t>(bytes));
  }
};

result<st_file> st_file::open(const std::filesystem::path& path) {
  const std::string name = path.string();
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    const int e = errno;
    return status(e == ENOENT ? status_code::not_found : status_code::io_error, name + ": cannot open: " + std::strerror(e));
  }
  struct ::stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return status(status_code::io_error, name + ": not a regular file");
  }
  auto m = std::make_shared<mapping>();
  m->path = path;
  m->bytes = st.st_size;
  if (m->bytes >= 8) {
    void* p = ::mmap(nullptr, static_cast<std::size_t>(m->bytes), PROT_READ, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) {
      const int e = errno;
      ::close(fd);
      return status(status_code::io_error, name + ": cannot map " + std::to_string(m->bytes) + " bytes: " + std::strerror(e));
    }
    m->base = static_cast<const std::byte*>(p);
  }
  ::close(fd);  // the mapping keeps the file open
  std::span<const std::byte> all(m->base, m->base ? static_cast<std::size_t>(m->bytes) : 0);
  auto header = parse_st_header(all, m->bytes, name);
  if (!header) return header.error();
  m->header = std::move(*header);
  st_file f;
  f.map_ = std::move(m);
  return f;
}

const std::filesystem::path& st_file::path() const { return map_->path; }
const st_header& st_file::header() const { return map_->header; }
std::int64_t st_file::file_bytes() const { return map_->bytes; }

std::span<const std::byte> st_file::data(const st_tensor& t) const {
  return {map_->base + map_->header.data_begin + t.begin, static_cast<std::size_t>(t.bytes())};
}

void st_file::will_read(const st_tensor& t) const {
  if (t.bytes() == 0) return;
  const std::int64_t page = ::sysconf(_SC_PAGESIZE);
  const std::int64_t first = (map_->header.data_begin + t.begin) / page * page;
  const std::int64_t last = map_->header.data_begin + t.end;
  ::madvise(const_cast<std::byte*>(map_->base) + first, static_cast<std::size_t>(last - first), MADV_SEQUENTIAL);
}

void st_file::done_reading(const st_tensor& t, std::int64_t begin, std::int64_t end) const {
  const std::int64_t page = ::sysconf(_SC_PAGESIZE);
  const std::int64_t first = (map_->header.data_begin + t.begin + begin + page - 1) / page * page;
  const std::int64_t last = (map_->header.data_begin + t.begin + end) / page * page;
  if (last > first) ::madvise(const_cast<std::byte*>(map_->base) + first, static_cast<std::size_t>(last - first), MADV_DONTNEED);
}

}  // namespace tandem::gpu
