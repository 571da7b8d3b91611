// A standby coordinator's door: while a replica stands by, its --listen address answers those
// who hold the cluster credential with where the leader is, so that `swarmrt ctl B` and
// `swarmrt node --join B` given a standby's address B reach the leader through it. It takes no
// command: a console's first request (inspector_atom) and a node's join are refused with the
// leader's address in the reason, and replicas_atom (what a node asks its coordinator every
// few seconds) answers the replicas' addresses, the leader's first. The replica closes it
// before it leads, and the directory (directory.hpp) opens on the same port.
#pragma once

#include <caf/all.hpp>
#include <chrono>
#include <string>

#include "leader/replicas.hpp"

namespace swarmrt::actors {

struct standby_door_state {
  leader::ReplicaLister lister;
  std::string run_id;
  leader::ReplicaList replicas;  // the last list etcd gave
  std::chrono::steady_clock::time_point asked{};
  bool known = false;  // etcd answered at least once
  static inline const char* name = "standby_door";
};

// `lister`: the replicas as etcd lists them now (throws on an etcd error: the door then answers
// with the last list it had). `run_id`: the run's, for the reasons it gives.
caf::behavior standby_door(caf::stateful_actor<standby_door_state>* self,
                           leader::ReplicaLister lister, std::string run_id);

}  // namespace swarmrt::actors
