#include "messages/console_commands.hpp"

namespace swarmrt::messages {

const std::vector<ConsoleCommand>& console_commands() {
  using C = Completes;
  static const std::vector<ConsoleCommand> all = {
      {"nodes", "nodes", "the coordinator and every node: alive, workers, threads, memory, CPU"},
      {"actors", "actors [PATTERN] [--stage K] [--kind KIND]",
       "every actor (glob PATTERN: 'stage1/*'): kind, stage, node, mailbox, messages, restarts",
       C::actors},
      {"info", "info NAME", "one actor: its figures and what it says of itself (step, round, ...)",
       C::actors},
      {"top", "top [SECONDS]",
       "actors by mailbox length, then busy time, every SECONDS (default 1) until a key",
       C::nothing, false, true},
      {"stats", "stats", "the last step: loss, tokens/s, samples/s per stage, bytes by kind"},
      {"watch", "watch [SECONDS]", "stats every SECONDS (default 1) until a key", C::nothing, false,
       true},
      {"trace", "trace NAME [SECONDS]",
       "messages into and out of one actor for SECONDS (default 5, at most 60)", C::actors},
      {"events", "events [SINCE|--follow]",
       "faults, recoveries, rejections, rebalances, console commands"},
      {"kill", "kill PATTERN [--yes]",
       "kill matching actors (their supervisors restart them); more than one asks first", C::actors,
       true},
      {"kill-node", "kill-node NODE", "end a node's process at once, as a crash would", C::nodes,
       true},
      {"kill-coordinator", "kill-coordinator [--yes]",
       "end the leading coordinator's process at once, as a crash would: a standby takes over "
       "(with none, the run stops until `coordinator --resume`, so that asks first)",
       C::nothing, true},
      {"freeze", "freeze NODE SECONDS", "stop a node's process for SECONDS, as SIGSTOP would",
       C::nodes, true},
      {"slow", "slow NAME FACTOR", "a worker computes FACTOR times slower", C::actors, true},
      {"drop", "drop NAME FRACTION", "a worker loses FRACTION of the hops it sends", C::actors,
       true},
      {"misbehave", "misbehave NAME KIND [SCALE]",
       "a worker lies from now on: sign_flip, scale or random (its DiLoCo Δ or gradient, x SCALE, "
       "default 10), stale (it takes no optimizer step), noise (its activations and input "
       "gradients, SCALE x their RMS, default 1), or none",
       C::actors, true},
      {"delay", "delay NODE MS", "every frame a process sends waits MS first", C::nodes, true},
      {"partition", "partition NODE_A NODE_B",
       "frames between two processes are lost, both ways, until `heal all`", C::nodes, true},
      {"heal", "heal [NAME|all]", "undo slow, drop, misbehave (and, for all, delay and partitions)",
       C::actors, true},
      {"checkpoint", "checkpoint", "save the swarm once the open step closes; prints the path",
       C::nothing, true},
      {"config", "config", "the run's effective configuration"},
      {"help", "help [COMMAND]", "this list, or one command's usage", C::nothing, false, true},
      {"quit", "quit", "leave the console (the swarm goes on)", C::nothing, false, true},
  };
  return all;
}

const ConsoleCommand* find_console_command(const std::string& name) {
  for (const auto& c : console_commands())
    if (c.name == name) return &c;
  return nullptr;
}

void register_console_types(caf::actor_system_config& cfg) {
  cfg.add_message_type<ConsoleRequest>("swarmrt::ConsoleRequest");
}

}  // namespace swarmrt::messages
