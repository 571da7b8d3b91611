// A node's agent: announces the node's stage workers to the coordinator's directory, watches
// the coordinator and its own workers, and stops the node's workers when told (by the
// coordinator or a signal) or when the coordinator is gone. Only the coordinator or the node
// itself may stop it. When the coordinator became unreachable (a partition, its process died)
// rather than stopping, the agent says so in `lost`: the node then tries to attach again.
#pragma once

#include <atomic>
#include <caf/all.hpp>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "actors/membership/state_keeper.hpp"
#include "messages/types.hpp"
#include "supervisors/roster.hpp"

namespace swarmrt::actors {

struct NodeAgentSetup {
  caf::actor directory;
  std::string name;
  uint32_t index = 0;
  std::vector<messages::Member> workers;  // as first started
  std::vector<caf::actor> supervisors;    // one per stage served; they restart the workers
  caf::actor chaos;                       // this node's chaos control actor
  // A balancer's move: how long the stages' supervisors may take to answer
  // (supervision.reply_timeout_s; each asks its worker for at most query_timeout_s).
  double move_timeout_s = 30;
  // Told the coordinator replicas' addresses (HOST:PORT) every `replicas_every_s` while the
  // node serves: a replica started after the join is where the node may find the next
  // leader. Unset: not asked.
  std::function<void(const std::vector<std::string>&)> on_replicas;
  double replicas_every_s = 2;
  // keeps_states(ctx) (state_keeper.hpp): when the coordinator's link is lost, each worker's state
  // (the roster's workers, asked for at most `keep_timeout_s`) is kept here before the workers
  // stop, so that a coordinator taking over continues from it. Unset: nothing kept.
  KeptStatesPtr kept;
  bool keep_each_worker =
      false;  // DiLoCo: every worker's state (its replica's own), not one per stage
  std::shared_ptr<supervisors::Roster> roster;
  double keep_timeout_s = 10;
  // Set when the agent stopped because the coordinator's link became unreachable.
  std::shared_ptr<std::atomic<bool>> lost = std::make_shared<std::atomic<bool>>(false);
};

struct node_agent_state {
  NodeAgentSetup setup;
  bool failed = false;  // a supervisor gave up
  static inline const char* name = "node_agent";
};

caf::behavior node_agent(caf::stateful_actor<node_agent_state>* self, NodeAgentSetup setup);

}  // namespace swarmrt::actors
