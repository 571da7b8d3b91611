// A standby coordinator's port: an actor system of its own (one sleeping scheduler thread)
// that publishes the standby's door (actors/membership/standby_door.hpp) on --listen over the
// control plane's mutual TLS while the replica stands by, and closes it before it leads.
#pragma once

#include <caf/fwd.hpp>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "apps/net.hpp"
#include "credential/cluster_tls.hpp"
#include "leader/replicas.hpp"

namespace swarmrt::apps {

class StandbyDoor {
 public:
  // Listens on `listen` over mutual TLS with the certificate `secret` derives; a door that
  // cannot listen says so in the log and answers nothing (open() is false).
  StandbyDoor(const HostPort& listen, const std::string& secret, const NetOptions& net,
              const std::string& run_id, leader::ReplicaLister lister);
  ~StandbyDoor();  // closes the port
  StandbyDoor(const StandbyDoor&) = delete;
  StandbyDoor& operator=(const StandbyDoor&) = delete;
  bool open() const { return port_ != 0; }

 private:
  credential::TlsFiles tls_;
  std::unique_ptr<caf::actor_system_config> cfg_;
  std::unique_ptr<caf::actor_system> sys_;
  std::unique_ptr<caf::actor> door_;
  uint16_t port_ = 0;
};

}  // namespace swarmrt::apps
