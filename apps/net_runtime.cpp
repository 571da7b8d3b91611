// The runtime's side of apps/net.hpp: it needs the actors library (and LibTorch), which the
// console's executable does without.
#include "actors/runtime/runtime.hpp"
#include "apps/net.hpp"

namespace swarmrt::apps {

credential::TlsFiles configure_network(caf::actor_system_config& cfg, const NetOptions& net,
                                       const std::string& secret, const std::string& name) {
  actors::configure_actor_system(cfg);
  return configure_planes(cfg, net, secret, name);
}

}  // namespace swarmrt::apps
