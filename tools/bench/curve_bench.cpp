// What CurveZMQ costs a run, encrypted and not, measured in the same run on loopback TCP:
//   1. a 1 GiB CPU refit: the policy root broadcasts the weights as byte buckets over a refit
//      group (gpu/comm/zmq_group.h) to one and to two rollout ranks, each rank a thread with its
//      own ZeroMQ context, as separate processes have;
//   2. a step's control traffic: the controller's ROUTER and a member's DEALER
//      (actors/bridge/socket_thread.hpp), the request/result pairs of one step of the default
//      recipe's size (a generate, a logprob and a train round trip, a refit begin/ack and
//      commit/ack), one pair at a time as the RL loop sends them.
// Prints each figure for both and the ratio; a figure to read, not a gate.
// Usage: curve_bench [--quick]   (--quick: 256 MiB instead of 1 GiB, fewer steps)
#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <deque>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "actors/bridge/socket_thread.hpp"
#include "gpu/comm/curve_keys.h"
#include "gpu/comm/loopback_group.h"

using namespace tandem;
using clock_type = std::chrono::steady_clock;

namespace {

[[noreturn]] void die(const std::string& what) {
  std::fprintf(stderr, "curve_bench: %s\n", what.c_str());
  std::exit(1);
}

double seconds_since(clock_type::time_point t) { return std::chrono::duration<double>(clock_type::now() - t).count(); }

// ---- 1. the refit ----------------------------------------------------------------------------

/// Seconds for the root of a group of `ranks` to broadcast `total` bytes in `bucket`-byte buckets
/// (every rank done: the broadcast returns on the root once the last rank has the bytes).
double refit_seconds(int ranks, std::size_t total, std::size_t bucket, bool secure) {
  gpu::zmq_group_options o;
  o.timeout = std::chrono::milliseconds(60000);
  o.group_tag = 42;
  auto group = gpu::join_loopback_group(ranks, secure, o);
  if (!group) die(group.error().message());
  std::vector<double> took(static_cast<std::size_t>(ranks), 0);
  std::vector<std::thread> threads;
  for (int r = 0; r < ranks; ++r)
    threads.emplace_back([&, r] {
      gpu::zmq_group& g = *(*group)[static_cast<std::size_t>(r)];
      std::vector<std::byte> buffer(bucket, std::byte{static_cast<unsigned char>(r == 0 ? 0x5a : 0)});
      const auto start = clock_type::now();
      for (std::size_t sent = 0; sent < total; sent += bucket)
        if (gpu::status s = g.broadcast(std::span<std::byte>(buffer), 0); !s) die(s.message());
      took[static_cast<std::size_t>(r)] = seconds_since(start);
      if (buffer.front() != std::byte{0x5a}) die("rank " + std::to_string(r) + " received other bytes");
    });
  for (auto& t : threads) t.join();
  return took[0];
}

// ---- 2. a step's control traffic ------------------------------------------------------------------

/// One control socket pair on loopback: the controller's ROUTER, one member's DEALER.
class control_pair {
 public:
  explicit control_pair(bool secure) {
    socket_options r;
    r.role = socket_role::controller_router;
    r.endpoint = "tcp://127.0.0.1:*";
    r.log_name = "curve_bench controller";
    r.expected_peers = 1;
    socket_options d;
    d.role = socket_role::member_dealer;
    d.routing_id = "w0";
    d.log_name = "curve_bench member";
    if (secure) {
      const auto controller = gpu::make_curve_keypair().value(), member = gpu::make_curve_keypair().value();
      r.security = control_security{controller, "", {member.public_key}};
      d.security = control_security{member, controller.public_key, {}};
    }
    router_ = std::make_unique<socket_thread>(r);
    socket_events re;
    re.on_message = [this](const std::string& peer, control::message m) { arrived(true, peer, std::move(m)); };
    auto bound = router_->start(re);
    if (!bound) die("cannot start the router");
    d.endpoint = *bound;
    dealer_ = std::make_unique<socket_thread>(d);
    socket_events de;
    de.on_message = [this](const std::string& peer, control::message m) { arrived(false, peer, std::move(m)); };
    if (!dealer_->start(de)) die("cannot start the dealer");
  }
  ~control_pair() {
    dealer_->stop();
    router_->stop();
  }

  /// Controller -> member `request`, then member -> controller `reply`; returns once the reply
  /// arrived.
  void round_trip(const control::message& request, const control::message& reply) {
    router_->post("w0", control::encode(request).value());
    wait(false);
    dealer_->post("", control::encode(reply).value());
    wait(true);
  }

  /// The member's hello, so the router knows the peer (its routing id) before the first request.
  void connect() {
    control::hello h;
    dealer_->post("", control::encode(h).value());
    wait(true);
  }

 private:
  void arrived(bool at_router, const std::string&, control::message) {
    std::lock_guard<std::mutex> lock(mutex_);
    (at_router ? at_router_ : at_dealer_) += 1;
    changed_.notify_all();
  }
  void wait(bool at_router) {
    std::unique_lock<std::mutex> lock(mutex_);
    int& n = at_router ? at_router_ : at_dealer_;
    if (!changed_.wait_for(lock, std::chrono::seconds(30), [&] { return n > 0; })) die("a control message did not arrive");
    --n;
  }

  std::unique_ptr<socket_thread> router_, dealer_;
  std::mutex mutex_;
  std::condition_variable changed_;
  int at_router_ = 0, at_dealer_ = 0;
};

/// The messages of one step of the default recipe's size: 8 prompts x 4 samples of 64 tokens.
struct step_messages {
  std::vector<std::pair<control::message, control::message>> pairs;
  std::size_t bytes = 0;
};

step_messages one_step() {
  constexpr int sequences = 32, prompt_tokens = 32, new_tokens = 64;
  control::generate_request g;
  for (int p = 0; p < sequences; ++p)
    g.job.requests.push_back({static_cast<std::uint64_t>(p), std::vector<std::int32_t>(prompt_tokens, 7), {}, {}, new_tokens, {1}});
  control::generate_result gr;
  for (int p = 0; p < sequences; ++p)
    gr.sequences.push_back({static_cast<std::uint64_t>(p), std::vector<std::int32_t>(new_tokens, 9),
                            std::vector<float>(new_tokens, -1.5f), control::finish_reason::length, 0});
  control::logprob_request l;  // every trajectory once, with the generator's logprobs
  l.job.sequences.tokens.assign(static_cast<std::size_t>(sequences * (prompt_tokens + new_tokens)), 5);
  for (int s = 0; s <= sequences; ++s) l.job.sequences.offsets.push_back(s * (prompt_tokens + new_tokens));
  l.job.prompt_tokens.assign(sequences, prompt_tokens);
  l.job.lp_gen.assign(static_cast<std::size_t>(sequences * new_tokens), -1.5f);
  l.job.generated_with.assign(sequences, 0);
  control::logprob_result lr;  // nothing per token
  lr.result.worker = "policy-0";
  lr.result.excluded_tokens.assign(sequences, 0);
  lr.result.tokens = static_cast<std::int64_t>(l.job.sequences.tokens.size());
  control::train_request t;  // per-sequence values only
  t.job.advantages.assign(sequences, 0.5);
  t.job.loss_multipliers.assign(sequences, 1.0);
  t.job.optimizer_steps.push_back({static_cast<std::uint64_t>(sequences), {sequences * new_tokens, sequences}});
  control::train_result tr;  // the loss metrics and the optimizer's, as fields
  tr.report.worker = "policy-0";
  control::refit_begin rb;
  rb.bucket_count = 4;
  control::refit_ack ra;
  control::refit_commit rc;
  step_messages s;
  s.pairs = {{g, gr}, {l, lr}, {t, tr}, {rb, ra}, {rc, ra}};
  for (const auto& [a, b] : s.pairs) s.bytes += control::encode(a).value().size() + control::encode(b).value().size();
  return s;
}

double step_seconds(bool secure, int steps) {
  const step_messages s = one_step();
  control_pair pair(secure);
  pair.connect();
  for (const auto& [a, b] : s.pairs) pair.round_trip(a, b);  // warm-up
  const auto start = clock_type::now();
  for (int n = 0; n < steps; ++n)
    for (const auto& [a, b] : s.pairs) pair.round_trip(a, b);
  return seconds_since(start) / steps;
}

}  // namespace

int main(int argc, char** argv) {
  const bool quick = argc > 1 && std::strcmp(argv[1], "--quick") == 0;
  if (argc > 1 && !quick) die("usage: curve_bench [--quick]");
  const std::size_t total = quick ? std::size_t{256} << 20 : std::size_t{1} << 30;
  const std::size_t bucket = std::size_t{64} << 20;

  std::printf("CurveZMQ cost, loopback TCP, each figure the best of 2 runs\n\n");
  std::printf("refit: %zu MiB in %zu MiB buckets, broadcast by the policy root\n", total >> 20, bucket >> 20);
  std::printf("  %-28s %12s %12s %8s\n", "group", "plain GB/s", "CURVE GB/s", "CURVE/plain");
  for (const int ranks : {2, 3}) {
    double plain = 1e30, curve = 1e30;
    for (int rep = 0; rep < 2; ++rep) {
      plain = std::min(plain, refit_seconds(ranks, total, bucket, false));
      curve = std::min(curve, refit_seconds(ranks, total, bucket, true));
    }
    const double gb = static_cast<double>(total) / 1e9;
    std::printf("  root + %d rollout rank%s %6s %12.2f %12.2f %8.2f\n", ranks - 1, ranks > 2 ? "s" : " ", "", gb / plain,
                gb / curve, plain / curve);
  }

  const int steps = quick ? 20 : 100;
  const step_messages s = one_step();
  std::printf("\ncontrol traffic of one step (%zu bytes in %zu request/result pairs), %d steps\n", s.bytes, s.pairs.size(), steps);
  double plain = 1e30, curve = 1e30;
  for (int rep = 0; rep < 2; ++rep) {
    plain = std::min(plain, step_seconds(false, steps));
    curve = std::min(curve, step_seconds(true, steps));
  }
  std::printf("  %-28s %12s %12s %8s\n", "", "plain ms", "CURVE ms", "CURVE/plain");
  std::printf("  %-28s %12.3f %12.3f %8.2f\n", "per step", plain * 1e3, curve * 1e3, curve / plain);
  return 0;
}
