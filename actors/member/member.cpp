// run_member: checks, the parent-death signal, thread caps, the actor system, the socket, the end.
#include "actors/member/member.hpp"

#include <signal.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <exception>
#include <memory>
#include <optional>
#include <thread>

#include <caf/all.hpp>

#include "actors/api/type_ids.hpp"
#include "actors/bridge/log_line.hpp"
#include "actors/bridge/socket_thread.hpp"
#include "actors/runtime/system_config.hpp"
#include "actors/member/data_plane.hpp"
#include "actors/member/thread_caps.hpp"
#include "actors/member/member_actor.hpp"

namespace tandem {

namespace {

/// How long the end of a member may wait for engine calls still running (see run()).
constexpr std::chrono::milliseconds shutdown_grace{5000};

std::string host_name() {
  char buffer[256] = {};
  if (::gethostname(buffer, sizeof buffer - 1) != 0) return "unknown-host";
  return buffer;
}

member_result run(const member_options& o) {
  const std::string log_name = "tandem member " + std::to_string(o.rank);
  if (o.controller.empty()) return {2, "no controller address"};
  if (o.world < 1) return {2, "the world size must be at least 1, not " + std::to_string(o.world)};
  if (o.rank < 0 || o.rank >= o.world)
    return {2, "rank " + std::to_string(o.rank) + " is outside 0.." + std::to_string(o.world - 1) + " (world " +
                   std::to_string(o.world) + ")"};

  if (o.keys) {
    if (gpu::status s = check_run_keys_for(*o.keys, o.world, o.rank, "this member's keys"); !s) return {2, s.message()};
  } else if (!loopback_address(o.controller)) {
    return {2, "no run keys (TANDEM_KEYS or TANDEM_KEYS_FD) and the controller " + o.controller +
                   " is not on loopback: without keys a member connects only to a controller on this machine"};
  }

  if (o.parent_pid > 0) {
    // Die with the controller that spawned us. The check after prctl closes the window in which
    // the parent died before the request was made.
    ::prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (::getppid() != static_cast<pid_t>(o.parent_pid))
      return {1, "the controller (pid " + std::to_string(o.parent_pid) + ") that started this member is gone"};
    // A Ctrl-C on the terminal reaches the whole process group: the controller stops this member
    // in order (shutdown, goodbye) instead of every process dying at once.
    ::signal(SIGINT, SIG_IGN);
  }

  const std::size_t cores = available_cores();
  const std::size_t local = static_cast<std::size_t>(o.local_members > 0 ? o.local_members : o.world);
  if (o.cap_threads) cap_blas_threads(std::max<std::size_t>(1, cores / local));

  system_config cfg(scheduler_threads(cores, local));
  add_tandem_types(cfg);
  caf::actor_system sys{cfg};
  caf::scoped_actor self{sys};

  socket_options so;
  so.role = socket_role::member_dealer;
  so.endpoint = o.controller;
  so.routing_id = "w" + std::to_string(o.rank);
  so.log_name = log_name;
  if (o.keys) {
    control_security sec;
    sec.own = o.keys->members[static_cast<std::size_t>(o.rank)];
    sec.controller_public_key = o.keys->controller.public_key;
    so.security = sec;
  }
  auto socket = std::make_shared<socket_thread>(so);

  member_settings s;
  s.controller = o.controller;
  s.rank = o.rank;
  s.world = o.world;
  s.hostname = host_name();
  s.welcome_timeout = o.welcome_timeout;
  s.log_name = log_name;
  s.socket = socket;
  s.listener = caf::actor{self};
  s.keys = o.keys;
  const caf::actor w = spawn_member_actor(sys, std::move(s));
  self->monitor(w);

  std::optional<member_result> result;
  while (!result)
    self->receive(
        [&](mbr_done_atom, std::int32_t code, const std::string& message, bool shut_down) {
          result = member_result{code, message, shut_down};
        },
        [&](caf::down_msg& d) {
          result = member_result{1, "the member actor ended unexpectedly: " + caf::to_string(d.reason)};
        });
  // An engine call blocked in a collective with a dead peer would hold the actor system's shutdown
  // until the data plane's timeout: past a grace period the process ends without waiting for it.
  std::thread([code = result->exit_code, name = log_name] {
    std::this_thread::sleep_for(shutdown_grace);
    log_line(name + ": an engine call did not end within " + std::to_string(shutdown_grace.count()) +
             " ms of the end; exiting without it");
    std::_Exit(code);
  }).detach();
  // After a shutdown (of a run that ended or failed) the goodbye is posted: give it up to a second
  // to leave before the close.
  socket->stop(result->shut_down ? std::chrono::milliseconds(1000) : std::chrono::milliseconds(0));
  self->send_exit(w, caf::exit_reason::user_shutdown);
  return *result;
}

}  // namespace

member_result run_member(const member_options& options) {
  member_result r;
  try {
    r = run(options);
  } catch (const std::exception& e) {
    r = {1, std::string("internal error in the member: ") + e.what()};
  }
  log_line("tandem member " + std::to_string(options.rank) + ": " + r.message);
  return r;
}

}  // namespace tandem
