// The membership directory, on the coordinator: nodes join it (protocol version, config
// fingerprint and secret are checked; a refusal names what differs), it assigns each of a
// node's workers a stage (the stage with the fewest workers first) and an id, and it keeps the
// membership: every change gets a new version and goes to the step tracker, which announces it
// to everyone between steps. It watches every node agent and reports the swarm full.
#pragma once

#include <caf/all.hpp>
#include <functional>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <string>

#include "actors/common/context.hpp"
#include "actors/common/worker_id.hpp"
#include "actors/console/inspector.hpp"
#include "messages/types.hpp"
#include "supervisors/roster.hpp"

namespace swarmrt::actors {

struct DirectorySetup {
  std::shared_ptr<SwarmContext> ctx;
  std::string config_toml;       // the effective config every node trains with
  std::string fingerprint_text;  // config::fingerprint_text of it
  std::string secret;            // what joiners must present; empty: none
  std::string endpoint;          // this process's bulk frame link; empty: frames over CAF
  // The coordinator's actors a joining node's workers report to, and where records go.
  caf::actor tracker;
  std::vector<caf::actor> averagers;            // per stage, invalid where the mode has none
  std::vector<caf::actor> groups;               // per stage, invalid where the mode has none
  caf::actor sink;                              // the metrics sink
  std::shared_ptr<supervisors::Roster> roster;  // finds the balancer
  // The console's view: the directory enters each node it admits (with the node's inspector)
  // and marks it gone; it hands a console the coordinator's inspector (inspector_atom).
  std::shared_ptr<NodeBook> nodes = std::make_shared<NodeBook>();
  caf::actor inspector;
  // HOST:PORT of the run's coordinator replicas as etcd lists them now (apps: coordinator
  // --etcd); unset: this coordinator alone. A node is told them at its join and asks again
  // (replicas_atom), so it can find the next leader on its own.
  std::function<std::vector<std::string>()> replicas;
  // How many node processes this run's world brings (launch --from-env knows it); 0: unknown.
  // Once they have all joined short of a full swarm, the directory says what would fill it.
  uint32_t world_nodes = 0;
};

struct directory_state {
  struct Node {
    std::string name;
    uint32_t index = 0;
    std::vector<uint32_t> workers;
  };
  DirectorySetup setup;
  messages::Membership membership;
  std::map<caf::actor_addr, Node> nodes;  // by node agent
  std::vector<uint32_t> assigned;         // workers assigned per stage (joined or joining)
  std::vector<uint32_t> next_replica;     // per stage
  uint32_t next_node = 0;
  uint64_t refused = 0;
  std::set<caf::node_id> joined;             // processes whose join was admitted
  std::vector<caf::response_promise> ready;  // waiting for a full swarm
  bool stopped = false;
  bool full = false;              // the swarm has been full once: the run has started
  bool short_world_said = false;  // the world's nodes all joined short of a full swarm: said
  std::mt19937_64 rng{12345};     // picks the node of a forwarded chaos kill
  // Bans (a spot check found a worker wrong, actors/tracker/verify.cpp): its id never comes
  // back, and neither does its node (by name, and by process) for the rest of the run.
  std::map<uint32_t, std::string> banned_workers;
  std::map<std::string, std::string> banned_nodes;  // node name -> why
  std::set<caf::node_id> banned_processes;
  static inline const char* name = "directory";
};

caf::behavior directory(caf::stateful_actor<directory_state>* self, DirectorySetup setup);

// How many workers a full swarm has: stages x workers_per_stage.
size_t expected_workers(const config::RunConfig& config);

}  // namespace swarmrt::actors
