// run_controller: the actor system, the socket, the controller actor, the local members, the end.
#include "actors/controller/controller.hpp"

#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <thread>

#include <algorithm>
#include <exception>
#include <filesystem>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include <caf/all.hpp>

#include "actors/api/type_ids.hpp"
#include "actors/api/error_context.hpp"
#include "actors/bridge/log_line.hpp"
#include "actors/bridge/socket_thread.hpp"
#include "actors/controller/controller_actor.hpp"
#include "actors/controller/local_members.hpp"
#include "actors/runtime/system_config.hpp"
#include "actors/member/thread_caps.hpp"

namespace tandem {

namespace {

/// The address local members dial for a bound endpoint: a wildcard host becomes loopback.
std::string dial_address(const std::string& bound) {
  std::string out = bound;
  for (const auto& [any, loopback] : {std::pair<std::string, std::string>{"//0.0.0.0:", "//127.0.0.1:"}, {"//[::]:", "//[::1]:"}})
    if (const auto at = out.find(any); at != std::string::npos) out.replace(at, any.size(), loopback);
  return out;
}

std::string self_executable() {
  std::error_code ec;
  const auto p = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ec ? std::string() : p.string();
}

/// Starts the local ranks; tells the controller about each (or about the first failure).
void spawn_local_members(const controller_options& o, std::size_t count, const std::string& dial, const caf::actor& ctl,
                         caf::scoped_actor& self, local_members& children) {
  const std::string executable = o.member_executable.empty() ? self_executable() : o.member_executable;
  const std::string share = std::to_string(std::max<std::size_t>(1, available_cores() / std::max<std::size_t>(1, count)));
  const std::vector<std::pair<std::string, std::string>> env = {
      {"OMP_NUM_THREADS", share},
      {"OPENBLAS_NUM_THREADS", share},
      {"TANDEM_LOCAL_MEMBERS", std::to_string(count)},
      {"TANDEM_PARENT_PID", std::to_string(::getpid())},
  };
  const std::string world = std::to_string(o.plan.members.size());
  for (std::size_t r = 0; r < count; ++r) {
    const std::vector<std::string> args = {"join", "--controller", dial, "--rank", std::to_string(r), "--world", world};
    std::optional<std::string> secret;
    if (o.keys) secret = render_run_keys(credentials_for(*o.keys, static_cast<std::int64_t>(r)));
    auto pid = children.spawn(static_cast<std::int64_t>(r), executable, args, env, secret);
    if (!pid) {
      self->send(ctl, ctl_fail_atom::value, error_text(pid.error()));
      return;
    }
    self->send(ctl, ctl_spawn_atom::value, static_cast<std::int64_t>(r), static_cast<std::int64_t>(*pid));
    if (o.report) {
      std::string line = "spawned member " + std::to_string(r) + " (pid " + std::to_string(*pid) + "): " + executable;
      for (const auto& a : args) line += " " + a;
      o.report(line);
    }
  }
}

/// SIGINT and SIGTERM for the length of a run: blocked in this thread (and so in every thread
/// started after it), and waited for by one thread that hands them to the controller actor.
class interrupt_watch {
 public:
  interrupt_watch() {
    sigset_t s;
    ::sigemptyset(&s);
    ::sigaddset(&s, SIGINT);
    ::sigaddset(&s, SIGTERM);
    ::pthread_sigmask(SIG_BLOCK, &s, &previous_);
  }
  ~interrupt_watch() {
    stopping_ = true;
    if (thread_.joinable()) thread_.join();
    ::pthread_sigmask(SIG_SETMASK, &previous_, nullptr);
  }
  /// From now on a signal goes to `ctl` as (ctl_intr, signal); a second one too (ignored there).
  void deliver_to(const caf::actor& ctl) {
    thread_ = std::thread([this, ctl] {
      sigset_t s;
      ::sigemptyset(&s);
      ::sigaddset(&s, SIGINT);
      ::sigaddset(&s, SIGTERM);
      const timespec slice{0, 100'000'000};
      while (!stopping_) {
        const int signal = ::sigtimedwait(&s, nullptr, &slice);
        if (signal == SIGINT || signal == SIGTERM) {
          caught_ = signal;
          caf::anon_send(ctl, ctl_interrupt_atom::value, signal);
        }
      }
    });
  }
  int caught() const { return caught_.load(); }

 private:
  sigset_t previous_{};
  std::thread thread_;
  std::atomic<bool> stopping_{false};
  std::atomic<int> caught_{0};
};

controller_result run_to_end(const controller_options& o) {
  interrupt_watch interrupts;  // before any thread starts: they all inherit the blocked mask
  const std::size_t world = o.plan.members.size();
  if (world == 0) return {false, "the placement plan has no members"};
  const std::size_t local = o.spawn_local < 0 ? world : std::min<std::size_t>(world, static_cast<std::size_t>(o.spawn_local));

  system_config cfg(scheduler_threads(available_cores(), local + 1));
  add_tandem_types(cfg);
  caf::actor_system sys{cfg};
  caf::scoped_actor self{sys};

  socket_options so;
  so.role = socket_role::controller_router;
  so.endpoint = o.bind_endpoint.empty() ? o.plan.control_endpoint : o.bind_endpoint;
  so.log_name = "tandem controller";
  so.expected_peers = static_cast<int>(world);
  so.max_frame_bytes = o.max_frame_bytes;
  if (o.keys) {
    if (gpu::status s = check_run_keys_for(*o.keys, static_cast<std::int64_t>(world), -1, "the run's keys"); !s)
      return {false, s.message()};
    control_security sec;
    sec.own = o.keys->controller;
    for (const auto& w : o.keys->members) sec.member_public_keys.push_back(w.public_key);
    so.security = sec;
  }
  auto socket = std::make_shared<socket_thread>(so);

  controller_settings s;
  s.plan = o.plan;
  s.recipe_yaml = o.recipe_yaml;
  s.run_id = o.run_id.empty() ? "run-" + std::to_string(::getpid()) : o.run_id;
  s.heartbeat_interval = o.heartbeat_interval;
  s.heartbeat_timeout = o.heartbeat_timeout;
  s.join_timeout = o.join_timeout;
  s.stop_timeout = o.stop_timeout;
  s.run_for = o.run_for;
  s.recipe = o.recipe;
  s.steps = o.steps;
  s.records = o.records;
  s.checkpoints = o.checkpoints;
  s.memory_plan = o.memory_plan;
  s.socket = socket;
  s.listener = caf::actor{self};
  s.report = o.report;
  s.step_lines = o.step_lines;
  s.progress = o.progress;
  const caf::actor ctl = spawn_controller(sys, std::move(s));
  self->monitor(ctl);
  interrupts.deliver_to(ctl);

  std::optional<controller_result> result;
  std::int64_t lost_rank = -1;
  const auto on_done = [&](ctl_done_atom, bool ok, const std::string& message, std::int64_t lost) {
    result = controller_result{ok, message};
    lost_rank = lost;
  };
  const auto on_down = [&](caf::down_msg& d) {
    result = controller_result{false, "the controller actor ended unexpectedly: " + caf::to_string(d.reason)};
  };
  std::string endpoint;
  self->receive([&](ctl_listen_atom, const std::string& bound) { endpoint = bound; }, on_done, on_down);

  local_members children;
  if (!result) {
    if (o.report)
      o.report("controller listening on " + endpoint +
               (o.keys ? " (CurveZMQ: every connection encrypted, every member authenticated by its key)"
                       : " (cluster.secure is false: no authentication, no encryption; loopback only)"));
    spawn_local_members(o, local, dial_address(endpoint), ctl, self, children);
    children.watch([ctl](const child_exit& e) {
      caf::anon_send(ctl, ctl_exit_atom::value, e.rank, static_cast<std::int64_t>(e.pid), e.wait_status, e.how);
    });
    while (!result) self->receive(on_done, on_down);
  }

  if (!result->ok && lost_rank >= 0) children.kill_rank(lost_rank);  // a hung member does not get to linger
  const std::vector<std::string> killed = children.stop_all(result->ok ? std::chrono::milliseconds(0) : o.kill_grace);
  if (!killed.empty()) {
    std::string list;
    for (const auto& k : killed) list += (list.empty() ? "" : ", ") + k;
    log_line("tandem controller: killed the members still running after the run ended: " + list);
  }
  socket->stop();
  self->send_exit(ctl, caf::exit_reason::user_shutdown);  // its bridge and supervisor are linked to it
  result->signal = interrupts.caught();
  return *result;
}

}  // namespace

controller_result run_controller(const controller_options& options) {
  try {
    return run_to_end(options);
  } catch (const std::exception& e) {
    return {false, std::string("internal error in the controller: ") + e.what()};
  }
}

}  // namespace tandem
