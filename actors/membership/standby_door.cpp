#include "actors/membership/standby_door.hpp"

#include <spdlog/spdlog.h>

#include "messages/atoms.hpp"
#include "messages/types.hpp"

namespace swarmrt::actors {
using namespace swarmrt::atoms;

namespace {

// The replicas' addresses, the leader's first: etcd is read at most twice a second however
// often the door is asked (a node asks every few seconds, a console once).
const leader::ReplicaList& replicas(standby_door_state& s) {
  const auto now = std::chrono::steady_clock::now();
  if (!s.known || now - s.asked > std::chrono::milliseconds(500)) {
    s.asked = now;
    try {
      s.replicas = s.lister();
      s.known = true;
    } catch (const std::exception& e) {
      spdlog::warn("standby: etcd did not list the replicas ({}); answering with the last list",
                   e.what());
    }
  }
  return s.replicas;
}

// Why a standby takes no command, and where to go instead.
caf::error not_the_leader(standby_door_state& s) {
  const auto& named = replicas(s);
  const auto& at = named.addresses;
  std::string where = named.leader_first ? "the leader is at " + at.front()
                                         : "etcd names no leader now (a takeover is under way)";
  if (at.size() > 1 || !named.leader_first) {
    where += "; replicas:";
    for (const auto& a : at) where += " " + a;
  }
  return caf::make_error(caf::sec::runtime_error,
                         "a standby coordinator of run " + s.run_id +
                             ": it leads only once the leader's lease lapses; " + where);
}

}  // namespace

caf::behavior standby_door(caf::stateful_actor<standby_door_state>* self,
                           leader::ReplicaLister lister, std::string run_id) {
  self->state.lister = std::move(lister);
  self->state.run_id = std::move(run_id);
  // Whatever else comes (a console command, a worker's report to a leader that was here) is
  // refused, and said: a standby holds none of the run.
  self->set_default_handler(
      [=](caf::scheduled_actor*, caf::message_view& view) -> caf::result<caf::message> {
        const auto& sender = self->current_sender();
        auto what = view.content().stringify();
        if (what.size() > 80) what = what.substr(0, 80) + "...";
        spdlog::warn("standby: refused {} from {} (it takes no command until it leads)", what,
                     sender ? caf::to_string(sender->node()) : std::string("an anonymous sender"));
        return not_the_leader(self->state);
      });
  return {
      // A console's and a node's first question: the leader's directory would name its
      // inspector. The reason carries the leader's address; replicas_atom gives it as a list.
      [=](inspector_atom) -> caf::result<caf::actor> { return not_the_leader(self->state); },
      [=](join_atom, const messages::JoinRequest&) -> caf::result<messages::JoinReply> {
        return not_the_leader(self->state);
      },
      [=](replicas_atom) { return replicas(self->state).addresses; },
  };
}

}  // namespace swarmrt::actors
