// The control-plane codec (wire format in codec.hpp). Each struct's fields are listed once, in
// `fields()` (the structs of plain/ in their own header); three visitors walk those lists: `sizer` (the encoded size, before anything is
// allocated), `writer` (the bytes) and `reader` (decoding, with a field path for error messages).
#include "orchestration/control/codec.hpp"

#include <array>
#include <bit>
#include <concepts>
#include <algorithm>
#include <limits>

namespace tandem::control {
namespace {

// ---- field lists: the one place that says what a struct puts on the wire, in order -----------

/// M is T or const T, so one list serves encoding (const) and decoding.
template <class M, class T>
concept is = std::same_as<std::remove_const_t<M>, T>;

template <class F, is<roles> M> void fields(F& f, M& m) { f("policy", m.policy); f("rollout", m.rollout); }
template <class F, is<peer> M>
void fields(F& f, M& m) {
  f("rank", m.rank); f("data_parallel_endpoint", m.data_parallel_endpoint); f("refit_endpoint", m.refit_endpoint);
}
/// The structs of plain/ (the manifest entry, the generate, logprobs and train jobs and their
/// answers, and what they hold) bring their own field list, the one CAF's inspection reads too
/// (plain/fields.h).
template <class F, class M>
  requires plain::plain_struct<std::remove_const_t<M>>
void fields(F& f, M& m) {
  plain::for_each_field(m, [&](const char* name, auto& value) { f(name, value); });
}

template <class F, is<hello> M>
void fields(F& f, M& m) {
  f("rank", m.rank); f("world_size", m.world_size); f("pid", m.pid); f("hostname", m.hostname);
  f("device", m.device); f("version", m.version); f("offered", m.offered);
}
template <class F, is<welcome> M>
void fields(F& f, M& m) {
  f("assigned", m.assigned); f("data_parallel_rank", m.data_parallel_rank);
  f("data_parallel_size", m.data_parallel_size); f("rollout_rank", m.rollout_rank);
  f("rollout_size", m.rollout_size); f("recipe_yaml", m.recipe_yaml); f("run_id", m.run_id);
  f("heartbeat_interval_ms", m.heartbeat_interval_ms); f("heartbeat_timeout_ms", m.heartbeat_timeout_ms);
}
template <class F, is<heartbeat> M> void fields(F& f, M& m) { f("sender_rank", m.sender_rank); f("sequence", m.sequence); }
template <class F, is<data_endpoint> M>
void fields(F& f, M& m) {
  f("rank", m.rank); f("data_parallel_endpoint", m.data_parallel_endpoint); f("refit_endpoint", m.refit_endpoint);
  f("nccl_unique_id", m.nccl_unique_id);
}
template <class F, is<peer_table> M>
void fields(F& f, M& m) {
  f("peers", m.peers); f("ring", m.ring); f("refit_group", m.refit_group); f("nccl_unique_id", m.nccl_unique_id);
}
template <class F, is<manifest> M> void fields(F& f, M& m) { f("weight_version", m.weight_version); f("entries", m.entries); }
template <class F, is<manifest_check> M> void fields(F& f, M& m) { f("bucket_bytes", m.bucket_bytes); f("entries", m.entries); }
template <class F, is<manifest_result> M>
void fields(F& f, M& m) {
  f("rank", m.rank); f("ok", m.ok); f("message", m.message); f("weight_version", m.weight_version);
  f("bucket_count", m.bucket_count); f("total_bytes", m.total_bytes);
}
template <class F, is<generate_request> M> void fields(F& f, M& m) { f("job", m.job); }
template <class F, is<generate_result> M>
void fields(F& f, M& m) { f("weight_version", m.weight_version); f("sequences", m.sequences); }
template <class F, is<logprob_request> M> void fields(F& f, M& m) { f("step", m.step); f("job", m.job); }
template <class F, is<logprob_result> M> void fields(F& f, M& m) { f("step", m.step); f("result", m.result); }
template <class F, is<train_request> M> void fields(F& f, M& m) { f("step", m.step); f("job", m.job); }
template <class F, is<train_result> M> void fields(F& f, M& m) { f("step", m.step); f("report", m.report); }
template <class F, is<save_request> M> void fields(F& f, M& m) { f("step", m.step); f("job", m.job); }
template <class F, is<save_result> M> void fields(F& f, M& m) { f("step", m.step); f("report", m.report); }
template <class F, is<load_request> M> void fields(F& f, M& m) { f("step", m.step); f("job", m.job); }
template <class F, is<load_result> M> void fields(F& f, M& m) { f("step", m.step); f("report", m.report); }
template <class F, is<refit_begin> M>
void fields(F& f, M& m) {
  f("weight_version", m.weight_version); f("bucket_count", m.bucket_count); f("bucket_bytes", m.bucket_bytes);
  f("transport", m.transport); f("root_rank", m.root_rank); f("checksums", m.checksums);
}
template <class F, is<refit_ack> M>
void fields(F& f, M& m) {
  f("rank", m.rank); f("weight_version", m.weight_version); f("stage", m.stage); f("ok", m.ok); f("error", m.error);
  f("error_code", m.error_code); f("live_version", m.live_version); f("aborted", m.aborted);
  f("failed_bucket", m.failed_bucket); f("checksums", m.checksums); f("checksums_matched", m.checksums_matched);
  f("checksum_mismatch", m.checksum_mismatch);
}
template <class F, is<refit_commit> M> void fields(F& f, M& m) { f("weight_version", m.weight_version); }
template <class F, is<refit_abort> M> void fields(F& f, M& m) { f("weight_version", m.weight_version); }
template <class F, is<error> M>
void fields(F& f, M& m) { f("code", m.code); f("text", m.text); f("rank", m.rank); f("request", m.request); }
template <class F, is<shutdown> M> void fields(F& f, M& m) { f("reason", m.reason); f("failed", m.failed); }
template <class F, is<goodbye> M> void fields(F& f, M& m) { f("rank", m.rank); f("reason", m.reason); }

// ---- type traits ----------------------------------------------------------------------------

/// Integers (bool excluded) and floating point: fixed width, no validation.
template <class T>
concept number = (std::integral<T> && !std::same_as<T, bool>) || std::same_as<T, float> || std::same_as<T, double>;
static_assert(sizeof(float) == 4 && std::numeric_limits<float>::is_iec559, "float is IEEE-754 binary32");
static_assert(sizeof(double) == 8 && std::numeric_limits<double>::is_iec559, "double is IEEE-754 binary64");

template <class T> struct is_vector : std::false_type {};
template <class T> struct is_vector<std::vector<T>> : std::true_type {};

/// The closed enums and their known values (plain/'s enums bring theirs: finish_reason, dtype).
bool known(refit_transport t) { return t == refit_transport::colocated_bump || t == refit_transport::broadcast; }
bool known(refit_stage s) { return static_cast<std::uint8_t>(s) <= static_cast<std::uint8_t>(refit_stage::bumped); }

/// The name a wire type goes by in error messages.
template <class T>
std::string type_name() {
  if constexpr (std::same_as<T, bool>) return "bool";
  else if constexpr (std::same_as<T, float>) return "float32";
  else if constexpr (std::same_as<T, double>) return "float64";
  else if constexpr (std::integral<T>) return (std::is_signed_v<T> ? "int" : "uint") + std::to_string(8 * sizeof(T));
  else if constexpr (std::same_as<T, finish_reason>) return "finish_reason";
  else if constexpr (std::same_as<T, plain::dtype>) return "dtype";
  else if constexpr (std::same_as<T, refit_transport>) return "refit_transport";
  else if constexpr (std::same_as<T, refit_stage>) return "refit_stage";
  else if constexpr (std::same_as<T, plain::save_part>) return "save_part";
  else if constexpr (std::same_as<T, std::string>) return "string";
  else if constexpr (std::same_as<T, std::vector<std::byte>>) return "bytes";
  else if constexpr (is_vector<T>::value) return "vector<" + type_name<typename T::value_type>() + ">";
  else if constexpr (std::same_as<T, roles>) return "roles";
  else if constexpr (std::same_as<T, peer>) return "peer";
  else if constexpr (plain::plain_struct<T>) return T::type_name;
  else return "struct";
}

// ---- little-endian scalars ------------------------------------------------------------------

template <class T>
using wire_uint = std::conditional_t<sizeof(T) == 1, std::uint8_t,
                  std::conditional_t<sizeof(T) == 2, std::uint16_t,
                  std::conditional_t<sizeof(T) == 4, std::uint32_t, std::uint64_t>>>;

template <class U>
U load_le(const std::byte* p) {
  U v = 0;
  for (std::size_t i = 0; i < sizeof(U); ++i) v = static_cast<U>(v | static_cast<U>(std::to_integer<U>(p[i]) << (8 * i)));
  return v;
}

template <class U>
void store_le(std::byte* p, U v) {
  for (std::size_t i = 0; i < sizeof(U); ++i) p[i] = static_cast<std::byte>((v >> (8 * i)) & 0xFFu);
}

/// A number, bool or enum from its wire bits, and back.
template <class T>
T from_bits(wire_uint<T> u) {
  if constexpr (std::is_enum_v<T>) return static_cast<T>(u);
  else if constexpr (std::same_as<T, bool>) return u != 0;
  else return std::bit_cast<T>(u);
}
template <class T>
wire_uint<T> to_bits(T v) {
  if constexpr (std::is_enum_v<T>) return static_cast<wire_uint<T>>(v);
  else if constexpr (std::same_as<T, bool>) return v ? 1 : 0;
  else return std::bit_cast<wire_uint<T>>(v);
}

// ---- sizer: bytes of a body, without allocating ---------------------------------------------

class sizer {
 public:
  std::size_t size = 0;
  const char* too_long = nullptr;  ///< the first field whose length does not fit a uint32
  std::size_t too_long_length = 0;

  template <class T>
  void operator()(const char* name, const T& v) {
    if constexpr (number<T> || std::same_as<T, bool> || std::is_enum_v<T>) {
      size += sizeof(T);
    } else if constexpr (std::same_as<T, std::string> || std::same_as<T, std::vector<std::byte>>) {
      length(name, v.size());
      size += v.size();
    } else if constexpr (is_vector<T>::value) {
      length(name, v.size());
      if constexpr (number<typename T::value_type>) {
        size += v.size() * sizeof(typename T::value_type);
      } else {
        for (const auto& item : v) (*this)(name, item);
      }
    } else {
      fields(*this, v);
    }
  }

 private:
  void length(const char* name, std::size_t n) {
    size += 4;
    if (n > std::numeric_limits<std::uint32_t>::max() && too_long == nullptr) {
      too_long = name;
      too_long_length = n;
    }
  }
};

/// The fewest bytes a T takes on the wire (every string and vector empty).
template <class T>
std::size_t min_wire_size() {
  static const std::size_t n = [] {
    sizer s;
    s("", T{});
    return s.size;
  }();
  return n;
}

// ---- writer: the bytes, into a frame already sized by the sizer -----------------------------

class writer {
 public:
  explicit writer(std::byte* at) : at_(at) {}
  std::byte* position() const { return at_; }

  template <class T>
  void operator()(const char* name, const T& v) {
    if constexpr (number<T> || std::same_as<T, bool> || std::is_enum_v<T>) {
      put(v);
    } else if constexpr (std::same_as<T, std::string> || std::same_as<T, std::vector<std::byte>>) {
      put(static_cast<std::uint32_t>(v.size()));
      for (const auto c : v) *at_++ = static_cast<std::byte>(c);
    } else if constexpr (is_vector<T>::value) {
      put(static_cast<std::uint32_t>(v.size()));
      for (const auto& item : v) (*this)(name, item);
    } else {
      fields(*this, v);
    }
  }

 private:
  template <class T>
  void put(T v) {
    store_le(at_, to_bits(v));
    at_ += sizeof(T);
  }
  std::byte* at_;
};

// ---- reader: decoding with a field path for error messages ----------------------------------

class reader {
 public:
  reader(std::span<const std::byte> frame, std::size_t position, std::string_view kind)
      : frame_(frame), pos_(position), kind_(kind) {}

  bool failed() const { return failed_; }
  std::size_t position() const { return pos_; }
  codec_error take_error() { return std::move(error_); }

  template <class T>
  void operator()(const char* name, T& v) {
    if (failed_) return;
    path_.push_back({name, 0});
    read(v);
    path_.pop_back();
  }

 private:
  struct step {
    const char* name;   ///< nullptr: a vector item
    std::size_t index;
  };

  std::size_t left() const { return frame_.size() - pos_; }

  /// "generate_request.job.requests[2].prompt"
  std::string path() const {
    std::string p(kind_);
    for (const step& s : path_) {
      if (s.name != nullptr) p += std::string(".") + s.name;
      else p += "[" + std::to_string(s.index) + "]";
    }
    return p;
  }

  void fail(codec_errc code, std::size_t offset, const std::string& text) {
    failed_ = true;
    error_ = codec_error{code, offset, text};
  }

  /// Fails unless `n` bytes are left; `what` describes what needs them.
  bool need(std::size_t n, const std::string& what, const std::string& items = "") {
    if (n <= left()) return true;
    fail(codec_errc::truncated, pos_,
         "truncated body: " + what + " " + path() + " at byte " + std::to_string(pos_) + " needs " +
             (items.empty() ? "" : "at least ") + std::to_string(n) + " bytes" + items + ", " +
             std::to_string(left()) + " left");
    return false;
  }

  template <class T>
  bool scalar(T& v) {
    if (!need(sizeof(T), type_name<T>())) return false;
    v = from_bits<T>(load_le<wire_uint<T>>(frame_.data() + pos_));
    pos_ += sizeof(T);
    return true;
  }

  bool length(std::uint32_t& n, const std::string& what) {
    if (!need(4, "length of " + what)) return false;
    n = load_le<std::uint32_t>(frame_.data() + pos_);
    pos_ += 4;
    return true;
  }

  template <class T>
  void read(T& v) {
    if constexpr (number<T>) {
      scalar(v);
    } else if constexpr (std::same_as<T, bool> || std::is_enum_v<T>) {
      const std::size_t at = pos_;
      wire_uint<T> bits = 0;
      if (!scalar(bits)) return;
      bool ok = false;
      if constexpr (std::same_as<T, bool>) ok = bits <= 1;
      else ok = known(from_bits<T>(bits));
      if (!ok) {
        fail(codec_errc::bad_value, at,
             "bad value: " + type_name<T>() + " " + path() + " at byte " + std::to_string(at) + " is " +
                 std::to_string(bits) + (std::same_as<T, bool> ? ", expected 0 or 1" : ", not a known value"));
        return;
      }
      v = from_bits<T>(bits);
    } else if constexpr (std::same_as<T, std::string> || std::same_as<T, std::vector<std::byte>>) {
      std::uint32_t n = 0;
      if (!length(n, type_name<T>()) || !need(n, type_name<T>())) return;
      const auto* p = frame_.data() + pos_;
      if constexpr (std::same_as<T, std::string>) v.assign(reinterpret_cast<const char*>(p), n);
      else v.assign(p, p + n);
      pos_ += n;
    } else if constexpr (is_vector<T>::value) {
      using item = typename T::value_type;
      std::uint32_t n = 0;
      if (!length(n, type_name<T>())) return;
      if constexpr (number<item>) {
        // Exactly the bytes the items occupy: checked before the allocation.
        if (!need(std::size_t{n} * sizeof(item), type_name<T>(), "")) return;
        v.resize(n);
        for (auto& x : v) {
          x = from_bits<item>(load_le<wire_uint<item>>(frame_.data() + pos_));
          pos_ += sizeof(item);
        }
      } else {
        // Every item takes at least min_wire_size bytes; items are appended as they decode, so
        // memory grows with the bytes actually consumed.
        if (!need(std::size_t{n} * min_wire_size<item>(), type_name<T>(), " for " + std::to_string(n) + " items"))
          return;
        v.clear();
        for (std::uint32_t i = 0; i < n && !failed_; ++i) {
          path_.push_back({nullptr, i});
          item x{};
          read(x);
          path_.pop_back();
          if (!failed_) v.push_back(std::move(x));
        }
      }
    } else {
      fields(*this, v);
    }
  }

  std::span<const std::byte> frame_;
  std::size_t pos_;
  std::string_view kind_;
  std::vector<step> path_;
  bool failed_ = false;
  codec_error error_;
};

// ---- per-kind dispatch ----------------------------------------------------------------------

template <class M>
message decode_as(reader& r) {
  M m{};
  fields(r, m);
  return message(std::in_place_type<M>, std::move(m));
}

using decode_fn = message (*)(reader&);

template <std::size_t... i>
constexpr std::array<decode_fn, sizeof...(i)> make_decoders(std::index_sequence<i...>) {
  return {&decode_as<std::variant_alternative_t<i, message>>...};
}

/// decoders[code - 1] decodes the body of kind `code`.
constexpr auto decoders = make_decoders(std::make_index_sequence<kind_count>{});

codec_error make_error(codec_errc code, std::size_t offset, std::string text) {
  return codec_error{code, offset, std::move(text)};
}

std::string hex32(std::uint32_t v) {
  static constexpr char digits[] = "0123456789ABCDEF";
  std::string s = "0x";
  for (int shift = 28; shift >= 0; shift -= 4) s += digits[(v >> shift) & 0xFu];
  return s;
}

}  // namespace

std::string_view to_string(codec_errc code) {
  switch (code) {
    case codec_errc::bad_magic: return "bad_magic";
    case codec_errc::version_mismatch: return "version_mismatch";
    case codec_errc::unknown_kind: return "unknown_kind";
    case codec_errc::truncated: return "truncated";
    case codec_errc::too_large: return "too_large";
    case codec_errc::bad_value: return "bad_value";
    case codec_errc::trailing_bytes: return "trailing_bytes";
  }
  return "unknown";
}

std::size_t max_frame_bytes_of(message_kind kind) {
  constexpr std::size_t KiB = 1024, MiB = 1024 * KiB;
  switch (kind) {
    case message_kind::heartbeat: return 1 * KiB;
    case message_kind::hello:
    case message_kind::data_endpoint: return 64 * KiB;
    case message_kind::error:
    case message_kind::shutdown:
    case message_kind::goodbye:
    case message_kind::manifest_result:
    case message_kind::refit_commit:
    case message_kind::refit_abort:
    case message_kind::save_request:
    case message_kind::save_result:
    case message_kind::load_request:
    case message_kind::load_result: return 1 * MiB;
    case message_kind::welcome:
    case message_kind::peer_table:
    case message_kind::train_result:
    case message_kind::refit_begin:
    case message_kind::refit_ack: return 16 * MiB;
    case message_kind::manifest:
    case message_kind::manifest_check: return 16 * MiB;
    case message_kind::generate_request:
    case message_kind::generate_result:
    case message_kind::logprob_request:
    case message_kind::logprob_result:
    case message_kind::train_request: return max_frame_bytes;
  }
  return max_frame_bytes;
}

template <message_struct M>
codec_result<frame> encode(const M& m, std::size_t limit) {
  const std::string kind(to_string(M::kind));
  limit = std::min(limit, max_frame_bytes_of(M::kind));
  sizer s;
  fields(s, m);
  if (s.too_long != nullptr) {
    return make_error(codec_errc::too_large, 0,
                      "too large: " + kind + "." + s.too_long + " holds " + std::to_string(s.too_long_length) +
                          " items or bytes, above the uint32 length limit");
  }
  const std::size_t body = s.size;
  if (body > std::numeric_limits<std::uint32_t>::max() || body > limit || header_bytes > limit - body) {
    return make_error(codec_errc::too_large, 0,
                      "too large: a " + kind + " frame of " + std::to_string(header_bytes + body) +
                          " bytes exceeds the frame limit of " + std::to_string(limit) + " bytes");
  }
  frame out(header_bytes + body);
  store_le(out.data(), frame_magic);
  store_le(out.data() + 4, protocol_version);
  store_le(out.data() + 6, static_cast<std::uint16_t>(M::kind));
  store_le(out.data() + 8, static_cast<std::uint32_t>(body));
  writer w(out.data() + header_bytes);
  fields(w, m);
  if (w.position() != out.data() + out.size()) {  // the sizer and the writer disagree: a codec bug
    std::fprintf(stderr, "tandem::control::encode: %s wrote %td bytes, sized %zu\n", kind.c_str(),
                 w.position() - out.data(), out.size());
    std::abort();
  }
  return out;
}

codec_result<frame> encode(const message& m, std::size_t limit) {
  return std::visit([limit](const auto& alternative) { return encode(alternative, limit); }, m);
}

codec_result<message> decode(std::span<const std::byte> bytes, std::size_t limit) {
  const std::size_t size = bytes.size();
  if (size > limit) {
    return make_error(codec_errc::too_large, 0,
                      "too large: a frame of " + std::to_string(size) + " bytes exceeds the frame limit of " +
                          std::to_string(limit) + " bytes");
  }
  if (size < header_bytes) {
    return make_error(codec_errc::truncated, size,
                      "truncated header: the frame has " + std::to_string(size) + " bytes, a header needs " +
                          std::to_string(header_bytes));
  }
  const std::byte* p = bytes.data();
  if (const auto magic = load_le<std::uint32_t>(p); magic != frame_magic) {
    return make_error(codec_errc::bad_magic, 0,
                      "bad magic " + hex32(magic) + " at byte 0, expected " + hex32(frame_magic) + " (\"TNDM\")");
  }
  if (const auto version = load_le<std::uint16_t>(p + 4); version != protocol_version) {
    return make_error(codec_errc::version_mismatch, 4,
                      "protocol version " + std::to_string(version) + " at byte 4, this build speaks " +
                          std::to_string(protocol_version));
  }
  const auto code = load_le<std::uint16_t>(p + 6);
  if (code == 0 || code > kind_count) {
    return make_error(codec_errc::unknown_kind, 6,
                      "unknown kind " + std::to_string(code) + " at byte 6, this build knows 1 to " +
                          std::to_string(kind_count));
  }
  const std::string_view kind = to_string(static_cast<message_kind>(code));
  const std::size_t body = load_le<std::uint32_t>(p + 8);
  if (body > limit || header_bytes > limit - body) {
    return make_error(codec_errc::too_large, 8,
                      "too large: the " + std::string(kind) + " body length " + std::to_string(body) +
                          " at byte 8 exceeds the frame limit of " + std::to_string(limit) + " bytes");
  }
  if (const std::size_t of_kind = max_frame_bytes_of(static_cast<message_kind>(code));
      body > of_kind || header_bytes > of_kind - body) {
    return make_error(codec_errc::too_large, 8,
                      "too large: the " + std::string(kind) + " body length " + std::to_string(body) +
                          " at byte 8 exceeds the " + std::to_string(of_kind) + "-byte limit of a " + std::string(kind) +
                          " frame");
  }
  const std::size_t present = size - header_bytes;
  if (body > present) {
    return make_error(codec_errc::truncated, size,
                      "truncated body: the header declares a " + std::string(kind) + " body of " +
                          std::to_string(body) + " bytes, " + std::to_string(present) + " present");
  }
  if (body < present) {
    return make_error(codec_errc::trailing_bytes, header_bytes + body,
                      "trailing bytes: " + std::to_string(present - body) + " bytes after the " + std::string(kind) +
                          " body of " + std::to_string(body) + " bytes, at byte " +
                          std::to_string(header_bytes + body));
  }
  reader r(bytes, header_bytes, kind);
  message m = decoders[code - 1](r);
  if (r.failed()) return r.take_error();
  if (r.position() != size) {
    return make_error(codec_errc::trailing_bytes, r.position(),
                      "trailing bytes: the " + std::string(kind) + " fields end at byte " +
                          std::to_string(r.position()) + ", the body at byte " + std::to_string(size));
  }
  return m;
}

template codec_result<frame> encode<hello>(const hello&, std::size_t);
template codec_result<frame> encode<welcome>(const welcome&, std::size_t);
template codec_result<frame> encode<heartbeat>(const heartbeat&, std::size_t);
template codec_result<frame> encode<data_endpoint>(const data_endpoint&, std::size_t);
template codec_result<frame> encode<peer_table>(const peer_table&, std::size_t);
template codec_result<frame> encode<manifest>(const manifest&, std::size_t);
template codec_result<frame> encode<manifest_check>(const manifest_check&, std::size_t);
template codec_result<frame> encode<manifest_result>(const manifest_result&, std::size_t);
template codec_result<frame> encode<generate_request>(const generate_request&, std::size_t);
template codec_result<frame> encode<generate_result>(const generate_result&, std::size_t);
template codec_result<frame> encode<logprob_request>(const logprob_request&, std::size_t);
template codec_result<frame> encode<logprob_result>(const logprob_result&, std::size_t);
template codec_result<frame> encode<train_request>(const train_request&, std::size_t);
template codec_result<frame> encode<train_result>(const train_result&, std::size_t);
template codec_result<frame> encode<refit_begin>(const refit_begin&, std::size_t);
template codec_result<frame> encode<refit_ack>(const refit_ack&, std::size_t);
template codec_result<frame> encode<error>(const error&, std::size_t);
template codec_result<frame> encode<shutdown>(const shutdown&, std::size_t);
template codec_result<frame> encode<goodbye>(const goodbye&, std::size_t);
template codec_result<frame> encode<save_request>(const save_request&, std::size_t);
template codec_result<frame> encode<save_result>(const save_result&, std::size_t);
template codec_result<frame> encode<load_request>(const load_request&, std::size_t);
template codec_result<frame> encode<load_result>(const load_result&, std::size_t);

}  // namespace tandem::control
