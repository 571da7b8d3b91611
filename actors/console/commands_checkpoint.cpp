// The console's `checkpoint`: the tracker saves the swarm once the open step closes
// (actors/console/commands.hpp).
#include <nlohmann/json.hpp>

#include "actors/console/commands.hpp"
#include "config/config.hpp"
#include "messages/metrics.hpp"

namespace swarmrt::actors::console {
using namespace swarmrt::atoms;

Result checkpoint_command(const Call& c) {
  if (c.args.size() != 1) return c.usage();
  auto* self = c.self;
  auto tracker = self->state.setup.roster->find("tracker");
  if (!tracker) return failure("this swarm has no step tracker");
  c.record();
  Promise promise = c.promise();
  // The tracker saves once the open step closes: a step may take a while.
  self->request(*tracker, config::as_duration(messages::kCheckpointWaitS), checkpoint_atom::value)
      .then([=](const std::string& answer) mutable { promise.deliver(answer); },
            [=](const caf::error& e) mutable {
              promise.deliver(failure("checkpoint: " + self->system().render(e)));
            });
  return promise;
}

}  // namespace swarmrt::actors::console
