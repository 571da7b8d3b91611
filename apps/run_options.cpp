#include "apps/run_options.hpp"

#include <spdlog/spdlog.h>
#include <CLI/CLI.hpp>

namespace swarmrt::apps {

void add_config_options(CLI::App& cmd, std::string& config, std::vector<std::string>& overrides) {
  cmd.add_option("--config,-c", config, "run configuration (TOML)")->required();
  cmd.add_option("--set", overrides, "override a key: section.key=value (repeatable)");
}

void add_run_dir_options(CLI::App& cmd, std::string& out, bool& resume, bool& overwrite) {
  cmd.add_option("--out,-o", out, "run directory (default runs/<config name>)");
  auto* resume_flag = cmd.add_flag(
      "--resume", resume, "continue the run directory's run from its newest valid checkpoint");
  cmd.add_flag("--overwrite", overwrite, "clear an existing run directory first")
      ->excludes(resume_flag);
}

std::optional<model::RunConfig> load_config_or_say(const std::string& path,
                                                   const std::vector<std::string>& overrides) {
  try {
    return model::load_config(path, overrides);
  } catch (const model::ConfigError& e) {
    spdlog::error("{}", e.what());
    return std::nullopt;
  }
}

}  // namespace swarmrt::apps
