// The parts of a `swarmrt node` process that outlive one attachment to a coordinator, and how
// it finds a coordinator: at the --join addresses, at the replicas the coordinator it served
// listed last, and at those etcd listed last (--etcd). A replica neither lists any more (its
// process ended and its lease lapsed) is forgotten, so a long run's failovers do not try every
// address the swarm ever had.
#pragma once

#include <caf/all.hpp>
#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "actors/membership/state_keeper.hpp"
#include "apps/net.hpp"
#include "leader/etcd.hpp"
#include "messages/types.hpp"
#include "supervisors/roster.hpp"

namespace swarmrt::apps::node {

struct NodeArgs {
  std::string join;
  uint32_t workers = 1;
  std::string device = "cpu";
  std::string config;
  std::vector<std::string> overrides;
  std::string name;
  std::string listen = "127.0.0.1";
  double connect_timeout_s = 30;
  std::string run_id;       // hex; empty: join whatever run the coordinator runs
  std::string console;      // HOST:PORT of a console port on this node; empty: none
  double stop_grace_s = 0;  // after SIGTERM/SIGUSR1, serve this long for the coordinator's stop
  std::string etcd;         // the run's etcd: where the coordinator replicas are listed
  leader::EtcdTls etcd_tls;
  NetOptions net;
};

// What a console finds on a node's console port: the coordinator's inspector, which it then
// reaches through this node's connection (BASP routes it), so `swarmrt ctl NODE_HOST:PORT`
// sees and commands the whole swarm as through the coordinator's port. The port outlives an
// attachment: each new one puts the coordinator's inspector of the day here.
struct DoorTarget {
  std::mutex mu;
  caf::actor inspector;
};

// What the signal handler reaches: the actor system and the node agent it sends stop to.
struct NodeSignalTargets {
  std::mutex mu;
  caf::actor_system* system = nullptr;
  caf::actor agent;
};

// What outlives one attachment to a coordinator: the process's actor system and signals, its
// names registry, frame link and console port, and the bytes its earlier workers sent.
struct NodeProcess {
  NodeProcess(caf::actor_system& sys, const NodeArgs& args, NodeSignalTargets& targets,
              const StopSignals& signals)
      : sys(sys), args(args), targets(targets), signals(signals) {}
  caf::actor_system& sys;
  const NodeArgs& args;
  NodeSignalTargets& targets;
  const StopSignals& signals;
  std::vector<HostPort> given;   // --join: always tried
  std::vector<HostPort> coords;  // given, then the replicas the coordinator and etcd list now
  HostPort attached;             // the coordinator of this attachment, or of the last one
  HostPort console_at;
  messages::JoinRequest request;
  std::shared_ptr<supervisors::Roster> roster = std::make_shared<supervisors::Roster>();
  std::string bulk;  // this process's frame link, started at the first join that uses one
  std::shared_ptr<DoorTarget> door_target = std::make_shared<DoorTarget>();
  caf::actor door;
  nlohmann::json sent = nlohmann::json::object();  // bytes of attachments that ended, by kind
  std::string name;
  // --etcd: where the run's replicas are listed (with the certificates it is shown, if any).
  std::unique_ptr<leader::Etcd> etcd;
  TlsFilesGuard etcd_files;
  bool etcd_failed = false;              // its failure was logged
  std::vector<std::string> etcd_listed;  // what etcd listed last (kept while it fails)
  // What the coordinator listed last: its agent's thread replaces it every 2 s, the main
  // thread reads it into `coords` when it looks for a coordinator.
  struct Listed {
    std::mutex mu;
    std::vector<std::string> at;
    std::vector<std::string> known;  // `coords` as text: a listed address not among them is new
  };
  std::shared_ptr<Listed> listed = std::make_shared<Listed>();
  // The stage states kept when a coordinator's link was lost, and the actor that hands them to
  // the coordinator the node joins next (spawned at the first attachment).
  actors::KeptStatesPtr kept = std::make_shared<actors::KeptStates>();
  caf::actor keeper;
};

// Every address the node looks for a coordinator at, for its messages.
std::string known(const NodeProcess& p);
// What an attachment's agent does with the replicas its coordinator lists: keeps the list for
// the next search, and says which replicas it adds and which it no longer has.
std::function<void(const std::vector<std::string>&)> keep_listed(const NodeProcess& p);
// The addresses the node tries, made again from the --join addresses (first: their order
// stands), what the coordinator listed last and what etcd lists now (asked here, with --etcd).
void refresh_known(NodeProcess& p);
// What the actor at a coordinator's address said to a console's first question: the answer
// of a leader's directory, a standby's refusal with the replicas it names (kept for the search,
// `named_new` set when one of them is not among the addresses yet; refresh_known adds them), or
// nothing in 3 s (frozen).
enum class Answer { directory, standby, silent };
Answer ask_directory(NodeProcess& p, const caf::actor& dir, const std::string& where,
                     bool* named_new = nullptr);
// The coordinator's directory at the only --join address (it may still be starting: retried
// until --connect-timeout-s); an invalid handle, with the reason logged and `code` set, when
// there is none.
caf::actor reach_directory(caf::actor_system& sys, const NodeArgs& args, const HostPort& coord,
                           const StopSignals& signals, int& code);
// An actor that passes one request (Ts...) on to `dir` and its answer (Reply) back, or the
// error request_receiver_down as soon as `dir` is gone, then ends: CAF would wait out the
// request's timeout for a coordinator that dies before it answers, or a standby's port that
// closes under the question (the standby has just become the leader).
template <class Reply, class... Ts>
caf::actor request_watcher(caf::actor_system& sys, const caf::actor& dir,
                           std::chrono::milliseconds timeout) {
  return sys.spawn([dir, timeout](caf::event_based_actor* self) -> caf::behavior {
    auto promise = std::make_shared<caf::response_promise>();
    self->monitor(dir);
    self->set_down_handler([=](const caf::down_msg&) {
      if (promise->pending()) promise->deliver(caf::make_error(caf::sec::request_receiver_down));
      self->quit();
    });
    return {
        [=](const Ts&... xs) -> caf::result<Reply> {
          *promise = self->make_response_promise<Reply>();
          self->request(dir, timeout, xs...)
              .then(
                  [=](const Reply& reply) {
                    promise->deliver(reply);
                    self->quit();
                  },
                  [=](const caf::error& e) {
                    if (promise->pending()) promise->deliver(e);
                    self->quit();
                  });
          return *promise;
        },
    };
  });
}
// The coordinator's directory at any address the node knows, refreshed by the caller first
// (see find_coordinator in the .cpp).
caf::actor find_coordinator(NodeProcess& p, std::chrono::steady_clock::time_point deadline);

// How one attachment ended: the exit code if the node stops now, or lost (attach again).
struct Attachment {
  int code = 0;
  bool lost = false;    // attach again
  bool joined = false;  // the join was answered: the node served this coordinator
};

// One attachment: join the coordinator whose directory is `dir`, start the workers it assigns,
// serve until the agent stops, and wait for this attachment's actors to go (node_attach.cpp).
Attachment attach(NodeProcess& p, const caf::actor& dir);

}  // namespace swarmrt::apps::node
