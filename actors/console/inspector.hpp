// The inspector: one per process (architecture §9). It answers the console (`swarmrt ctl`) from
// what the process knows without asking its busy actors — the roster's names and each actor's
// probe (messages handled and waiting, busy time, restarts, uptime) — and asks an actor itself
// only for what only it knows (`info`: a worker's step and checksum, a group's round).
//
// The coordinator's inspector is the console's one entry: it runs every command across the
// swarm, sending each node's inspector the node's part (inspect_atom), merges the answers and
// records every command that changes something as a `console` event in metrics.jsonl. A node's
// inspector takes such commands only from its own process or from the coordinator's process.
//
//   (console_atom, ConsoleRequest)  -> std::string   coordinator: a whole command, JSON
//   (inspect_atom, ConsoleRequest)  -> std::string   this process's part of one, JSON
#pragma once

#include <caf/all.hpp>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "messages/types.hpp"
#include "supervisors/roster.hpp"

namespace swarmrt::actors {

// The nodes of a swarm as the directory admits and loses them; the coordinator's inspector
// reads it. Shared by two actors of one process, so it has its own lock.
class NodeBook {
 public:
  struct Node {
    std::string name;  // what the node calls itself (--name, else host:pid)
    uint32_t index = 0;
    caf::actor inspector;
    std::vector<uint32_t> workers;
    bool alive = true;
  };
  void put(const Node& node);
  void lost(uint32_t index);
  std::vector<Node> nodes() const;

 private:
  mutable std::mutex mu_;
  std::map<uint32_t, Node> nodes_;
};

struct InspectorSetup {
  bool coordinator = true;  // else a node's inspector
  // This process's actors; on a node its label ("node2", roster->node()) is set once the
  // node has joined. The chaos control actor is found there as "chaos".
  std::shared_ptr<supervisors::Roster> roster;
  // The coordinator only:
  std::shared_ptr<NodeBook> nodes;
  caf::actor metrics;       // the metrics sink: stats, events, console records
  std::string config_toml;  // the run's effective config
  // The run's coordinator replicas, [{role, epoch, pid, host, address}], as etcd last listed
  // them (leader/replicas.hpp); must not block. Unset: this coordinator has none.
  std::function<nlohmann::json()> coordinators;
  // A node only: the coordinator's process, whose inspector may send it commands.
  caf::node_id coordinator_node;
  double query_timeout_s = 10;  // a node's answer to one command part (supervision key)
  double answer_lead_ms = 300;  // answer first, then kill or freeze (supervision key)
};

struct inspector_state {
  InspectorSetup setup;
  struct Trace {
    caf::response_promise promise;
    std::string name;
    caf::actor target;
  };
  std::map<uint64_t, Trace> traces;  // running traces by id
  uint64_t next_trace = 0;
  // The coordinator's swarm-wide actor list, shared: a console asking within kActorsMaxAge of
  // the last gathering, or while one is under way, gets its rows instead of every process
  // being asked again (20 consoles polling `top` each second asked every process 20 times a
  // second). A command that changes the swarm drops it.
  static constexpr std::chrono::milliseconds kActorsMaxAge{500};
  nlohmann::json actors_rows, actors_unreachable;  // arrays
  std::chrono::steady_clock::time_point actors_at{};
  bool actors_fresh = false, actors_gathering = false;
  uint64_t actors_changes = 0;  // commands that changed the swarm so far
  std::vector<std::function<void(const nlohmann::json&, const nlohmann::json&)>> actors_waiting;
  static inline const char* name = "inspector";
};

caf::behavior inspector(caf::stateful_actor<inspector_state>* self, InspectorSetup setup);

// Registers `inspector` as "inspector" in its system's registry (tests and tools find it so).
void register_inspector(const caf::actor& inspector);

}  // namespace swarmrt::actors
