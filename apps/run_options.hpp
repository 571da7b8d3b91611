// What the commands that run a configuration share: its options, and loading it.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "model/config.hpp"

namespace CLI {
class App;
}

namespace swarmrt::apps {

// --config (required) and --set.
void add_config_options(CLI::App& cmd, std::string& config, std::vector<std::string>& overrides);

// --out, --resume and --overwrite of a command that writes a run directory.
void add_run_dir_options(CLI::App& cmd, std::string& out, bool& resume, bool& overwrite);

// The configuration at `path` with `overrides`, or nothing once what is wrong with it is said
// (the caller exits 2, as for a bad command line).
std::optional<model::RunConfig> load_config_or_say(const std::string& path,
                                                   const std::vector<std::string>& overrides);

}  // namespace swarmrt::apps
