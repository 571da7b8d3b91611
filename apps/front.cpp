// swarmrt: the executable people run. The console (`swarmrt ctl`) runs in this process, which
// loads no LibTorch; every other command runs in swarmrt-core beside it, which this process
// becomes (execv: the same process id, arguments and environment).
// Why: loading LibTorch costs a process about half a second of CPU before main (its
// operators' registration and its relocations), and a console is started once per command,
// often by a script in a loop, beside a run that needs the cores.
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <system_error>

#include "apps/commands.hpp"
#include "apps/options.hpp"

namespace {

int run_console(int argc, char** argv) {
  // As swarmrt-core: a peer that closes a TLS connection mid-write costs that connection.
  std::signal(SIGPIPE, SIG_IGN);
  CLI::App app{"swarmrt: decentralized training of transformer language models"};
  app.require_subcommand(1);
  int exit_code = 0;
  swarmrt::apps::add_ctl_command(app, exit_code);
  return swarmrt::apps::run_command_line(app, argc, argv, exit_code);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc > 1 && std::strcmp(argv[1], "ctl") == 0) return run_console(argc, argv);
  std::error_code ec;
  auto self = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec) self = argv[0];
  const auto core = self.parent_path() / "swarmrt-core";
  execv(core.c_str(), argv);
  std::cerr << "swarmrt: cannot run " << core.string() << ": " << std::strerror(errno)
            << " (every command but ctl runs in swarmrt-core, which is installed beside swarmrt)"
            << std::endl;
  return 127;
}
