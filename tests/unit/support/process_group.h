// Forked ranks joined by the ZeroMQ communicator, for tests across processes: each child binds
// its own tcp endpoint and reports it; the parent hands every child the list (playing the
// controller, never touching a data byte), then reads the lines the children write.
#pragma once

#include <boost/test/unit_test.hpp>

#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "gpu/comm/zmq_group.h"

namespace tandem::test::processes {

using namespace tandem::gpu;

using clock_type = std::chrono::steady_clock;

/// One forked rank: its pid and the parent's ends of its two pipes.
struct child {
  pid_t pid = -1;
  int from_child = -1;  // lines the child writes: its address, then results
  int to_child = -1;    // lines the parent writes: the address list, then "go"
};

inline void write_line(int fd, const std::string& line) {
  const std::string text = line + "\n";
  std::size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n <= 0) return;
    done += static_cast<std::size_t>(n);
  }
}

/// The next line from `fd`, or "<timeout>" / "<eof>" when none comes before `deadline`.
inline std::string read_line(int fd, clock_type::time_point deadline) {
  std::string line;
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - clock_type::now()).count();
    if (left <= 0) return "<timeout>";
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(left)) <= 0) continue;
    char c = 0;
    if (::read(fd, &c, 1) != 1) return "<eof>";
    if (c == '\n') return line;
    line += c;
  }
}

/// FNV-1a over bytes: the children report it instead of their buffers.
inline std::uint64_t fnv(const void* data, std::size_t n) {
  std::uint64_t h = 1469598103934665603ull;
  for (std::size_t i = 0; i < n; ++i) h = (h ^ static_cast<const unsigned char*>(data)[i]) * 1099511628211ull;
  return h;
}

/// Forks `n` ranks. Each binds tcp://127.0.0.1:*, reports its address, reads the list, joins
/// and runs body(group, to_parent, from_parent), then exits without returning to Boost.
class process_group {
 public:
  process_group(int n, const zmq_group_options& options,
                const std::function<void(zmq_group&, int up, int down)>& body)
      : deadline_(clock_type::now() + std::chrono::seconds(120)) {
    for (int r = 0; r < n; ++r) {
      int up[2], down[2];
      BOOST_REQUIRE(::pipe(up) == 0 && ::pipe(down) == 0);
      const pid_t pid = ::fork();
      BOOST_REQUIRE(pid >= 0);
      if (pid == 0) {
        ::close(up[0]);
        ::close(down[1]);
        for (const auto& c : children_) {
          ::close(c.from_child);
          ::close(c.to_child);
        }
        ::_exit(run_child(r, n, options, up[1], down[0], body));
      }
      ::close(up[1]);
      ::close(down[0]);
      children_.push_back({pid, up[0], down[1]});
    }
    std::vector<std::string> addresses;
    for (const auto& c : children_) addresses.push_back(read_line(c.from_child, deadline_));
    for (const auto& c : children_)
      for (const auto& a : addresses) write_line(c.to_child, a);
  }

  ~process_group() {
    for (auto& c : children_) {
      if (c.pid > 0) {
        ::kill(c.pid, SIGKILL);  // only children still running reach here
        ::waitpid(c.pid, nullptr, 0);
      }
      ::close(c.from_child);
      ::close(c.to_child);
    }
  }

  std::string line_from(int rank) { return read_line(children_[static_cast<std::size_t>(rank)].from_child, deadline_); }
  void line_to(int rank, const std::string& line) { write_line(children_[static_cast<std::size_t>(rank)].to_child, line); }

  void kill(int rank) {
    child& c = children_[static_cast<std::size_t>(rank)];
    ::kill(c.pid, SIGKILL);
    ::waitpid(c.pid, nullptr, 0);
    c.pid = -1;
  }

  /// The exit code of `rank` (waiting up to the deadline), or -1.
  int exit_code(int rank) {
    child& c = children_[static_cast<std::size_t>(rank)];
    while (clock_type::now() < deadline_) {
      int st = 0;
      if (::waitpid(c.pid, &st, WNOHANG) == c.pid) {
        c.pid = -1;
        return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
      }
      ::usleep(10'000);
    }
    return -1;
  }

 private:
  static int run_child(int rank, int n, const zmq_group_options& options, int up, int down,
                       const std::function<void(zmq_group&, int, int)>& body) {
    auto ep = bind_data_endpoint("127.0.0.1", options);
    if (!ep) {
      write_line(up, "bind failed: " + ep.error().message());
      return 2;
    }
    write_line(up, ep->address());
    std::vector<std::string> addresses;
    const auto deadline = clock_type::now() + std::chrono::seconds(60);
    for (int r = 0; r < n; ++r) addresses.push_back(read_line(down, deadline));
    auto g = zmq_group::create(rank, n, addresses, std::move(*ep));
    if (!g) {
      write_line(up, "error: " + g.error().message());
      return 3;
    }
    body(**g, up, down);
    return 0;
  }

  clock_type::time_point deadline_;
  std::vector<child> children_;
};

}  // namespace tandem::test::processes
