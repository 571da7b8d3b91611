// The processes swarmrt launch starts (launch.hpp): the coordinator's first lines, the nodes
// on this machine or over ssh, their output echoed, and how they are stopped.
#include <poll.h>
#include <signal.h>
#include <spdlog/spdlog.h>
#include <chrono>
#include <map>

#include "credential/credential.hpp"
#include "launch/launch.hpp"

namespace swarmrt::launch {
namespace {
using Clock = std::chrono::steady_clock;
}  // namespace

void print_lines(Child& c) {
  for (const auto& line : c.read_lines()) std::printf("[%s] %s\n", c.label().c_str(), line.c_str());
  std::fflush(stdout);
}

std::string shell_quote(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

std::vector<std::string> net_flags(const credential::NetOptions& net) {
  return {"--heartbeat-ms", std::to_string(net.heartbeat_ms), "--connection-timeout-ms",
          std::to_string(net.connection_timeout_ms)};
}

// Waits for every child to exit, signalling the stragglers: SIGTERM after `grace`, SIGKILL
// five seconds later.
void stop_all(std::vector<std::unique_ptr<Child>>& children, double grace_s) {
  const auto term_at =
      Clock::now() + std::chrono::milliseconds(static_cast<int64_t>(grace_s * 1e3));
  const auto kill_at = term_at + std::chrono::seconds(5);
  bool termed = false, killed = false;
  auto signal_running = [&](int sig, const char* name) {
    for (auto& c : children)
      if (c->running()) {
        std::printf("[launch] %s (pid %d) still running: %s\n", c->label().c_str(), c->pid(), name);
        c->signal(sig);
      }
  };
  for (;;) {
    bool any = false;
    for (auto& c : children) {
      print_lines(*c);
      if (c->running()) any = true;
    }
    if (!any) break;
    if (!termed && Clock::now() > term_at) {
      signal_running(SIGTERM, "SIGTERM");
      termed = true;
    }
    if (!killed && Clock::now() > kill_at) {
      signal_running(SIGKILL, "SIGKILL");
      killed = true;
    }
    poll(nullptr, 0, 50);
  }
  for (auto& c : children) print_lines(*c);
}

// Echoes the coordinator's lines until it listens (it may name a secret file it made: the
// nodes get that secret). Empty `join` when it stopped, a signal came or 120 s passed.
CoordinatorReady wait_for_coordinator(Child& coord, std::string& secret,
                                      const std::atomic<bool>& stop_requested) {
  CoordinatorReady ready;
  const std::string marker = "coordinator listening on ";
  const std::string secret_marker = "cluster secret file ";
  const std::string run_marker = "run id ";
  const auto deadline = Clock::now() + std::chrono::seconds(120);
  while (ready.join.empty()) {
    for (const auto& line : coord.read_lines()) {
      std::printf("[coord] %s\n", line.c_str());
      if (line.rfind(marker, 0) == 0) ready.join = line.substr(marker.size());
      if (line.rfind(run_marker, 0) == 0) ready.run_id = line.substr(run_marker.size());
      if (line.rfind(secret_marker, 0) == 0 && secret.empty()) {
        try {
          secret = credential::read_secret_file(line.substr(secret_marker.size()));
          setenv("SWARMRT_SECRET", secret.c_str(), 1);
        } catch (const std::exception& e) {
          spdlog::error("{}", e.what());
        }
      }
    }
    std::fflush(stdout);
    if (!ready.join.empty()) break;
    if (!coord.running() || stop_requested || Clock::now() > deadline) return ready;
    pollfd p{coord.fd(), POLLIN, 0};
    poll(&p, coord.fd() >= 0 ? 1 : 0, 100);
  }
  return ready;
}

// The nodes: --local N on this machine (the swarm's workers spread over them), or one per
// hostfile line over ssh (the secret on stdin, never on a command line).
void start_nodes(const LaunchArgs& args, const config::RunConfig& config,
                 const std::vector<HostEntry>& hosts, const std::string& exe,
                 const CoordinatorReady& ready, const std::string& secret,
                 std::vector<std::unique_ptr<Child>>& children) {
  const auto& join = ready.join;
  const auto& run_id = ready.run_id;
  const uint32_t total =
      static_cast<uint32_t>(config.swarm.stages * config.swarm.workers_per_stage);
  if (args.local > 0) {
    const uint32_t n = static_cast<uint32_t>(args.local);
    for (uint32_t k = 0; k < n; ++k) {
      // Spread the swarm's workers over the nodes; earlier nodes take the remainder.
      const uint32_t w = args.workers > 0 ? args.workers : total / n + (k < total % n ? 1 : 0);
      if (w == 0) continue;
      const std::string name = "node" + std::to_string(k + 1);
      std::vector<std::string> argv = {
          exe, "node", "--join", join, "--workers", std::to_string(w), "--name", name};
      if (!run_id.empty()) argv.insert(argv.end(), {"--run-id", run_id});
      for (const auto& f : net_flags(args.net)) argv.push_back(f);
      children.push_back(std::make_unique<Child>(name, argv));
    }
    return;
  }
  std::map<std::string, int> seen;
  for (const auto& h : hosts) {
    // A host listed twice runs two nodes; their prefixes tell them apart.
    const int nth = ++seen[h.host];
    const std::string label = nth == 1 ? h.host : h.host + "#" + std::to_string(nth);
    std::vector<std::string> argv = {"ssh", "-o", "BatchMode=yes"};
    for (const auto& o : args.ssh_options) argv.insert(argv.end(), {"-o", o});
    argv.insert(argv.end(), {"-p", std::to_string(h.port)});
    if (!h.identity.empty()) argv.insert(argv.end(), {"-i", h.identity});
    // "--" ends ssh's options: the destination is never read as one.
    argv.push_back("--");
    argv.push_back(h.user.empty() ? h.host : h.user + "@" + h.host);
    // The secret comes on stdin, so it shows in no process list on either machine.
    std::string remote = "read -r SWARMRT_SECRET; export SWARMRT_SECRET; exec " +
                         shell_quote(h.bin.empty() ? exe : h.bin) + " node --join " +
                         shell_quote(join) + " --workers " + std::to_string(h.workers) +
                         " --name " + shell_quote(label) + " --listen " + shell_quote(h.listen);
    if (!run_id.empty()) remote += " --run-id " + shell_quote(run_id);
    for (const auto& f : net_flags(args.net)) remote += " " + f;
    argv.push_back(remote);
    children.push_back(std::make_unique<Child>(label, argv, secret + "\n"));
  }
}

// Echoes every child's lines while a coordinator runs (the first `coords` children; with
// replicas the run goes on while any of them does); a signal, or no node left for --grace-s,
// stops the coordinators with SIGTERM.
void watch_children(const LaunchArgs& args, std::vector<std::unique_ptr<Child>>& children,
                    size_t coords, const std::atomic<bool>& stop_requested) {
  bool signalled = false;
  bool alone = false;
  Clock::time_point alone_since;
  auto any_coordinator = [&] {
    for (size_t i = 0; i < coords; ++i)
      if (children[i]->running()) return true;
    return false;
  };
  auto stop_coordinators = [&] {
    for (size_t i = 0; i < coords; ++i)
      if (children[i]->running()) children[i]->signal(SIGTERM);
    signalled = true;
  };
  while (any_coordinator()) {
    std::vector<pollfd> fds;
    for (auto& c : children)
      if (c->fd() >= 0) fds.push_back({c->fd(), POLLIN, 0});
    poll(fds.data(), fds.size(), 100);
    for (auto& c : children) print_lines(*c);
    if (stop_requested && !signalled) {
      std::printf("[launch] stopping: SIGTERM to the coordinator%s\n", coords > 1 ? "s" : "");
      stop_coordinators();
    }
    // Nodes stop when the run ends, just before the coordinator does; a coordinator left
    // without nodes for the grace period is stopped.
    bool node_left = false;
    for (size_t i = coords; i < children.size(); ++i) node_left |= children[i]->running();
    if (node_left) {
      alone = false;
    } else if (!alone) {
      alone = true;
      alone_since = Clock::now();
    } else if (!signalled &&
               Clock::now() - alone_since >
                   std::chrono::milliseconds(static_cast<int64_t>(args.grace_s * 1e3))) {
      std::printf("[launch] no node is left: stopping the coordinator%s\n", coords > 1 ? "s" : "");
      stop_coordinators();
    }
  }
}

}  // namespace swarmrt::launch
