// Attacks on a running run's sockets, as a local process on the same network could make them:
// a thread that finds the ports in the run's output (the controller's "controller listening on
// ADDR", each member's "data plane bound to ... ADDR") and keeps attacking them until stopped.
//
//   raw_random      8 KiB of random bytes on a bare TCP connection
//   random_frame    one 8 KiB random frame from a plain ZeroMQ DEALER with a random routing id
//   oversized       a ZMTP 3.0 greeting, then a frame header declaring 1 GiB and 1 MiB of it
//   forged_bucket   refit-group broadcast messages claiming rank 0 (routing id "r0", a valid
//                   header for each of the first collectives, a payload of 0x5a bytes), from a
//                   plain DEALER and from a CURVE client that knows the port's public key but
//                   holds a key of its own
//   impostor_hello  a hello for every rank, claiming its routing id ("w<r>"), from a plain DEALER
//                   and from a CURVE client with a key of its own
//   big_frames      eight connections at once, each a ZMTP 3.0 greeting of the CURVE mechanism
//                   (what a secure port expects), then a 250 MB frame header and as much of the
//                   250 MB as the port takes before it closes the connection
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <random>
#include <regex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <zmq.hpp>

#include "gpu/comm/curve_keys.h"
#include "gpu/comm/zmq_wire.h"
#include "orchestration/control/codec.hpp"
#include "process_support.hpp"

namespace runtime_test {

enum class attack { raw_random, random_frame, oversized, forged_bucket, impostor_hello, big_frames };

/// Where to attack: lines of the run's output matching `pattern` (first group: a tcp:// address),
/// with the server public key for CURVE attacks (empty: plain ones only).
struct target_pattern {
  std::regex pattern;
  std::vector<attack> attacks;
  std::string server_public_key;
};

inline std::pair<std::string, int> host_port(const std::string& tcp) {
  const std::string rest = tcp.substr(tcp.find("://") + 3);
  const auto colon = rest.rfind(':');
  return {rest.substr(0, colon), std::stoi(rest.substr(colon + 1))};
}

/// A bare TCP connection to `tcp`, or -1.
inline int tcp_connect(const std::string& tcp) {
  const auto [host, port] = host_port(tcp);
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<std::uint16_t>(port));
  ::inet_pton(AF_INET, host.c_str(), &a.sin_addr);
  if (fd < 0 || ::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    if (fd >= 0) ::close(fd);
    return -1;
  }
  return fd;
}

inline void write_all(int fd, const void* data, std::size_t n) {
  const char* p = static_cast<const char*>(data);
  while (n > 0) {
    const ssize_t w = ::send(fd, p, n, MSG_NOSIGNAL);
    if (w <= 0) return;  // the peer closed it: that is the point
    p += w;
    n -= static_cast<std::size_t>(w);
  }
}

class attacker {
 public:
  attacker(child_process& run, std::vector<target_pattern> targets) : run_(run), targets_(std::move(targets)) {
    stranger_ = tandem::gpu::make_curve_keypair().value();
    thread_ = std::thread([this] { loop(); });
  }
  ~attacker() { stop(); }
  void stop() {
    stopping_ = true;
    if (thread_.joinable()) thread_.join();
  }
  /// Attacks made so far (each one connection or message).
  std::size_t made() const { return made_.load(); }
  /// Distinct ports attacked so far.
  std::size_t ports() const { return ports_.load(); }

 private:
  void loop() {
    zmq::context_t context(1);
    std::mt19937 random(12345);
    std::set<std::string> seen;
    while (!stopping_) {  // the run's end is the owner's to see (it waits for the process)
      const std::string text = run_.out() + run_.err();
      for (const auto& t : targets_)
        for (auto it = std::sregex_iterator(text.begin(), text.end(), t.pattern); it != std::sregex_iterator(); ++it) {
          const std::string endpoint = (*it)[1].str();
          if (seen.insert(endpoint).second) ports_ = seen.size();
          for (const attack a : t.attacks) hit(context, random, endpoint, a, t.server_public_key);
        }
      std::this_thread::sleep_for(std::chrono::milliseconds(30));
    }
  }

  void hit(zmq::context_t& context, std::mt19937& random, const std::string& endpoint, attack a, const std::string& server_key) {
    std::vector<unsigned char> noise(8192);
    for (auto& b : noise) b = static_cast<unsigned char>(random());
    switch (a) {
      case attack::raw_random: {
        const int fd = tcp_connect(endpoint);
        if (fd < 0) return;
        write_all(fd, noise.data(), noise.size());
        ::close(fd);
        ++made_;
        return;
      }
      case attack::oversized: {
        const int fd = tcp_connect(endpoint);
        if (fd < 0) return;
        unsigned char greeting[64] = {};
        greeting[0] = 0xff;
        greeting[9] = 0x7f;
        greeting[10] = 3;  // ZMTP 3.0
        std::memcpy(greeting + 12, "NULL", 4);
        write_all(fd, greeting, sizeof greeting);
        const unsigned char big[9] = {0x02, 0, 0, 0, 0, 0x40, 0, 0, 0};  // a long frame of 1 GiB
        write_all(fd, big, sizeof big);
        std::vector<unsigned char> chunk(std::size_t{1} << 20, 0x77);
        write_all(fd, chunk.data(), chunk.size());
        ::close(fd);
        ++made_;
        return;
      }
      case attack::random_frame: {
        zmq::socket_t s = dealer_to(context, endpoint, "x" + std::to_string(random()));
        (void)s.send(zmq::buffer(noise.data(), noise.size()), zmq::send_flags::dontwait);
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
        ++made_;
        return;
      }
      case attack::forged_bucket: {
        for (const bool curve : {false, true}) {
          if (curve && server_key.empty()) continue;
          zmq::socket_t s = curve ? dealer_to(context, endpoint, tandem::gpu::zmq_wire::routing_id(0), stranger_, server_key)
                                  : dealer_to(context, endpoint, tandem::gpu::zmq_wire::routing_id(0));
          for (std::uint64_t seq = 1; seq <= 8; ++seq) {
            tandem::gpu::zmq_wire::wire_header h;
            h.kind = tandem::gpu::zmq_wire::wire_kind::broadcast;
            h.group_tag = 0x7464'7000'0000'0002ull;  // the refit group's tag
            h.sender = 0;
            h.seq = seq;
            h.dtype_code = tandem::gpu::zmq_wire::dtype_code(tandem::gpu::dtype::uint8);
            h.count = 4096;
            h.payload_bytes = 4096;
            zmq::message_t m(tandem::gpu::zmq_wire::header_bytes + 4096);
            tandem::gpu::zmq_wire::encode_header(h, m.data<std::byte>());
            std::memset(m.data<std::byte>() + tandem::gpu::zmq_wire::header_bytes, 0x5a, 4096);
            (void)s.send(m, zmq::send_flags::dontwait);
          }
          std::this_thread::sleep_for(std::chrono::milliseconds(20));
          ++made_;
        }
        return;
      }
      case attack::big_frames: {
        std::vector<std::thread> peers;
        for (int p = 0; p < 8; ++p)
          peers.emplace_back([&endpoint] {
            const int fd = tcp_connect(endpoint);
            if (fd < 0) return;
            unsigned char greeting[64] = {};
            greeting[0] = 0xff;
            greeting[9] = 0x7f;
            greeting[10] = 3;
            std::memcpy(greeting + 12, "CURVE", 5);
            write_all(fd, greeting, sizeof greeting);
            const std::uint64_t size = 250'000'000;
            unsigned char header[9] = {0x06};  // a long command frame
            for (int b = 0; b < 8; ++b) header[1 + b] = static_cast<unsigned char>(size >> (56 - 8 * b));
            write_all(fd, header, sizeof header);
            std::vector<unsigned char> chunk(std::size_t{1} << 20, 0x33);
            for (std::uint64_t sent = 0; sent < size; sent += chunk.size()) {
              const ssize_t w = ::send(fd, chunk.data(), chunk.size(), MSG_NOSIGNAL);
              if (w <= 0) break;  // the port closed it
            }
            ::close(fd);
          });
        for (auto& t : peers) t.join();
        made_ += 8;
        return;
      }
      case attack::impostor_hello: {
        for (std::int32_t rank = 0; rank < 4; ++rank)
          for (const bool curve : {false, true}) {
            if (curve && server_key.empty()) continue;
            const std::string id = "w" + std::to_string(rank);
            zmq::socket_t s = curve ? dealer_to(context, endpoint, id, stranger_, server_key) : dealer_to(context, endpoint, id);
            tandem::control::hello h;
            h.rank = rank;
            h.world_size = 4;
            h.pid = 1;
            h.hostname = "impostor";
            const auto f = tandem::control::encode(h).value();
            (void)s.send(zmq::buffer(f.data(), f.size()), zmq::send_flags::dontwait);
            std::this_thread::sleep_for(std::chrono::milliseconds(5));
            ++made_;
          }
        return;
      }
    }
  }

  child_process& run_;
  std::vector<target_pattern> targets_;
  tandem::gpu::curve_keypair stranger_;
  std::atomic<bool> stopping_{false};
  std::atomic<std::size_t> made_{0}, ports_{0};
  std::thread thread_;
};

}  // namespace runtime_test
