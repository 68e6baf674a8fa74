// TFRecord framing and the hand-encoded Event protobuf; each event goes out whole through
// record_appender.h.
#include "orchestration/records/tensorboard_events.h"

#include <fcntl.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstdint>
#include <chrono>
#include <cmath>
#include <cstring>

namespace tandem::records {
namespace {

constexpr std::array<std::uint32_t, 256> crc32c_table() {
  std::array<std::uint32_t, 256> t{};
  for (std::uint32_t i = 0; i < 256; ++i) {
    std::uint32_t c = i;
    for (int k = 0; k < 8; ++k) c = (c & 1) ? (c >> 1) ^ 0x82f63b78u : c >> 1;
    t[i] = c;
  }
  return t;
}
constexpr auto crc_table = crc32c_table();

void put_le(std::string& out, std::uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

// Protobuf wire format: a key is (field << 3) | wire type; 0 varint, 1 fixed64, 2 length-delimited,
// 5 fixed32. A negative int64 is its two's complement as a ten-byte varint.
void put_varint(std::string& out, std::uint64_t v) {
  while (v >= 0x80) {
    out.push_back(static_cast<char>((v & 0x7f) | 0x80));
    v >>= 7;
  }
  out.push_back(static_cast<char>(v));
}
void put_key(std::string& out, int field, int wire_type) {
  put_varint(out, (static_cast<std::uint64_t>(field) << 3) | static_cast<std::uint64_t>(wire_type));
}
void put_bytes(std::string& out, int field, std::string_view bytes) {
  put_key(out, field, 2);
  put_varint(out, bytes.size());
  out.append(bytes);
}
void put_double(std::string& out, int field, double v) {
  std::uint64_t bits = 0;
  std::memcpy(&bits, &v, sizeof bits);
  put_key(out, field, 1);
  put_le(out, bits, 8);
}
void put_float(std::string& out, int field, float v) {
  std::uint32_t bits = 0;
  std::memcpy(&bits, &v, sizeof bits);
  put_key(out, field, 5);
  put_le(out, bits, 4);
}

std::string hostname() {
  char name[256] = {};
  if (::gethostname(name, sizeof name - 1) != 0 || name[0] == '\0') return "localhost";
  // A name is one path component: a '/' (never in a real hostname) would make it a directory.
  std::string s(name);
  for (char& c : s)
    if (c == '/') c = '_';
  return s;
}

}  // namespace

std::uint32_t crc32c(std::string_view data) {
  std::uint32_t c = 0xffffffffu;
  for (const char ch : data) c = crc_table[(c ^ static_cast<unsigned char>(ch)) & 0xff] ^ (c >> 8);
  return c ^ 0xffffffffu;
}

std::uint32_t masked_crc(std::uint32_t crc) { return ((crc >> 15) | (crc << 17)) + 0xa282ead8u; }

std::string tfrecord(std::string_view data) {
  std::string out;
  out.reserve(data.size() + 16);
  put_le(out, data.size(), 8);
  put_le(out, masked_crc(crc32c(out)), 4);
  out.append(data);
  put_le(out, masked_crc(crc32c(data)), 4);
  return out;
}

std::string file_version_event(double wall_time) {
  std::string e;
  put_double(e, 1, wall_time);
  put_bytes(e, 3, "brain.Event:2");
  return e;
}

std::string scalars_event(double wall_time, std::int64_t step, const std::vector<tagged_scalar>& scalars) {
  std::string summary;
  for (const auto& [tag, value] : scalars) {
    std::string v;
    put_bytes(v, 1, tag);
    put_float(v, 2, static_cast<float>(value));
    put_bytes(summary, 1, v);
  }
  std::string e;
  put_double(e, 1, wall_time);
  put_key(e, 2, 0);
  put_varint(e, static_cast<std::uint64_t>(step));
  put_bytes(e, 5, summary);
  return e;
}

double wall_seconds_now() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

std::optional<file_error> tensorboard_events::check_event_end(int fd, const std::filesystem::path& path, std::uint64_t size) {
  // Each record is uint64 length | uint32 masked CRC of the length | data | uint32 masked CRC of
  // the data: 16 bytes of framing around its data. The walk reads only headers that lie before
  // `size` (open_for_cut checked the file holds that much), each length checked against its CRC.
  const auto not_an_end = [&](const std::string& why) {
    return file_error{file_errc::cannot_create, path.string() + ": byte " + std::to_string(size) + " " + why};
  };
  const auto within = [&](std::uint64_t event) {
    return event == 0 ? not_an_end("is within the opening event")
                      : not_an_end("is not the end of an event (it falls within the event at byte " + std::to_string(event) + ")");
  };
  constexpr std::uint64_t framing = 8 + 4 + 4;
  if (size < framing) return within(0);  // the opening event is kept: no cut before its end
  std::uint64_t at = 0;
  while (at < size) {
    if (size - at < framing) return within(at);
    char header[12];
    std::size_t got = 0;
    while (got < sizeof header) {
      const ssize_t n = ::pread(fd, header + got, sizeof header - got, static_cast<off_t>(at + got));
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) return os_file_error(file_errc::cannot_create, "cannot reopen", path.string(), errno);
      if (n == 0) return os_file_error(file_errc::cannot_create, "cannot reopen", path.string(), EIO);  // shrank meanwhile
      got += static_cast<std::size_t>(n);
    }
    std::uint64_t length = 0;
    std::uint32_t length_crc = 0;
    for (int b = 7; b >= 0; --b) length = (length << 8) | static_cast<unsigned char>(header[b]);
    for (int b = 11; b >= 8; --b) length_crc = (length_crc << 8) | static_cast<unsigned char>(header[b]);
    if (masked_crc(crc32c(std::string_view(header, 8))) != length_crc)
      return file_error{file_errc::cannot_create,
                        path.string() + ": the event at byte " + std::to_string(at) + " has a damaged length (its CRC does not match)"};
    if (length > size - at - framing) return within(at);
    at += framing + length;
  }
  return std::nullopt;
}

std::optional<file_error> tensorboard_events::check_reopen(const std::filesystem::path& file, std::uint64_t size) {
  int fd = -1;
  if (auto e = open_for_cut(file, size, fd)) return e;
  auto e = check_event_end(fd, file, size);
  ::close(fd);
  return e;
}

file_result<std::unique_ptr<tensorboard_events>> tensorboard_events::reopen(const std::filesystem::path& file, std::uint64_t size) {
  int fd = -1;
  if (auto e = open_for_cut(file, size, fd)) return *e;
  if (auto e = check_event_end(fd, file, size)) {
    ::close(fd);
    return *e;
  }
  if (auto e = cut_to(fd, file, size)) return *e;
  return std::unique_ptr<tensorboard_events>(new tensorboard_events(fd, file, size));
}

file_result<std::unique_ptr<tensorboard_events>> tensorboard_events::open(const std::filesystem::path& dir,
                                                                         double wall_time) {
  const std::string base = "events.out.tfevents." + std::to_string(static_cast<long long>(std::floor(wall_time))) +
                           "." + hostname();
  std::filesystem::path path;
  int fd = -1, reason = 0;
  for (int n = 0; n < 100 && fd < 0; ++n) {
    path = dir / (n == 0 ? base : base + "." + std::to_string(n));
    fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    reason = errno;
    if (fd < 0 && reason != EEXIST) break;
  }
  if (fd < 0) return os_file_error(file_errc::cannot_create, "cannot create", path.string(), reason);
  std::unique_ptr<tensorboard_events> w(new tensorboard_events(fd, path));
  if (auto e = w->file_.append(tfrecord(file_version_event(wall_time)))) {
    w.reset();
    ::unlink(path.c_str());
    return *e;
  }
  return w;
}

std::optional<file_error> tensorboard_events::add_scalars(std::int64_t step, const std::vector<tagged_scalar>& scalars,
                                                          double wall_time) {
  return file_.append(tfrecord(scalars_event(wall_time, step, scalars)));
}

}  // namespace tandem::records
