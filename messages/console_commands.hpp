// Every command of the console (`swarmrt ctl`, its interactive prompt, the status page's
// buttons), declared once: `ctl` takes its help and tab completion from this table, and the
// coordinator's inspector its usage lines and which commands are recorded as changes to the
// swarm. A command the coordinator runs has a handler there (actors/console/); `ctl_only`
// commands are the console's own loops (top, watch, help, quit).
#pragma once

#include <string>
#include <vector>

namespace swarmrt::messages {

// What the words after the command name: tab completion offers these.
enum class Completes { nothing, actors, nodes };

struct ConsoleCommand {
  std::string name;
  std::string usage;  // "kill PATTERN [--yes]"
  std::string help;   // one line for `help`
  Completes completes = Completes::nothing;
  // It changes the swarm (kills, slows, cuts, saves): recorded as a `console` event with the
  // console's process, and marked in `help`.
  bool destructive = false;
  bool ctl_only = false;  // run by the console itself, never sent to the coordinator
};

// In the order `help` lists them.
const std::vector<ConsoleCommand>& console_commands();
// The command of that name, or nullptr.
const ConsoleCommand* find_console_command(const std::string& name);

}  // namespace swarmrt::messages
