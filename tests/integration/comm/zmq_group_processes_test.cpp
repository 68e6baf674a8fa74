// The ZeroMQ communicator across processes: forked children are the ranks, each binding its
// own tcp endpoint, the parent playing the controller (it collects the addresses and hands out
// the list, and never touches a data byte). Proves the collectives agree bitwise across
// processes and that a rank killed with SIGKILL is named by the survivors.
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

using namespace tandem::gpu;

namespace zmq_group_processes_test_support {

using clock_type = std::chrono::steady_clock;

/// One forked rank: its pid and the parent's ends of its two pipes.
struct child {
  pid_t pid = -1;
  int from_child = -1;  // lines the child writes: its address, then results
  int to_child = -1;    // lines the parent writes: the address list, then "go"
};

void write_line(int fd, const std::string& line) {
  const std::string text = line + "\n";
  std::size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n <= 0) return;
    done += static_cast<std::size_t>(n);
  }
}

/// The next line from `fd`, or "<timeout>" / "<eof>" when none comes before `deadline`.
std::string read_line(int fd, clock_type::time_point deadline) {
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
std::uint64_t fnv(const void* data, std::size_t n) {
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

}  // namespace zmq_group_processes_test_support

using namespace zmq_group_processes_test_support;

BOOST_AUTO_TEST_SUITE(zmq_group_processes_test)

BOOST_AUTO_TEST_CASE(three_processes_agree_bitwise_on_all_reduce_broadcast_and_all_gather) {
  zmq_group_options o;
  o.chunk_bytes = 256 << 10;
  o.timeout = std::chrono::seconds(60);
  const int n = 3;
  const std::size_t count = 1'000'003;
  process_group group(n, o, [&](zmq_group& g, int up, int) {
    std::vector<float> d(count);
    for (std::size_t i = 0; i < count; ++i) d[i] = (i + static_cast<std::size_t>(g.rank())) % 3 == 0 ? 1e8f : (i % 3 == 1 ? 1.0f : -1e8f);
    status s = g.all_reduce(std::span<float>(d));
    const std::uint64_t reduced = fnv(d.data(), d.size() * sizeof(float));
    std::vector<std::int32_t> b(5000, g.rank());
    if (s) s = g.broadcast(std::span<std::int32_t>(b), 2);
    std::vector<std::int32_t> gathered(3 * 7);
    const std::vector<std::int32_t> mine(7, g.rank() + 10);
    if (s) s = g.all_gather<std::int32_t>(mine, std::span<std::int32_t>(gathered));
    write_line(up, s ? "ok " + std::to_string(reduced) + " " + std::to_string(fnv(b.data(), b.size() * 4)) + " " +
                           std::to_string(fnv(gathered.data(), gathered.size() * 4))
                     : "error: " + s.message());
  });
  std::vector<std::string> lines;
  for (int r = 0; r < n; ++r) lines.push_back(group.line_from(r));
  // What every rank must hold: the documented ring order over the same inputs, computed here.
  std::vector<std::vector<float>> x(n, std::vector<float>(count));
  for (int r = 0; r < n; ++r)
    for (std::size_t i = 0; i < count; ++i)
      x[static_cast<std::size_t>(r)][i] = (i + static_cast<std::size_t>(r)) % 3 == 0 ? 1e8f : (i % 3 == 1 ? 1.0f : -1e8f);
  std::vector<float> expected(count);
  for (std::size_t i = 0; i < count; ++i) {
    int k = 0;
    while (static_cast<std::size_t>(k + 1) * count / n <= i) ++k;
    float acc = x[static_cast<std::size_t>((k + 1) % n)][i];
    for (int j = 2; j <= n; ++j) acc += x[static_cast<std::size_t>((k + j) % n)][i];
    expected[i] = acc;
  }
  const std::vector<std::int32_t> b(5000, 2);
  std::vector<std::int32_t> gathered;
  for (int r = 0; r < n; ++r) gathered.insert(gathered.end(), 7, r + 10);
  const std::string want = "ok " + std::to_string(fnv(expected.data(), count * sizeof(float))) + " " +
                           std::to_string(fnv(b.data(), b.size() * 4)) + " " + std::to_string(fnv(gathered.data(), gathered.size() * 4));
  for (int r = 0; r < n; ++r) {
    BOOST_TEST(lines[static_cast<std::size_t>(r)] == want, "rank " << r);
    BOOST_TEST(group.exit_code(r) == 0);
  }
}

BOOST_AUTO_TEST_CASE(a_rank_killed_with_sigkill_is_named_by_the_survivors) {
  zmq_group_options o;
  o.timeout = std::chrono::milliseconds(1000);
  const int n = 3;
  process_group group(n, o, [&](zmq_group& g, int up, int down) {
    write_line(up, "joined");
    if (read_line(down, clock_type::now() + std::chrono::seconds(60)) != "go") return;
    std::vector<float> d(1000, 1.0f);
    const status s = g.all_reduce(std::span<float>(d));
    write_line(up, s ? "ok" : "error: " + s.message());
  });
  for (int r = 0; r < n; ++r) BOOST_REQUIRE_EQUAL(group.line_from(r), "joined");
  group.kill(2);
  for (int r = 0; r < 2; ++r) group.line_to(r, "go");
  for (int r = 0; r < 2; ++r) {
    const std::string line = group.line_from(r);
    BOOST_TEST_MESSAGE(line);
    BOOST_TEST(line.find("error: zmq_group rank " + std::to_string(r) + " of 3: all_reduce #1: ") == 0u, line);
    BOOST_TEST(line.find("rank 2 is silent") != std::string::npos, line);
    BOOST_TEST(group.exit_code(r) == 0);
  }
}

BOOST_AUTO_TEST_SUITE_END()
