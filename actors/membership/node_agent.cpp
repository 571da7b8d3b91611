#include "actors/membership/node_agent.hpp"

#include <spdlog/spdlog.h>

#include <set>

#include "config/config.hpp"
#include "supervisors/entitled.hpp"

namespace swarmrt::actors {
using namespace swarmrt::atoms;
using Self = caf::stateful_actor<node_agent_state>;

namespace {

void stop(Self* self, const std::string& why) {
  auto& s = self->state;
  spdlog::info("node '{}' stopping: {}", s.setup.name, why);
  // Stopping a supervisor stops its workers.
  for (const auto& sup : s.setup.supervisors) self->send_exit(sup, caf::exit_reason::user_shutdown);
  for (const auto& w : s.setup.workers) self->send_exit(w.handle, caf::exit_reason::user_shutdown);
  if (s.failed)
    self->quit(caf::make_error(caf::sec::runtime_error, why));
  else
    self->quit(caf::exit_reason::normal);
}

// The coordinator's link is lost: each live worker's state goes to the kept states (the
// workers answer between two messages, when their parameters are those of the last step they
// applied), then the node stops this attachment's workers.
void keep_states_and_stop(Self* self, const std::string& why) {
  auto& s = self->state;
  std::vector<supervisors::RosterEntry> workers;
  if (s.setup.kept && s.setup.roster)
    for (auto& e : s.setup.roster->entries())
      if (e.kind == "worker" && e.handle && e.stage >= 0) workers.push_back(e);
  if (workers.empty()) return stop(self, why);
  auto waiting = std::make_shared<size_t>(workers.size());
  auto kept = std::make_shared<size_t>(0), bytes = std::make_shared<size_t>(0);
  auto steps = std::make_shared<std::set<int64_t>>();  // the next leader takes one step's
  auto one_less = [=] {
    if (--*waiting > 0) return;
    spdlog::info(
        "node '{}' keeps the state of {} of its {} workers ({:.1f} MB, {}; after step {}) for "
        "the next coordinator",
        self->state.setup.name, *kept, workers.size(), static_cast<double>(*bytes) / 1e6,
        self->state.setup.keep_each_worker ? "each worker's own" : "one per stage and step",
        fmt::join(steps->begin(), steps->end(), ", "));
    stop(self, why);
  };
  const auto timeout = config::as_duration(s.setup.keep_timeout_s);
  for (const auto& w : workers)
    self->request(w.handle, timeout, state_atom::value)
        .then(
            [=](const messages::WorkerState& st) {
              if (st.step >= 0) {
                *bytes += self->state.setup.kept->keep(static_cast<uint32_t>(w.stage), st,
                                                       self->state.setup.keep_each_worker);
                ++*kept;
                steps->insert(st.step);
              }
              one_less();
            },
            [=](const caf::error&) { one_less(); });
}

// Asks the directory for the replicas' addresses; the answer goes to on_replicas, and the
// next ask is due replicas_every_s later.
void ask_replicas(Self* self) {
  auto& s = self->state;
  if (!s.setup.on_replicas) return;
  const auto every = config::as_duration(s.setup.replicas_every_s);
  self->request(s.setup.directory, every, replicas_atom::value)
      .then([=](const std::vector<std::string>& at) { self->state.setup.on_replicas(at); },
            [](const caf::error&) {});  // a coordinator lost is noticed by its monitor
  self->delayed_send(self, every, replicas_timer_atom::value);
}

}  // namespace

caf::behavior node_agent(Self* self, NodeAgentSetup setup) {
  auto& s = self->state;
  s.setup = std::move(setup);
  self->monitor(s.setup.directory);
  for (const auto& sup : s.setup.supervisors) self->monitor(sup);
  supervisors::quit_only_from_this_process(self, "node '" + s.setup.name + "'");
  self->set_down_handler([=](const caf::down_msg& down) {
    auto& s = self->state;
    if (down.source == s.setup.directory.address()) {
      // An unreachable link is a partition or a dead coordinator process, not a decision to
      // stop: the node attaches again if the coordinator (or its successor) answers in time.
      const std::string why = "lost the coordinator (" + self->system().render(down.reason) + ")";
      if (down.reason != caf::exit_reason::remote_link_unreachable) return stop(self, why);
      *s.setup.lost = true;
      return keep_states_and_stop(self, why);
    }
    for (const auto& sup : s.setup.supervisors)
      if (sup.address() == down.source && down.reason &&
          down.reason != caf::exit_reason::user_shutdown) {
        s.failed = true;
        return stop(self, "a supervisor gave up: " + self->system().render(down.reason));
      }
  });
  self->send(s.setup.directory, workers_atom::value, s.setup.name, s.setup.index, s.setup.workers);
  ask_replicas(self);
  return {
      [=](replicas_timer_atom) {
        if (self->current_sender() == self->address()) ask_replicas(self);
      },
      // Fault injection the coordinator forwards here (see chaos_control).
      [=](kill_atom, const std::string& target) {
        auto& s = self->state;
        if (!supervisors::sent_by(self, s.setup.directory))
          return supervisors::rejected(self, "node '" + s.setup.name + "'", "kill " + target);
        if (s.setup.chaos) self->send(s.setup.chaos, kill_atom::value, target);
      },
      // The balancer's move, through the directory: the stage supervisor holding the worker
      // carries it out.
      [=](move_atom, uint32_t old_id, uint32_t stage, uint32_t new_id) -> caf::result<int64_t> {
        auto& s = self->state;
        if (!supervisors::sent_by(self, s.setup.directory)) {
          supervisors::rejected(self, "node '" + s.setup.name + "'", "move");
          return int64_t{-1};
        }
        if (s.setup.supervisors.empty()) return int64_t{-1};
        auto promise = self->make_response_promise<int64_t>();
        auto waiting = std::make_shared<size_t>(s.setup.supervisors.size());
        auto found = std::make_shared<int64_t>(-1);
        auto answered = [=](int64_t id) mutable {
          if (id >= 0) *found = id;
          if (--*waiting == 0) promise.deliver(*found);
        };
        const auto timeout = config::as_duration(s.setup.move_timeout_s);
        for (const auto& sup : s.setup.supervisors)
          self->request(sup, timeout, move_atom::value, old_id, stage, new_id)
              .then([=](int64_t id) mutable { answered(id); },
                    [=](const caf::error&) mutable { answered(-1); });
        return promise;
      },
      [=](stop_atom) {
        auto& s = self->state;
        // The coordinator, or this process (its signal handler); no one else.
        const bool coordinator = supervisors::sent_by(self, s.setup.directory);
        if (!coordinator && !supervisors::from_this_process(self))
          return supervisors::rejected(self, "node '" + s.setup.name + "'", "stop");
        stop(self, coordinator ? "the coordinator said stop" : "signal");
      },
  };
}

}  // namespace swarmrt::actors
