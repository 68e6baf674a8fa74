// The controller actor: joins, heartbeats, the end of a run (see the state machine in the header).
#include "actors/controller/controller_actor.hpp"

#include <signal.h>
#include <sys/wait.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <variant>
#include <vector>

#include <caf/all.hpp>

#include "actors/api/errors.hpp"
#include "actors/api/type_ids.hpp"
#include "actors/bridge/bridge.hpp"
#include "actors/api/error_context.hpp"
#include "actors/bridge/log_line.hpp"
#include "actors/controller/rl_loop.hpp"
#include "actors/controller/member_label.hpp"
#include "actors/remote/remote_policy.hpp"
#include "actors/remote/remote_rollout.hpp"
#include "actors/supervisor/supervisor.hpp"
#include "gpu/core/printable.h"

namespace tandem {

namespace {

using ctl_tick_atom = caf::atom_constant<caf::atom("ctl_tick")>;
using ctl_join_deadline_atom = caf::atom_constant<caf::atom("ctl_joindl")>;
using ctl_end_atom = caf::atom_constant<caf::atom("ctl_end")>;
using ctl_stop_deadline_atom = caf::atom_constant<caf::atom("ctl_stopdl")>;

enum class phase { joining, running, stopping, finished };

/// One rank of the placement plan, as the controller knows it.
struct member_slot {
  topology::member_plan plan;
  std::string name;  // member_label until its hello, then member_name (with pid and host)
  std::string peer;  // its routing id, once joined
  std::int64_t pid = 0;
  bool spawned = false;  // a child of this process
  bool joined = false;   // welcomed
  bool left = false;     // said goodbye
  bool exited = false;   // a child that was reaped
  std::uint64_t heartbeats = 0;
  std::optional<control::data_endpoint> data;  // its data-plane endpoints (RL runs)
  remote_policy_actor policy;                   // its proxies (RL runs, once every member joined)
  remote_rollout_actor rollout;
};

struct controller_state {
  controller_settings s;
  bridge_actor bridge;
  supervisor_actor supervisor;
  phase now = phase::joining;
  std::vector<member_slot> members;            // by rank
  std::map<std::string, std::size_t> by_peer;  // routing id -> rank
  std::map<std::string, std::size_t> by_name;  // supervisor name -> rank
  std::set<std::string> warned;                // peers whose unexpected messages were logged once
  std::size_t joined = 0;
  std::uint64_t heartbeat_seq = 0;
  caf::actor_clock::time_point running_since;
  bool peers_sent = false;  // the peer table went out (RL runs)
  int interrupted = 0;      // the signal that stopped the run, 0 if none
  caf::actor loop;          // the RL loop, once the peer table went out
  static inline const char* name = "controller";
};

using controller_ptr = caf::stateful_actor<controller_state>*;

std::string ms_text(std::chrono::milliseconds d) { return std::to_string(d.count()) + " ms"; }

void log_event(const std::string& text) { log_line("tandem controller: " + text); }

void report(controller_ptr self, const std::string& text) {
  if (self->state.s.report) self->state.s.report(text);
}

void send_to(controller_ptr self, const std::string& peer, control::message m) {
  self->send(self->state.bridge, ctl_send_atom::value, peer, std::move(m));
}

bool present(const member_slot& w) { return w.joined && !w.left && !w.exited; }

// ---- the end of a run ---------------------------------------------------------------------

void fail(controller_ptr self, const std::string& why, std::int64_t lost_rank = -1) {
  auto& st = self->state;
  if (st.now == phase::finished) return;
  st.now = phase::finished;
  for (const auto& w : st.members)
    if (present(w) && w.plan.rank != lost_rank) send_to(self, w.peer, control::shutdown{"the run failed: " + why, true});
  log_event("the run failed: " + why);
  self->send(st.s.listener, ctl_done_atom::value, false, why, lost_rank);
}

/// stopping: done once every member left (local children: reaped with status 0).
void check_stopped(controller_ptr self) {
  auto& st = self->state;
  for (const auto& w : st.members)
    if (w.spawned ? !w.exited : !w.left) return;
  st.now = phase::finished;
  if (st.interrupted != 0) {
    const std::string why = std::string("interrupted by ") + (st.interrupted == SIGINT ? "SIGINT" : "SIGTERM") +
                            "; all " + std::to_string(st.members.size()) + " members left";
    log_event(why);
    self->send(st.s.listener, ctl_done_atom::value, false, why, std::int64_t{-1});
    return;
  }
  const auto ran = std::chrono::duration_cast<std::chrono::milliseconds>(self->clock().now() - st.running_since);
  const std::string summary =
      "the run ended after " + ms_text(ran) + "; all " + std::to_string(st.members.size()) + " members left";
  log_event(summary);
  self->send(st.s.listener, ctl_done_atom::value, true, summary, std::int64_t{-1});
}

void member_done(controller_ptr self, member_slot& w, const std::string& how) {
  report(self, w.name + " left after " + std::to_string(w.heartbeats) + " heartbeats (" + how + ")");
  check_stopped(self);
}

// ---- joining -------------------------------------------------------------------------------

control::welcome welcome_for(const controller_state& st, const topology::member_plan& w) {
  control::welcome m;
  m.assigned = {w.hosts_policy, w.hosts_rollout};
  m.data_parallel_rank = static_cast<std::int32_t>(w.data_parallel_rank);
  m.data_parallel_size = static_cast<std::int32_t>(st.s.plan.sizes.data_parallel_size);
  m.rollout_rank = static_cast<std::int32_t>(w.rollout_rank);
  std::int32_t rollouts = 0;
  for (const auto& x : st.s.plan.members) rollouts += x.hosts_rollout ? 1 : 0;
  m.rollout_size = rollouts;
  m.recipe_yaml = st.s.recipe_yaml;
  m.run_id = st.s.run_id;
  m.heartbeat_interval_ms = static_cast<std::uint32_t>(st.s.heartbeat_interval.count());
  m.heartbeat_timeout_ms = static_cast<std::uint32_t>(st.s.heartbeat_timeout.count());
  return m;
}

/// Why `h` from `peer` cannot join, or "" when it can.
std::string hello_problem(const controller_state& st, const std::string& peer, const control::hello& h) {
  const auto world = static_cast<std::int64_t>(st.members.size());
  if (h.version != control::protocol_version)
    return "it speaks protocol version " + std::to_string(h.version) + ", this controller " +
           std::to_string(control::protocol_version);
  if (h.world_size != world)
    return "it was started for a world of " + std::to_string(h.world_size) + " members; this run has " + std::to_string(world);
  if (h.rank < 0 || h.rank >= world)
    return "rank " + std::to_string(h.rank) + " is outside this run's ranks 0.." + std::to_string(world - 1);
  if (peer != "w" + std::to_string(h.rank))
    return "a hello for rank " + std::to_string(h.rank) + " came from routing id '" + peer_text(peer) + "' (expected 'w" +
           std::to_string(h.rank) + "')";
  const member_slot& w = st.members[static_cast<std::size_t>(h.rank)];
  if (st.now != phase::joining && !w.joined) return "the run is no longer accepting members";
  if (w.joined && w.pid != h.pid) return "rank " + std::to_string(h.rank) + " already joined as " + w.name;
  if (w.spawned && w.pid != h.pid)
    return "rank " + std::to_string(h.rank) + " was started here as pid " + std::to_string(w.pid) + ", but pid " +
           std::to_string(h.pid) + " on " + gpu::printable(h.hostname, 256) + " said hello for it";
  return {};
}

// ---- the RL loop (runs with a recipe) -------------------------------------------------------

/// The peer table: every member's endpoints, the ring of the policy ranks, the refit group.
control::peer_table peer_table_of(const controller_state& st) {
  control::peer_table t;
  std::vector<std::pair<std::int64_t, std::int32_t>> policy, rollout;  // (dp or rollout rank, member rank)
  for (const auto& w : st.members) {
    const auto rank = static_cast<std::int32_t>(w.plan.rank);
    t.peers.push_back({rank, w.data->data_parallel_endpoint, w.data->refit_endpoint});
    if (w.plan.hosts_policy) policy.emplace_back(w.plan.data_parallel_rank, rank);
    if (w.plan.hosts_rollout) rollout.emplace_back(w.plan.rollout_rank, rank);
  }
  std::sort(policy.begin(), policy.end());
  std::sort(rollout.begin(), rollout.end());
  if (policy.size() > 1)
    for (const auto& p : policy) t.ring.push_back(p.second);
  if (!st.s.recipe->policy.generation.colocated) {
    t.refit_group.push_back(policy.front().second);
    for (const auto& r : rollout) t.refit_group.push_back(r.second);
  }
  return t;
}

/// Every member reported its endpoints: the peer table goes out and the RL loop starts.
void start_loop(controller_ptr self) {
  auto& st = self->state;
  if (st.peers_sent || st.now != phase::running) return;
  for (const auto& w : st.members)
    if (!w.data) return;
  st.peers_sent = true;
  const control::peer_table table = peer_table_of(st);
  for (const auto& w : st.members) send_to(self, w.peer, table);
  std::vector<std::pair<std::int64_t, policy_actor>> policy;
  std::vector<std::pair<std::int64_t, rollout_actor>> rollout;
  for (const auto& w : st.members) {
    if (w.policy) policy.emplace_back(w.plan.data_parallel_rank, w.policy);
    if (w.rollout) rollout.emplace_back(w.plan.rollout_rank, w.rollout);
  }
  std::sort(policy.begin(), policy.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  std::sort(rollout.begin(), rollout.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  rl_loop_settings ls;
  ls.recipe = *st.s.recipe;
  for (auto& p : policy) ls.policy.push_back(p.second);
  for (auto& r : rollout) ls.rollout.push_back(r.second);
  ls.steps = st.s.steps;
  ls.socket = st.s.socket;
  ls.listener = caf::actor{self};
  ls.report = st.s.report;
  ls.step_lines = st.s.step_lines;
  ls.progress = st.s.progress;
  ls.records = st.s.records;
  ls.checkpoints = st.s.checkpoints;
  ls.memory_plan = st.s.memory_plan;
  st.loop = spawn_rl_loop(self->system(), std::move(ls));
  self->link_to(st.loop);
}

/// The proxies of every member (RL runs), named like the actors they stand for.
void spawn_proxies(controller_ptr self) {
  auto& st = self->state;
  for (auto& w : st.members) {
    const auto rank = static_cast<std::int32_t>(w.plan.rank);
    if (w.plan.hosts_policy)
      w.policy = spawn_remote_policy(self->system(),
                                     {"policy-" + std::to_string(w.plan.data_parallel_rank), rank, w.peer, st.bridge});
    if (w.plan.hosts_rollout)
      w.rollout = spawn_remote_rollout(self->system(),
                                       {"rollout-" + std::to_string(w.plan.rollout_rank), rank, w.peer, st.bridge});
    // Linked: they end with the controller actor (a waiting promise must not keep the system up).
    if (w.policy) self->link_to(w.policy);
    if (w.rollout) self->link_to(w.rollout);
  }
}

/// A member's message for one of its proxies.
void to_proxy(controller_ptr self, member_slot& w, const control::message& m) {
  if (const auto* e = std::get_if<control::error>(&m); e != nullptr && e->request == 0)
    return fail(self, w.name + " could not set up: " + e->text, w.plan.rank);  // its host failed
  if (for_policy_proxy(m, w.plan.hosts_rollout) && w.policy) return self->send(w.policy, rmt_in_atom::value, m);
  if (w.rollout) return self->send(w.rollout, rmt_in_atom::value, m);
  if (w.policy) return self->send(w.policy, rmt_in_atom::value, m);
  log_event("ignored a " + std::string(control::to_string(control::kind_of(m))) + " from " + w.name);
}

void all_joined(controller_ptr self) {
  auto& st = self->state;
  st.now = phase::running;
  st.running_since = self->clock().now();
  report(self, "all " + std::to_string(st.members.size()) + " members joined");
  if (st.s.recipe) {
    spawn_proxies(self);
    return start_loop(self);
  }
  if (st.s.run_for.count() > 0) self->delayed_send(self, st.s.run_for, ctl_end_atom::value);
}

void on_hello(controller_ptr self, const std::string& peer, const control::hello& h) {
  auto& st = self->state;
  if (const std::string problem = hello_problem(st, peer, h); !problem.empty()) {
    log_event("refused the hello of peer '" + peer_text(peer) + "' (pid " + std::to_string(h.pid) + " on " +
              gpu::printable(h.hostname, 256) +
              "): " + problem);
    send_to(self, peer, control::error{static_cast<std::uint16_t>(tandem_errc::invalid_config), problem, h.rank});
    return;
  }
  member_slot& w = st.members[static_cast<std::size_t>(h.rank)];
  if (w.joined) {  // the same process again (its first welcome was lost): welcome it again
    send_to(self, peer, welcome_for(st, w.plan));
    return;
  }
  w.joined = true;
  w.peer = peer;
  w.pid = h.pid;
  w.name = member_name(w.plan, h.pid, gpu::printable(h.hostname, 256));  // the peer's text, made safe for every line
  st.by_peer[peer] = static_cast<std::size_t>(h.rank);
  st.by_name[w.name] = static_cast<std::size_t>(h.rank);
  ++st.joined;
  send_to(self, peer, welcome_for(st, w.plan));
  self->send(st.supervisor, watch_atom::value, w.name);
  report(self, w.name + " joined");
  if (st.joined == st.members.size()) all_joined(self);
}

// ---- messages from members, in every state ------------------------------------------------

/// The slot of a joined peer, or null (logged once per peer).
member_slot* known_peer(controller_ptr self, const std::string& peer, control::message_kind kind) {
  auto& st = self->state;
  if (auto it = st.by_peer.find(peer); it != st.by_peer.end()) return &st.members[it->second];
  if (st.warned.insert(peer).second)
    log_event("ignored a " + std::string(control::to_string(kind)) + " from peer '" + peer_text(peer) +
              "', which has not joined (said hello); later messages from it are ignored silently");
  return nullptr;
}

void on_control(controller_ptr self, const std::string& peer, const control::message& m) {
  auto& st = self->state;
  if (st.now == phase::finished) return;
  if (const auto* h = std::get_if<control::hello>(&m)) return on_hello(self, peer, *h);
  member_slot* w = known_peer(self, peer, control::kind_of(m));
  if (w == nullptr) return;
  if (std::holds_alternative<control::heartbeat>(m)) {
    ++w->heartbeats;
    self->send(st.supervisor, heartbeat_atom::value, w->name);
  } else if (const auto* g = std::get_if<control::goodbye>(&m)) {
    w->left = true;
    self->send(st.supervisor, forget_atom::value, w->name);
    if (st.now != phase::stopping) return fail(self, w->name + " left the run: " + g->reason, w->plan.rank);
    if (!w->spawned) member_done(self, *w, "said goodbye");
  } else if (st.s.recipe && std::holds_alternative<control::data_endpoint>(m)) {
    w->data = std::get<control::data_endpoint>(m);
    start_loop(self);
  } else if (st.s.recipe && st.now == phase::running) {
    to_proxy(self, *w, m);
  } else if (const auto* e = std::get_if<control::error>(&m)) {
    log_event(w->name + " reported an error: " + e->text);
  } else {
    log_event("ignored a " + std::string(control::to_string(control::kind_of(m))) + " from " + w->name);
  }
}

void on_exit(controller_ptr self, std::int64_t rank, std::int64_t pid, int status, const std::string& how) {
  auto& st = self->state;
  if (rank < 0 || rank >= static_cast<std::int64_t>(st.members.size())) return;
  member_slot& w = st.members[static_cast<std::size_t>(rank)];
  w.exited = true;
  if (w.joined) self->send(st.supervisor, forget_atom::value, w.name);
  if (st.now == phase::finished) return;
  const std::string who = w.joined ? w.name : member_name(w.plan, pid, "");
  const bool clean = WIFEXITED(status) && WEXITSTATUS(status) == 0;
  if (st.now == phase::stopping && clean) return member_done(self, w, how);
  fail(self, who + " " + how + (st.now == phase::stopping ? " during shutdown" : ""), rank);
}

/// "1 of 4 members <what>: member 3 [rollout-1] (pid 1234)" for the members `missing` selects.
std::string missing_members(const controller_state& st, bool (*missing)(const member_slot&), const std::string& what) {
  std::string list;
  std::size_t n = 0;
  for (const auto& w : st.members) {
    if (!missing(w)) continue;
    list += (n++ ? ", " : "") + (w.spawned && !w.joined ? member_name(w.plan, w.pid, "") : w.name);
  }
  return std::to_string(n) + " of " + std::to_string(st.members.size()) + " members " + what + ": " + list;
}

/// stopping: shutdown to every member still there; done once all left (check_stopped).
void stop_members(controller_ptr self, const std::string& reason) {
  auto& st = self->state;
  if (st.now == phase::stopping || st.now == phase::finished) return;
  st.now = phase::stopping;
  for (const auto& w : st.members)
    if (present(w)) send_to(self, w.peer, control::shutdown{reason});
  self->delayed_send(self, st.s.stop_timeout, ctl_stop_deadline_atom::value);
  check_stopped(self);  // nobody there (an interrupt while joining): done at once
}

caf::behavior controller(controller_ptr self, controller_settings s) {
  auto& st = self->state;
  st.s = std::move(s);
  for (const auto& p : st.s.plan.members) {
    member_slot w;
    w.plan = p;
    w.name = member_label(p);
    st.members.push_back(std::move(w));
  }
  supervisor_options so;
  so.heartbeat_timeout = st.s.heartbeat_timeout;
  so.check_interval = std::clamp(st.s.heartbeat_timeout / 5, std::chrono::milliseconds(50), std::chrono::milliseconds(1000));
  st.supervisor = self->spawn<caf::linked>(supervisor, caf::actor{self}, so);
  st.bridge = self->spawn<caf::linked>(bridge, st.s.socket, caf::actor{self}, std::string("tandem controller"));
  if (auto endpoint = st.s.socket->start(bridge_events(st.bridge)); !endpoint) {
    fail(self, error_text(endpoint.error()));
  } else {
    self->send(st.s.listener, ctl_listen_atom::value, *endpoint);
    self->delayed_send(self, st.s.join_timeout, ctl_join_deadline_atom::value);
    self->send(self, ctl_tick_atom::value);
  }
  return {
      [=](ctl_recv_atom, const std::string& peer, const control::message& m) { on_control(self, peer, m); },
      [=](ctl_unreach_atom, const std::string&, const std::string&) {
        // Logged by the socket thread; the heartbeat timeout or the reaper decides whether it is dead.
      },
      [=](member_lost_atom, const std::string& name, const std::string& reason) {
        auto it = self->state.by_name.find(name);
        fail(self, name + ": " + reason, it == self->state.by_name.end() ? -1 : static_cast<std::int64_t>(it->second));
      },
      [=](ctl_spawn_atom, std::int64_t rank, std::int64_t pid) {
        if (rank < 0 || rank >= static_cast<std::int64_t>(self->state.members.size())) return;
        auto& w = self->state.members[static_cast<std::size_t>(rank)];
        w.spawned = true;
        w.pid = pid;
      },
      [=](ctl_exit_atom, std::int64_t rank, std::int64_t pid, int status, const std::string& how) {
        on_exit(self, rank, pid, status, how);
      },
      [=](ctl_fail_atom, const std::string& why) { fail(self, why); },
      [=](ctl_tick_atom) {
        auto& st = self->state;
        if (st.now == phase::finished) return;
        for (const auto& w : st.members)
          if (present(w)) send_to(self, w.peer, control::heartbeat{-1, st.heartbeat_seq});
        ++st.heartbeat_seq;
        self->delayed_send(self, st.s.heartbeat_interval, ctl_tick_atom::value);
      },
      [=](ctl_join_deadline_atom) {
        if (self->state.now != phase::joining) return;
        fail(self, missing_members(
                       self->state, [](const member_slot& w) { return !w.joined; },
                       "did not say hello within " + ms_text(self->state.s.join_timeout)));
      },
      [=](rl_done_atom, bool ok, const std::string& message) {
        if (self->state.interrupted != 0) {
          report(self, message);
          return stop_members(self, std::string("the run was interrupted (") +
                                        (self->state.interrupted == SIGINT ? "SIGINT" : "SIGTERM") + ")");
        }
        if (!ok) return fail(self, message);
        report(self, message);
        self->send(self, ctl_end_atom::value);
      },
      [=](ctl_interrupt_atom, int signal) {
        auto& st = self->state;
        if (st.now == phase::finished) return;
        const std::string name = signal == SIGINT ? "SIGINT" : "SIGTERM";
        if (st.interrupted != 0 || !st.loop || st.now != phase::running) {  // a second signal, or no step to finish
          if (st.interrupted == 0) st.interrupted = signal;
          log_event("interrupted by " + name + ": stopping the members");
          if (st.loop) {  // no step goes on (unlinked first: its end must not end this actor)
            self->unlink_from(st.loop);
            self->send_exit(st.loop, caf::exit_reason::user_shutdown);
            st.loop = caf::actor{};
          }
          return stop_members(self, "the run was interrupted (" + name + ")");
        }
        st.interrupted = signal;
        log_event("interrupted by " + name + ": finishing the step in flight, then stopping the members (" + name +
                  " again stops them at once)");
        self->send(st.loop, rl_stop_atom::value);
      },
      [=](ctl_end_atom) {
        auto& st = self->state;
        if (st.now != phase::running) return;
        st.now = phase::stopping;
        for (const auto& w : st.members)
          if (present(w)) send_to(self, w.peer, control::shutdown{"the run ended"});
        self->delayed_send(self, st.s.stop_timeout, ctl_stop_deadline_atom::value);
      },
      [=](ctl_stop_deadline_atom) {
        if (self->state.now != phase::stopping) return;
        fail(self, missing_members(
                       self->state, [](const member_slot& w) { return w.spawned ? !w.exited : !w.left; },
                       "did not leave within " + ms_text(self->state.s.stop_timeout) + " of the shutdown"));
      },
  };
}

}  // namespace

caf::actor spawn_controller(caf::actor_system& sys, controller_settings settings) {
  return sys.spawn(controller, std::move(settings));
}

}  // namespace tandem
