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
#include "support/process_group.h"

using namespace tandem::gpu;



using namespace tandem::test::processes;

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
