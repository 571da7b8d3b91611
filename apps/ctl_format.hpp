// How `swarmrt ctl` shows the coordinator's JSON answers as text, and its help.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace swarmrt::apps::ctl {

// `help` or `help COMMAND` (messages/console_commands.hpp); empty when COMMAND is unknown.
std::string help_text(const std::string& command);

// The answer to `args` as text (the caller has checked "ok").
std::string render(const std::vector<std::string>& args, const nlohmann::json& answer);
// `top`: the actors with the longest mailboxes, then the busiest, at most `rows` of them.
std::string render_top(const nlohmann::json& actors, size_t rows);

}  // namespace swarmrt::apps::ctl
