#include "supervisors/entitled.hpp"

#include <spdlog/spdlog.h>

namespace swarmrt::supervisors {

bool from_this_process(caf::local_actor* self) {
  const auto& sender = self->current_sender();
  return sender && sender->node() == self->node();
}

bool sent_by(caf::local_actor* self, const caf::actor& entitled) {
  return entitled && self->current_sender() == caf::actor_cast<caf::strong_actor_ptr>(entitled);
}

void rejected(caf::local_actor* self, const std::string& who, const std::string& command) {
  const auto& sender = self->current_sender();
  spdlog::warn("rejected: {} dropped '{}' from {}: not entitled to send it", who, command,
               sender ? caf::to_string(sender->address()) : std::string("an anonymous sender"));
}

void quit_only_from_this_process(caf::scheduled_actor* self, const std::string& who) {
  self->set_exit_handler([self, who](const caf::exit_msg& msg) {
    if (msg.source && msg.source.node() == self->node()) {
      self->quit(msg.reason);
      return;
    }
    spdlog::warn("rejected: {} ignored an exit signal ({}) from {}: not entitled to send it", who,
                 self->system().render(msg.reason),
                 msg.source ? caf::to_string(msg.source) : std::string("an anonymous sender"));
  });
}

}  // namespace swarmrt::supervisors
