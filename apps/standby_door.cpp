#include "apps/standby_door.hpp"

#include <spdlog/spdlog.h>
#include <caf/all.hpp>
#include <caf/io/all.hpp>
#include <caf/openssl/manager.hpp>
#include <caf/openssl/publish.hpp>
#include <chrono>

#include "actors/membership/standby_door.hpp"

namespace swarmrt::apps {

StandbyDoor::StandbyDoor(const HostPort& listen, const std::string& secret, const NetOptions& net,
                         const std::string& run_id, leader::ReplicaLister lister) {
  cfg_ = std::make_unique<caf::actor_system_config>();
  tls_ = configure_network(*cfg_, net, secret, "standby");
  // One scheduler thread that sleeps until a message wakes it: a standby waits for hours
  // beside a run and should cost it nothing (as a console, apps/ctl_command.cpp).
  cfg_->set("scheduler.max-threads", 1);
  cfg_->set("work-stealing.relaxed-sleep-duration", caf::timespan{std::chrono::seconds(1)});
  sys_ = std::make_unique<caf::actor_system>(*cfg_);
  door_ =
      std::make_unique<caf::actor>(sys_->spawn(actors::standby_door, std::move(lister), run_id));
  const char* host = listen.host == "0.0.0.0" ? nullptr : listen.host.c_str();
  // Over mutual TLS only, as the leader's directory: a peer without the cluster's
  // certificate gets no handle and no answer.
  auto port = caf::openssl::publish(*door_, listen.port, host, true);
  if (!port) {
    spdlog::warn(
        "standby: cannot listen on {} ({}): consoles and nodes given only this replica's "
        "address will not find the leader through it",
        host_port_text(listen), sys_->render(port.error()));
    return;
  }
  port_ = *port;
  spdlog::info("standby: {} answers with the leader's address until this replica leads",
               host_port_text(listen));
}

StandbyDoor::~StandbyDoor() {
  // (caf::openssl::unpublish of CAF 0.17.6 does not compile: it leaves out the actor.)
  if (port_ != 0)
    caf::make_function_view(sys_->openssl_manager().actor_handle())(caf::unpublish_atom::value,
                                                                    door_->address(), port_);
  caf::anon_send_exit(*door_, caf::exit_reason::user_shutdown);
  door_.reset();
  sys_.reset();  // the middleman closes every connection, and with them the port
  credential::remove_cluster_tls(tls_);
}

}  // namespace swarmrt::apps
