// What the inspector's two files share: the local part of a command (inspector.cpp) and the
// whole-swarm command the coordinator's inspector runs (console.cpp).
#pragma once

#include <fnmatch.h>

#include <nlohmann/json.hpp>
#include <string>

#include "actors/console/inspector.hpp"

namespace swarmrt::actors::console {

using Self = caf::stateful_actor<inspector_state>;

// {"ok": false, "error": why}; `usage`: the command's words were wrong (ctl exits 2).
inline std::string failure(const std::string& why, bool usage = false) {
  return nlohmann::json{{"ok", false}, {"error", why}, {"usage", usage}}.dump();
}

// A glob names an actor when it matches its full name or, without an '@', its bare name
// ("stage1/*" matches "stage1/worker0@node2").
inline bool matches(const std::string& pattern, const std::string& full) {
  if (fnmatch(pattern.c_str(), full.c_str(), 0) == 0) return true;
  const auto at = full.find('@');
  return pattern.find('@') == std::string::npos && at != std::string::npos &&
         fnmatch(pattern.c_str(), full.substr(0, at).c_str(), 0) == 0;
}

// A command of messages/console_commands.hpp, run for the whole swarm (console.cpp).
caf::result<std::string> run_console_command(Self* self, const messages::ConsoleRequest& r);
// Whether the coordinator has a handler for it (every command that is not ctl_only does).
bool runs_console_command(const std::string& name);

}  // namespace swarmrt::actors::console
