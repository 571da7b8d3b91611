#include "messages/types.hpp"

namespace swarmrt::messages {

void register_types(caf::actor_system_config& cfg) {
  cfg.add_message_type<std::vector<uint8_t>>("std::vector<uint8_t>");
  cfg.add_message_type<std::vector<double>>("std::vector<double>");
}

}  // namespace swarmrt::messages
