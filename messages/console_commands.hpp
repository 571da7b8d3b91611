// Every command of the console (`swarmrt ctl`, its interactive prompt, the status page's
// buttons), declared once: `ctl` takes its help and tab completion from this table, and the
// coordinator's inspector its usage lines and which commands are recorded as changes to the
// swarm. A command the coordinator runs has a handler there (actors/console/); `ctl_only`
// commands are the console's own loops (top, watch, help, quit).
//
// Neither this nor console_commands.cpp needs LibTorch: the `swarmrt` executable runs `ctl`
// without loading it (apps/front.cpp), and registers only these types.
#pragma once

#include <caf/actor_system_config.hpp>
#include <caf/meta/type_name.hpp>
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

// One console command: its words ("kill", "stage1/*"), who sends it (for the event log), and
// whether a destructive command may touch more than one actor.
struct ConsoleRequest {
  std::vector<std::string> args;
  std::string console;  // "ctl user@host pid 123"
  bool yes = false;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, ConsoleRequest& x) {
  return f(caf::meta::type_name("swarmrt::ConsoleRequest"), x.args, x.console, x.yes);
}

// How long a console's `checkpoint` waits for the swarm to save: the open step must close
// first, and a step of a slowed or recovering swarm may take this long.
constexpr double kCheckpointWaitS = 120;

// The message types a console exchanges with a coordinator's inspector (register_types adds
// them with the rest).
void register_console_types(caf::actor_system_config& cfg);

}  // namespace swarmrt::messages
