#include "apps/options.hpp"

#include <spdlog/spdlog.h>
#include <CLI/CLI.hpp>
#include <iostream>

namespace swarmrt::apps {

int run_command_line(CLI::App& app, int argc, char** argv, const int& exit_code) {
  // A first word that names no command: CLI11 would only say that a subcommand is required.
  if (argc > 1 && argv[1][0] != '-') {
    std::string names;
    bool known = false;
    for (const auto* sub : app.get_subcommands([](const CLI::App*) { return true; })) {
      known |= sub->check_name(argv[1]);
      names += (names.empty() ? "" : ", ") + sub->get_name();
    }
    if (!known) {
      std::cerr << "error: unknown command '" << argv[1] << "' (the commands: " << names << ")"
                << std::endl;
      return 2;
    }
  }
  spdlog::set_pattern("[%H:%M:%S.%e] [%^%l%$] %v");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  return exit_code;
}

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

void add_net_options(CLI::App& cmd, credential::NetOptions& net) {
  cmd.add_option("--heartbeat-ms", net.heartbeat_ms,
                 "middleman heartbeat interval in ms (a frozen peer is noticed by its absence)")
      ->check(CLI::Range(int64_t{10}, int64_t{60000}));
  cmd.add_option("--connection-timeout-ms", net.connection_timeout_ms,
                 "drop a peer silent for this long, in ms")
      ->check(CLI::Range(int64_t{50}, int64_t{600000}));
  cmd.add_option("--secret-file", net.secret_file,
                 "file holding the cluster secret, first line (default: $SWARMRT_SECRET)");
  cmd.add_option("--secret", net.secret_on_command_line,
                 "refused: a secret on a command line shows in every process list; use "
                 "--secret-file or SWARMRT_SECRET");
}

void add_leader_options(CLI::App& cmd, leader::LeaderOptions& o) {
  cmd.add_option("--etcd", o.etcd,
                 "etcd client URLs (http[s]://HOST:PORT, comma-separated): run as one of several "
                 "coordinator replicas of --run-id, leading while holding the run's lease and "
                 "standing by otherwise");
  cmd.add_option("--lease-ttl-s", o.lease_ttl_s,
                 "the leader's lease in etcd: a standby takes over this long after the leader "
                 "stops renewing it")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{1}, int64_t{600}));
  add_etcd_tls_options(cmd, o.tls);
}

void add_etcd_tls_options(CLI::App& cmd, leader::EtcdTls& tls) {
  cmd.add_option("--etcd-ca", tls.ca,
                 "PEM file of the CA that signed the etcd members' certificates (default for "
                 "https members: the cluster CA from the secret, as `swarmrt tls` writes it)");
  cmd.add_option("--etcd-cert", tls.cert, "PEM client certificate for https etcd members");
  cmd.add_option("--etcd-key", tls.key, "PEM key of --etcd-cert");
}

std::optional<config::RunConfig> load_config_or_say(const std::string& path,
                                                    const std::vector<std::string>& overrides) {
  try {
    return config::load_config(path, overrides);
  } catch (const config::ConfigError& e) {
    spdlog::error("{}", e.what());
    return std::nullopt;
  }
}

}  // namespace swarmrt::apps
