// What the coordinator's console commands share (actors/console/commands_*.cpp): asking every
// process for its part of a command and merging the answers, naming processes, and recording
// a command that changes the swarm as a `console` event.
#pragma once

#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "actors/console/internal.hpp"

namespace swarmrt::actors::console {

using Promise = caf::typed_response_promise<std::string>;

// One process's answer to its part: the process ("coordinator", "node2") and its JSON, or
// why it gave none.
struct Part {
  std::string process;
  nlohmann::json answer;  // null when it did not answer
  std::string error;
};

// "node2": how answers and commands name a node's process.
std::string label(const NodeBook::Node& n);

// Sends `part` to the coordinator's own inspector and to every live node's (or to `only`, a
// process label, when set); calls `done` once each has answered or timed out.
void fan_out(Self* self, const messages::ConsoleRequest& part, double timeout_s,
             std::function<void(std::vector<Part>&)> done, const std::string& only = "");

// The processes' "actors" parts as one list.
nlohmann::json all_actors(const std::vector<Part>& parts);
// Processes that did not answer, for the `unreachable` field of an answer.
nlohmann::json unreachable(const std::vector<Part>& parts);

// The console's process (CAF node id), for the event log.
std::string console_node(Self* self);
// Logs and records a command that changes the swarm; the next `actors` is gathered anew.
void record(Self* self, const messages::ConsoleRequest& r, const std::string& from);

// Calls `done` with the swarm's actor rows and unreachable processes, from the shared
// list when it is fresh enough, else once the gathering under way (or a new one) answers.
void shared_actors(Self* self, const std::string& console, double timeout_s,
                   std::function<void(const nlohmann::json&, const nlohmann::json&)> done);

// A `done` for fan_out to one process: its answer, or why it gave none.
std::function<void(std::vector<Part>&)> deliver_one(Promise promise);

// Runs `part` where `actor_name` lives (found through every process's actor list) and answers
// with that process's answer.
void on_actor_process(Self* self, const std::string& actor_name, messages::ConsoleRequest part,
                      Promise promise, double timeout_s);

std::optional<NodeBook::Node> find_node(Self* self, const std::string& name);

// A process a command names: "coordinator" or a node (label, name or index), with its CAF
// node id as a string (what transport::partition_from takes); the error when there is none.
struct Process {
  std::string label, node_id, error;
};
Process find_process(Self* self, const std::string& name);

// The coordinator replicas, [{role, epoch, pid, host, address}], as the setup lists them
// (apps: the replicas in etcd, or this coordinator alone with role "only"); empty when unset.
nlohmann::json coordinator_rows(Self* self);

}  // namespace swarmrt::actors::console
