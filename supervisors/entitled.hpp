// Least privilege inside the swarm (architecture §8). Once a peer is on the control plane, CAF
// delivers its messages to any actor whose handle it holds, so the actors that take commands check
// who sent them: stop, kill, re-wire and fault-injection commands are honoured only from the actors
// entitled to send them, and anything else is dropped with a logged `rejected` line naming the
// sender and the command.
//
// A message that comes from another process without a sender (anon_send) cannot be told
// from a local anonymous one, so local commands (a signal handler's stop) are sent from an
// actor of this process (send_from_here), never anonymously.
#pragma once

#include <caf/all.hpp>
#include <string>

namespace swarmrt::supervisors {

// The current message was sent by an actor of this process.
bool from_this_process(caf::local_actor* self);
// The current message was sent by `entitled` (an invalid handle entitles no one).
bool sent_by(caf::local_actor* self, const caf::actor& entitled);
// Logs that `who` (the actor refusing) dropped `command` from the current sender.
void rejected(caf::local_actor* self, const std::string& who, const std::string& command);

// An exit handler for actors that must not die from a stray exit signal: an exit message from
// this process (a supervisor, a shutdown) ends the actor as usual; one from elsewhere is
// rejected. (A kill, exit_reason::kill, cannot be trapped in CAF: holders of the credential
// can still kill an actor they hold a handle of.)
void quit_only_from_this_process(caf::scheduled_actor* self, const std::string& who);

// Sends `xs` to `to` from a short-lived actor of `sys`, so the receiver sees a sender of its
// own process (for threads outside CAF: signal handlers, main).
template <class... Ts>
void send_from_here(caf::actor_system& sys, const caf::actor& to, Ts&&... xs) {
  {
    caf::scoped_actor self{sys};
    self->send(to, std::forward<Ts>(xs)...);
  }
  // A scoped actor leaves this thread holding the system's logger (thread-local); a thread
  // that outlives the system (a signal watcher) would make ~actor_system wait for it forever.
  caf::logger::set_current_actor_system(nullptr);
}

}  // namespace swarmrt::supervisors
