// The coordinator's console commands, one handler each, in three files by what they do:
// commands_read.cpp (look: nodes, actors, info, trace, stats, events, config),
// commands_chaos.cpp (break: kill, slow, drop, heal, partition, kill-node, freeze, delay) and
// commands_checkpoint.cpp (save). console.cpp finds a command's row (name, usage, whether it
// changes the swarm: messages/console_commands.hpp) and its handler.
#pragma once

#include <string>
#include <vector>

#include "actors/console/gather.hpp"
#include "messages/console_commands.hpp"

namespace swarmrt::actors::console {

// One command as a handler sees it. Copied into the callbacks that answer later, so it holds
// values, not references.
struct Call {
  Self* self = nullptr;
  messages::ConsoleRequest request;
  std::vector<std::string> args;  // request.args: the command's name, then its words
  const messages::ConsoleCommand* command = nullptr;
  double timeout_s = 10;  // a process's answer to one part (supervision.query_timeout_s)
  std::string from;       // the console's process

  // {"ok": false, "usage": true, "error": "usage: <the table's usage>"}
  std::string usage() const { return failure("usage: " + command->usage, true); }
  // Once the words are valid: the command changes the swarm, and that is recorded.
  void record() const { console::record(self, request, from); }
  Promise promise() const { return self->make_response_promise<std::string>(); }
};

using Result = caf::result<std::string>;
// What the handler files speak in.
using json = nlohmann::json;
using messages::ConsoleRequest;

Result nodes_command(const Call& c);
Result actors_command(const Call& c);
Result info_or_trace_command(const Call& c);
Result stats_command(const Call& c);
Result events_command(const Call& c);
Result config_command(const Call& c);

Result kill_command(const Call& c);
Result slow_or_drop_command(const Call& c);
Result misbehave_command(const Call& c);
Result heal_command(const Call& c);
Result partition_command(const Call& c);
Result process_command(const Call& c);  // kill-node, freeze, delay: one node's process
Result kill_coordinator_command(const Call& c);

Result checkpoint_command(const Call& c);

}  // namespace swarmrt::actors::console
