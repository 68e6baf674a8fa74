// Heartbeat bookkeeping on the actor's clock.
#include "actors/supervisor/supervisor.hpp"


#include <caf/all.hpp>

namespace tandem {

namespace {

std::string age_text(caf::actor_clock::clock_type::duration age) {
  return std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(age).count()) + " ms";
}

}  // namespace

supervisor_actor::behavior_type supervisor(supervisor_actor::stateful_pointer<supervisor_state> self,
                                           caf::actor listener, supervisor_options options) {
  self->delayed_send(self, options.check_interval, tick_atom::value);
  return {
      [=](watch_atom, const std::string& member) { self->state.last_seen[member] = self->clock().now(); },
      [=](heartbeat_atom, const std::string& member) {
        auto it = self->state.last_seen.find(member);
        if (it != self->state.last_seen.end()) it->second = self->clock().now();
      },
      [=](forget_atom, const std::string& member) { self->state.last_seen.erase(member); },
      [=](tick_atom) {
        const auto now = self->clock().now();
        for (auto it = self->state.last_seen.begin(); it != self->state.last_seen.end();) {
          const auto age = now - it->second;
          if (age > options.heartbeat_timeout) {
            // The listener is dynamically typed (the driver, a test probe): CAF checks nothing here.
            caf::unsafe_send_as(self, listener, lost_atom::value, it->first,
                       "no heartbeat for " + age_text(age) + " (timeout " + age_text(options.heartbeat_timeout) +
                           "): the member died or hangs");
            it = self->state.last_seen.erase(it);
          } else {
            ++it;
          }
        }
        self->delayed_send(self, options.check_interval, tick_atom::value);
      },
      [=](watched_atom) {
        std::vector<std::string> names;
        for (const auto& [n, t] : self->state.last_seen) names.push_back(n);
        return names;
      },
  };
}

}  // namespace tandem
