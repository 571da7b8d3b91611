// swarmrt: one executable, one subcommand per role.
#include <spdlog/spdlog.h>

#include <CLI/CLI.hpp>
#include <csignal>
#include <cstdlib>
#ifdef __GLIBC__
#include <malloc.h>
#endif

#include "apps/commands.hpp"

namespace {
// glibc hands a thread's freed memory back to the kernel as soon as 128 KiB of it lies free at
// the top of the heap (and maps anything above the threshold afresh), so a worker that
// receives hop tensors in one process and frees them in another pattern than it allocates
// pays a page fault per page of every hop: a 2-process pipeline spent 8% of its time in the
// kernel that way, and kept 0.84x of one process's tokens/s instead of 0.92x
// (docs/results.md). A training process reuses the same sizes every step, so it keeps what it
// freed, up to 64 MiB a heap. The MALLOC_*_ environment variables still decide when set.
void keep_freed_memory() {
#ifdef __GLIBC__
  if (!std::getenv("MALLOC_MMAP_THRESHOLD_")) mallopt(M_MMAP_THRESHOLD, 32 << 20);
  if (!std::getenv("MALLOC_TRIM_THRESHOLD_")) mallopt(M_TRIM_THRESHOLD, 64 << 20);
#endif
}
}  // namespace

int main(int argc, char** argv) {
  // A peer that closes a TLS connection while this process writes to it (an etcd member
  // killed mid-request) must cost an error on that connection, not the process: OpenSSL
  // writes with plain write(), whose SIGPIPE would end a standby coordinator without a word.
  std::signal(SIGPIPE, SIG_IGN);
  keep_freed_memory();
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
  spdlog::set_pattern("[%H:%M:%S.%e] [%^%l%$] %v");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  return exit_code;
}
