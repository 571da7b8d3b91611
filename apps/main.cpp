// swarmrt-core: one executable, one subcommand per role (`swarmrt` runs ctl itself and becomes
// this for the rest: front.cpp).
#include <CLI/CLI.hpp>
#include <csignal>

#include "apps/commands.hpp"
#include "apps/options.hpp"
#include "model/heap.hpp"

int main(int argc, char** argv) {
  // A peer that closes a TLS connection while this process writes to it (an etcd member
  // killed mid-request) must cost an error on that connection, not the process: OpenSSL
  // writes with plain write(), whose SIGPIPE would end a standby coordinator without a word.
  std::signal(SIGPIPE, SIG_IGN);
  swarmrt::model::keep_freed_memory();
  CLI::App app{"swarmrt: decentralized training of transformer language models"};
  app.require_subcommand(1);
  int exit_code = 0;
  swarmrt::apps::add_train_command(app, exit_code);
  swarmrt::apps::add_sample_command(app, exit_code);
  swarmrt::apps::add_coordinator_command(app, exit_code);
  swarmrt::apps::add_node_command(app, exit_code);
  swarmrt::apps::add_launch_command(app, exit_code);
  swarmrt::apps::add_ctl_command(app, exit_code);
  swarmrt::apps::add_simulate_command(app, exit_code);
  swarmrt::apps::add_bench_command(app, exit_code);
  swarmrt::apps::add_plot_command(app, exit_code);
  swarmrt::apps::add_data_command(app, exit_code);
  swarmrt::apps::add_tls_command(app, exit_code);
  return swarmrt::apps::run_command_line(app, argc, argv, exit_code);
}
