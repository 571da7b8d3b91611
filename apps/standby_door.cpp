#include "apps/standby_door.hpp"

#include <spdlog/spdlog.h>
#include <caf/all.hpp>
#include <caf/io/all.hpp>
#include <caf/openssl/manager.hpp>
#include <caf/openssl/publish.hpp>
#include <chrono>

#include "messages/atoms.hpp"
#include "messages/types.hpp"

namespace swarmrt::apps {
using namespace swarmrt::atoms;

namespace {

struct door_state {
  StandbyDoor::Lister lister;
  std::string run_id;
  StandbyDoor::Replicas replicas;  // the last list etcd gave
  std::chrono::steady_clock::time_point asked{};
  bool known = false;  // etcd answered at least once
};

// The replicas' addresses, the leader's first: etcd is read at most twice a second however
// often the door is asked (a node asks every few seconds, a console once).
const StandbyDoor::Replicas& replicas(door_state& s) {
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
caf::error not_the_leader(door_state& s) {
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

caf::behavior door(caf::stateful_actor<door_state>* self, StandbyDoor::Lister lister,
                   std::string run_id) {
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

}  // namespace

StandbyDoor::StandbyDoor(const HostPort& listen, const std::string& secret, const NetOptions& net,
                         const std::string& run_id, Lister lister) {
  cfg_ = std::make_unique<caf::actor_system_config>();
  tls_ = configure_network(*cfg_, net, secret, "standby");
  // One scheduler thread that sleeps until a message wakes it: a standby waits for hours
  // beside a run and should cost it nothing (as a console, apps/ctl_command.cpp).
  cfg_->set("scheduler.max-threads", 1);
  cfg_->set("work-stealing.relaxed-sleep-duration", caf::timespan{std::chrono::seconds(1)});
  sys_ = std::make_unique<caf::actor_system>(*cfg_);
  door_ = std::make_unique<caf::actor>(sys_->spawn(door, std::move(lister), run_id));
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
  transport::remove_cluster_tls(tls_);
}

}  // namespace swarmrt::apps
