// Subcommands of the swarmrt executable; each file registers one.
#pragma once

namespace CLI {
class App;
}

namespace swarmrt::apps {

// Each adds its subcommand to `app`; the subcommand's callback sets `exit_code`.
void add_train_command(CLI::App& app, int& exit_code);
void add_sample_command(CLI::App& app, int& exit_code);
void add_coordinator_command(CLI::App& app, int& exit_code);
void add_node_command(CLI::App& app, int& exit_code);
void add_launch_command(CLI::App& app, int& exit_code);
void add_ctl_command(CLI::App& app, int& exit_code);
void add_simulate_command(CLI::App& app, int& exit_code);
void add_bench_command(CLI::App& app, int& exit_code);
// `bench state` under `bench` (bench_state_command.cpp).
void add_bench_state_command(CLI::App& bench, int& exit_code);
void add_plot_command(CLI::App& app, int& exit_code);
void add_data_command(CLI::App& app, int& exit_code);
void add_tls_command(CLI::App& app, int& exit_code);

}  // namespace swarmrt::apps
