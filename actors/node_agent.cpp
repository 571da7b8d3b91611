#include "actors/node_agent.hpp"

#include <spdlog/spdlog.h>

namespace swarmrt::actors {
using namespace swarmrt::atoms;
using Self = caf::stateful_actor<node_agent_state>;

namespace {

void stop(Self* self, const std::string& why) {
  auto& s = self->state;
  spdlog::info("node '{}' stopping: {}", s.setup.name, why);
  for (const auto& w : s.setup.workers) self->send_exit(w.handle, caf::exit_reason::user_shutdown);
  self->quit(caf::exit_reason::normal);
}

}  // namespace

caf::behavior node_agent(Self* self, NodeAgentSetup setup) {
  auto& s = self->state;
  s.setup = std::move(setup);
  self->monitor(s.setup.directory);
  for (const auto& w : s.setup.workers) self->monitor(w.handle);
  self->set_down_handler([=](const caf::down_msg& down) {
    auto& s = self->state;
    if (down.source == s.setup.directory.address())
      return stop(self, "lost the coordinator (" + self->system().render(down.reason) + ")");
    for (const auto& w : s.setup.workers)
      if (w.handle.address() == down.source)
        spdlog::error("node '{}': worker {} went down: {}", s.setup.name, w.id,
                      self->system().render(down.reason));
  });
  self->send(s.setup.directory, workers_atom::value, s.setup.name, s.setup.index, s.setup.workers);
  return {
      [=](stop_atom) {
        auto& s = self->state;
        const auto& sender = self->current_sender();
        // A signal handler sends anonymously; anyone else but the coordinator is ignored.
        if (sender && sender != caf::actor_cast<caf::strong_actor_ptr>(s.setup.directory)) {
          spdlog::warn("node '{}': ignored a stop request from a stranger", s.setup.name);
          return;
        }
        stop(self, sender ? "the coordinator said stop" : "signal");
      },
  };
}

}  // namespace swarmrt::actors
