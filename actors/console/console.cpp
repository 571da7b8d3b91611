// The whole-swarm commands of `swarmrt ctl`, run by the coordinator's inspector: each asks every
// process for its part (inspect_atom; the coordinator's own part too, through the same message),
// merges the answers, and records every command that changes the swarm as a `console` event.
// Every answer is JSON: {"ok": true, ...} or {"ok": false, "error": ..., "usage": ...}.
//
// A command is a row of messages/console_commands.hpp (its usage, whether it changes the swarm)
// and a handler here; the handlers live in commands_*.cpp, by what they do.
#include <map>

#include "actors/console/commands.hpp"

namespace swarmrt::actors::console {

namespace {

using Handler = Result (*)(const Call&);

const std::map<std::string, Handler>& handlers() {
  static const std::map<std::string, Handler> all = {
      {"nodes", nodes_command},           {"actors", actors_command},
      {"info", info_or_trace_command},    {"trace", info_or_trace_command},
      {"stats", stats_command},           {"events", events_command},
      {"config", config_command},         {"kill", kill_command},
      {"slow", slow_or_drop_command},     {"drop", slow_or_drop_command},
      {"misbehave", misbehave_command},   {"heal", heal_command},
      {"partition", partition_command},   {"kill-node", process_command},
      {"freeze", process_command},        {"delay", process_command},
      {"checkpoint", checkpoint_command}, {"kill-coordinator", kill_coordinator_command},
  };
  return all;
}

}  // namespace

bool runs_console_command(const std::string& name) {
  return handlers().count(name) > 0;
}

caf::result<std::string> run_console_command(Self* self, const messages::ConsoleRequest& r) {
  if (r.args.empty()) return failure("no command", true);
  const auto* command = messages::find_console_command(r.args[0]);
  const auto handler = handlers().find(r.args[0]);
  if (!command || command->ctl_only || handler == handlers().end())
    return failure("unknown command '" + r.args[0] + "' (try `help`)", true);
  Call call;
  call.self = self;
  call.request = r;
  call.args = r.args;
  call.command = command;
  call.timeout_s = self->state.setup.query_timeout_s;
  call.from = console_node(self);
  return handler->second(call);
}

}  // namespace swarmrt::actors::console
