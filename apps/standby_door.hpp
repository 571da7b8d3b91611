// A standby coordinator's port: while a replica stands by, its --listen address answers those
// who hold the cluster credential with where the leader is, so that `swarmrt ctl B` and
// `swarmrt node --join B` given a standby's address B reach the leader through it. It takes no
// command: a console's first request (inspector_atom) and a node's join are refused with the
// leader's address in the reason, and replicas_atom (what a node asks its coordinator every
// few seconds) answers the replicas' addresses, the leader's first. The port closes before the
// replica leads, and the directory opens on it.
#pragma once

#include <caf/fwd.hpp>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "apps/net.hpp"
#include "transport/cluster_tls.hpp"

namespace swarmrt::apps {

class StandbyDoor {
 public:
  // The replicas' addresses as etcd lists them now (this one's too: it may lead next), the
  // leader's first when there is one; throws on an etcd error (the door then answers with the
  // last list it had).
  struct Replicas {
    std::vector<std::string> addresses;
    bool leader_first = false;  // no leader now (its lease lapsed): the order is etcd's
  };
  using Lister = std::function<Replicas()>;
  // Listens on `listen` over mutual TLS with the certificate `secret` derives; a door that
  // cannot listen says so in the log and answers nothing (open() is false).
  StandbyDoor(const HostPort& listen, const std::string& secret, const NetOptions& net,
              const std::string& run_id, Lister lister);
  ~StandbyDoor();  // closes the port
  StandbyDoor(const StandbyDoor&) = delete;
  StandbyDoor& operator=(const StandbyDoor&) = delete;
  bool open() const { return port_ != 0; }

 private:
  transport::TlsFiles tls_;
  std::unique_ptr<caf::actor_system_config> cfg_;
  std::unique_ptr<caf::actor_system> sys_;
  std::unique_ptr<caf::actor> door_;
  uint16_t port_ = 0;
};

}  // namespace swarmrt::apps
