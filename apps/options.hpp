// The command-line options several commands share, each declared once: the configuration
// (and loading it), the run directory, the network and the cluster secret, and etcd.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "config/config.hpp"
#include "credential/endpoint.hpp"
#include "leader/etcd.hpp"
#include "leader/takeover.hpp"

namespace CLI {
class App;
}

namespace swarmrt::apps {

// --config (required) and --set.
void add_config_options(CLI::App& cmd, std::string& config, std::vector<std::string>& overrides);

// --out, --resume and --overwrite of a command that writes a run directory.
void add_run_dir_options(CLI::App& cmd, std::string& out, bool& resume, bool& overwrite);

// --heartbeat-ms, --connection-timeout-ms, --secret-file (and --secret, refused).
void add_net_options(CLI::App& cmd, credential::NetOptions& net);

// --etcd and --lease-ttl-s of a coordinator replica, with the etcd TLS options.
void add_leader_options(CLI::App& cmd, leader::LeaderOptions& o);
// --etcd-ca, --etcd-cert, --etcd-key: the PKI shown to https etcd members (replicas, nodes, ctl).
void add_etcd_tls_options(CLI::App& cmd, leader::EtcdTls& tls);

// Parses the command line into `app`, whose subcommands' callbacks run as it does and set
// `exit_code`: that, 2 for a first word that names no command, or CLI11's code for another bad
// command line (its message said). What both executables' mains share (main.cpp, front.cpp).
int run_command_line(CLI::App& app, int argc, char** argv, const int& exit_code);

// The configuration at `path` with `overrides`, or nothing once what is wrong with it is said
// (the caller exits 2, as for a bad command line).
std::optional<config::RunConfig> load_config_or_say(const std::string& path,
                                                    const std::vector<std::string>& overrides);

}  // namespace swarmrt::apps
