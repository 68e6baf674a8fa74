// The member actor: hello, welcome, heartbeats both ways, shutdown (see member.hpp).
#include "actors/member/member_actor.hpp"

#include <unistd.h>

#include <variant>

#include <caf/all.hpp>

#include "actors/bridge/bridge.hpp"
#include "actors/api/error_context.hpp"
#include "actors/bridge/log_line.hpp"
#include "actors/member/host.hpp"

namespace tandem {

namespace {

using wrk_tick_atom = caf::atom_constant<caf::atom("wrk_tick")>;
using wrk_welcome_deadline_atom = caf::atom_constant<caf::atom("wrk_wdl")>;

enum class phase { connecting, joined, finished };

struct member_state {
  member_settings s;
  bridge_actor bridge;
  phase now = phase::connecting;
  control::welcome welcome;
  caf::actor host;                          // spawned at the welcome: data plane, engines, actors
  std::chrono::milliseconds interval{1000};
  std::chrono::milliseconds timeout{10000};
  caf::actor_clock::time_point last_heard;  // the controller's last heartbeat (or the welcome)
  std::uint64_t sent = 0;                   // our heartbeats
  std::uint64_t received = 0;               // the controller's heartbeats
  static inline const char* name = "member";
};

using member_ptr = caf::stateful_actor<member_state>*;

std::string ms_text(std::chrono::milliseconds d) { return std::to_string(d.count()) + " ms"; }

void send_control(member_ptr self, control::message m) {
  self->send(self->state.bridge, ctl_send_atom::value, std::string(), std::move(m));
}

void finish(member_ptr self, std::int32_t code, const std::string& message, bool shut_down = false) {
  auto& st = self->state;
  if (st.now == phase::finished) return;
  st.now = phase::finished;
  self->send(st.s.listener, mbr_done_atom::value, code, message, shut_down);
}

std::string roles_text(const control::welcome& w) {
  std::string r;
  if (w.assigned.policy) r += "policy-" + std::to_string(w.data_parallel_rank);
  if (w.assigned.rollout) r += (r.empty() ? "" : " and ") + std::string("rollout-") + std::to_string(w.rollout_rank);
  return r.empty() ? "no actors" : r;
}

// ---- connecting ----------------------------------------------------------------------------

void on_welcome(member_ptr self, const control::welcome& w) {
  auto& st = self->state;
  st.welcome = w;
  st.interval = std::chrono::milliseconds(w.heartbeat_interval_ms > 0 ? w.heartbeat_interval_ms : 1000);
  st.timeout = std::chrono::milliseconds(w.heartbeat_timeout_ms > 0 ? w.heartbeat_timeout_ms : 10000);
  st.last_heard = self->clock().now();
  st.now = phase::joined;
  log_line(st.s.log_name + ": joined run " + w.run_id + " as " + roles_text(w) + " (heartbeats every " + ms_text(st.interval) +
           ", timeout " + ms_text(st.timeout) + ")");
  self->send(self, wrk_tick_atom::value);
  if (w.recipe_yaml.empty()) {  // a control-plane-only run (tests of the process layer)
    log_line(st.s.log_name + ": the welcome carries no recipe: this member keeps the control plane only");
    return;
  }
  host_settings hs;
  hs.welcome = w;
  hs.rank = static_cast<std::int32_t>(st.s.rank);
  hs.controller = st.s.controller;
  hs.log_name = st.s.log_name;
  hs.bridge = st.bridge;
  hs.parent = caf::actor{self};
  hs.keys = st.s.keys;
  st.host = spawn_host(self->system(), std::move(hs));
  self->link_to(st.host);
}

// ---- joined ---------------------------------------------------------------------------------

void on_tick(member_ptr self) {
  auto& st = self->state;
  if (st.now != phase::joined) return;
  const auto silent = std::chrono::duration_cast<std::chrono::milliseconds>(self->clock().now() - st.last_heard);
  if (silent > st.timeout)
    return finish(self, 1,
                  "the controller at " + st.s.controller + " sent no heartbeat for " + ms_text(silent) + " (timeout " +
                      ms_text(st.timeout) + "): it died or hangs; exiting");
  send_control(self, control::heartbeat{static_cast<std::int32_t>(st.s.rank), st.sent++});
  self->delayed_send(self, st.interval, wrk_tick_atom::value);
}

void on_shutdown(member_ptr self, const control::shutdown& m) {
  auto& st = self->state;
  if (st.now == phase::finished) return;
  send_control(self, control::goodbye{static_cast<std::int32_t>(st.s.rank), "shut down: " + m.reason});
  const std::string message =
      "shut down by the controller (" + m.reason + ") after " + std::to_string(st.received) + " controller heartbeats";
  // The member of a failed run exits with 1, so whatever started it (srun, a launcher) sees it.
  const std::int32_t code = m.failed ? 1 : 0;
  // Finish once the goodbye is posted, so the socket does not close before it.
  self->request(st.bridge, caf::infinite, ctl_flush_atom::value)
      .then([=](bool) { finish(self, code, message, true); }, [=](caf::error&) { finish(self, code, message, true); });
}

void on_control(member_ptr self, const control::message& m) {
  auto& st = self->state;
  if (st.now == phase::finished) return;
  if (const auto* w = std::get_if<control::welcome>(&m)) {
    if (st.now == phase::connecting) on_welcome(self, *w);
  } else if (std::holds_alternative<control::heartbeat>(m)) {
    st.last_heard = self->clock().now();
    ++st.received;
  } else if (const auto* s = std::get_if<control::shutdown>(&m)) {
    on_shutdown(self, *s);
  } else if (const auto* e = std::get_if<control::error>(&m)) {
    if (st.now == phase::connecting)
      return finish(self, 1, "the controller at " + st.s.controller + " refused this member: " + e->text);
    log_line(st.s.log_name + ": the controller reported an error: " + e->text);
  } else if (served_by_host(control::kind_of(m)) && st.host) {
    self->send(st.host, hst_in_atom::value, m);
  } else {
    log_line(st.s.log_name + ": ignored a " + std::string(control::to_string(control::kind_of(m))) +
             " from the controller" + (st.now == phase::connecting ? " before its welcome" : ""));
  }
}

caf::behavior member(member_ptr self, member_settings s) {
  auto& st = self->state;
  st.s = std::move(s);
  st.bridge = self->spawn<caf::linked>(bridge, st.s.socket, caf::actor{self}, st.s.log_name);
  if (auto connected = st.s.socket->start(bridge_events(st.bridge)); !connected) {
    finish(self, 1, error_text(connected.error()));
  } else {
    control::hello h;
    h.rank = static_cast<std::int32_t>(st.s.rank);
    h.world_size = static_cast<std::int32_t>(st.s.world);
    h.pid = ::getpid();
    h.hostname = st.s.hostname;
    h.device = "";  // assigned by the placement plan, not known before the welcome
    h.offered = {true, true};
    send_control(self, h);
    self->delayed_send(self, st.s.welcome_timeout, wrk_welcome_deadline_atom::value);
  }
  return {
      [=](ctl_recv_atom, const std::string&, const control::message& m) { on_control(self, m); },
      [=](ctl_unreach_atom, const std::string&, const std::string&) {
        // Logged by the socket thread; the controller's silence decides.
      },
      [=](wrk_tick_atom) { on_tick(self); },
      [=](hst_fail_atom, const std::string& why) {
        // The host told the controller already (an error frame); give it a moment to leave.
        self->request(self->state.bridge, caf::infinite, ctl_flush_atom::value)
            .then([=](bool) { finish(self, 1, "setting up failed: " + why); },
                  [=](caf::error&) { finish(self, 1, "setting up failed: " + why); });
      },
      [=](wrk_welcome_deadline_atom) {
        auto& st = self->state;
        if (st.now != phase::connecting) return;
        finish(self, 1,
               "no welcome from the controller at " + st.s.controller + " within " + ms_text(st.s.welcome_timeout) +
                   " (is it running, reachable, and expecting rank " + std::to_string(st.s.rank) + " of " +
                   std::to_string(st.s.world) + "?)");
      },
  };
}

}  // namespace

caf::actor spawn_member_actor(caf::actor_system& sys, member_settings settings) { return sys.spawn(member, std::move(settings)); }

}  // namespace tandem
