#include "supervisors/chaos_control.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <nlohmann/json.hpp>

#include "messages/types.hpp"
#include "model/run_dir.hpp"
#include "supervisors/entitled.hpp"

namespace swarmrt::supervisors {
using namespace swarmrt::atoms;
using Self = caf::stateful_actor<chaos_state>;

namespace {

bool is_kind(const std::string& t) {
  return t == "worker" || t == "group" || t == "loader" || t == "averager" || t == "tracker" ||
         t == "any";
}

// Kills `target` here, or forwards it; returns what happened, for the log and the caller.
std::string kill(Self* self, const std::string& target, const std::string& cause) {
  auto& s = self->state;
  if (target == "coordinator") {
    // The coordinator's chaos actor is the one without a process of its own to kill as a
    // node; it ends its process as a crash would (no checkpoint, no goodbye).
    if (s.setup.kill_self) return "the coordinator is killed where it runs, not on a node";
    spdlog::warn("chaos: killing this coordinator process ({})", cause);
    std::fflush(nullptr);
    std::_Exit(137);
  }
  if (target == "node") {
    if (s.setup.kill_self) {
      spdlog::warn("chaos: killing this node process ({})", cause);
      s.setup.kill_self();
      return "node killed";
    }
    if (*s.setup.forward) {
      self->send(*s.setup.forward, kill_atom::value, target);
      return "node kill forwarded";
    }
    return "no node to kill here";
  }
  std::optional<std::pair<std::string, caf::actor>> victim;
  if (is_kind(target)) {
    victim = s.setup.roster ? s.setup.roster->pick(target, s.rng) : std::nullopt;
  } else if (s.setup.roster) {
    if (auto a = s.setup.roster->find(target)) victim = std::make_pair(target, *a);
  }
  if (!victim) {
    if (*s.setup.forward) {
      self->send(*s.setup.forward, kill_atom::value, target);
      return target + ": not here, forwarded";
    }
    return "no actor '" + target + "' here";
  }
  ++s.kills;
  spdlog::warn("chaos: killing {} ({})", victim->first, cause);
  if (s.setup.metrics)
    self->send(s.setup.metrics, metrics_atom::value,
               nlohmann::json{{"event", "fault"},
                              {"kind", "injected"},
                              {"actor", victim->first},
                              {"cause", cause},
                              {"wall", model::wall_clock_s()}}
                   .dump());
  // Out of the roster at once: until its supervisor restarts it, a dead actor is no victim
  // (every counted kill is one death).
  if (s.setup.roster) s.setup.roster->remove(victim->first, victim->second);
  self->send_exit(victim->second, caf::exit_reason::kill);
  return "killed " + victim->first;
}

}  // namespace

void register_chaos(const caf::actor& chaos) {
  chaos->home_system().registry().put(caf::atom("chaos"),
                                      caf::actor_cast<caf::strong_actor_ptr>(chaos));
}

caf::behavior chaos_control(Self* self, ChaosSetup setup) {
  auto& s = self->state;
  s.setup = std::move(setup);
  s.rng.seed(static_cast<uint64_t>(s.setup.config.seed));
  const auto& c = s.setup.config;
  if (!c.kill.empty() && c.kill_every_s > 0)
    self->delayed_send(self, config::as_duration(c.kill_every_s), chaos_timer_atom::value);
  return {
      // Registered as "chaos": reachable by name from any peer that asks this process's
      // registry. Only this process (its node agent, the directory, its own schedule, a test)
      // injects faults.
      [=](kill_atom, const std::string& target) -> std::string {
        if (!from_this_process(self)) {
          rejected(self, "chaos control", "kill " + target);
          return "rejected: not entitled";
        }
        return kill(self, target, "requested");
      },
      [=](slow_atom, const std::string& name, double factor) -> std::string {
        auto& s = self->state;
        if (!from_this_process(self)) {
          rejected(self, "chaos control", "slow " + name);
          return "rejected: not entitled";
        }
        auto a = s.setup.roster ? s.setup.roster->find(name) : std::nullopt;
        if (!a) return "no actor '" + name + "' here";
        self->send(*a, slow_atom::value, name, factor);
        spdlog::warn("chaos: {} now computes {}x slower", name, factor);
        return name + " slowed by " + std::to_string(factor);
      },
      [=](step_atom, uint64_t step, const std::string& phase) {
        auto& s = self->state;
        const auto& c = s.setup.config;
        s.last_step = std::max(s.last_step, step);
        // Once: a restarted tracker that reaches the same point again is not killed again.
        if (!c.kill.empty() && c.kill_at_step > 0 && !s.killed_at_step &&
            step == static_cast<uint64_t>(c.kill_at_step) &&
            phase == config::name_of(c.kill_at_phase)) {
          s.killed_at_step = true;
          kill(self, c.kill,
               "chaos.kill_at_step = " + std::to_string(step) + ", " + phase + " of the step");
        }
      },
      // The directory, before it answers a join (kill_at_phase = "join"): answered once the
      // kill, if due, is done (a coordinator killed here answers nothing).
      [=](join_atom) -> bool {
        auto& s = self->state;
        if (!from_this_process(self)) {
          rejected(self, "chaos control", "join");
          return false;
        }
        const auto& c = s.setup.config;
        if (c.kill.empty() || c.kill_at_step <= 0 || s.killed_at_step ||
            c.kill_at_phase != config::KillPhase::join ||
            s.last_step < static_cast<uint64_t>(c.kill_at_step))
          return true;
        s.killed_at_step = true;
        kill(self, c.kill,
             "chaos.kill_at_step = " + std::to_string(c.kill_at_step) +
                 ", join: a node joins in step " + std::to_string(s.last_step));
        return true;
      },
      [=](chaos_timer_atom) {
        auto& s = self->state;
        const auto& c = s.setup.config;
        if (c.kill_limit > 0 && s.timed >= static_cast<uint64_t>(c.kill_limit)) return;
        // A tick that finds no victim (all of the kind are dead, restarting) does not count
        // toward kill_limit.
        const auto before = s.kills;
        kill(self, c.kill, "chaos.kill_every_s");
        if (s.kills > before || c.kill == "node") ++s.timed;
        self->delayed_send(self, config::as_duration(c.kill_every_s), chaos_timer_atom::value);
      },
      [=](faults_atom) { return self->state.kills; },
  };
}

}  // namespace swarmrt::supervisors
