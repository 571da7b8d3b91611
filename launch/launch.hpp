// Launching a swarm (`swarmrt launch`, whose command line and named steps are
// apps/launch_command.cpp): the processes it starts (children.cpp: the coordinator's first
// lines, the nodes here or over ssh, echoing them, stopping them). Beside it in launch/:
//   process      a child process on a pipe, read line by line, signalled and reaped by pid
//   hostfile     the hosts of `--hostfile` (ssh)
//   replicas     `--coordinators K`: the private etcd the replicas elect their leader in
//   from_env     `--from-env`: the coordinator or a node, as a scheduler's environment says
//   cluster_env  that environment read (Slurm, torchrun-style launchers, Kubernetes)
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "config/config.hpp"
#include "credential/endpoint.hpp"
#include "launch/from_env.hpp"
#include "launch/hostfile.hpp"
#include "launch/process.hpp"

namespace swarmrt::launch {

struct LaunchArgs {
  int local = 0;
  std::string hostfile;
  std::string config;
  std::vector<std::string> overrides;
  std::string out;
  bool overwrite = false;
  bool resume = false;
  uint32_t workers = 0;  // per node; 0: the swarm's workers spread evenly (from env: per CPU)
  std::string listen = "127.0.0.1:0";
  std::string http;  // the coordinator's status page, empty: none
  std::vector<std::string> ssh_options;
  double grace_s = 10;
  bool from_env = false;
  FromEnvArgs env;  // --from-env's own settings
  credential::NetOptions net;
  int coordinators = 1;     // replicas of the coordinator (> 1: with a private etcd)
  int64_t lease_ttl_s = 5;  // their leader's lease
};

// The launch: exit code 0 when the run completed; 2 for bad input (logged), 1 when a process
// failed to start or the run did not complete.
int run(const LaunchArgs& args);

// A child's lines so far, each behind its label.
void print_lines(Child& c);
// A word for a remote shell, quoted.
std::string shell_quote(const std::string& s);
// The network options every child is given again.
std::vector<std::string> net_flags(const credential::NetOptions& net);
// Waits for every child to exit, signalling the stragglers: SIGTERM after `grace_s`, SIGKILL
// after as long again.
void stop_all(std::vector<std::unique_ptr<Child>>& children, double grace_s);

// What the coordinator printed once it listened: the address nodes join and the run's id.
struct CoordinatorReady {
  std::string join;
  std::string run_id;
};
// Echoes the coordinator's lines until it listens (it may name a secret file it made: the
// secret is read from there); an empty join when it ended or a stop was asked first.
CoordinatorReady wait_for_coordinator(Child& coord, std::string& secret,
                                      const std::atomic<bool>& stop_requested);
// The nodes: --local N on this machine (the swarm's workers spread over them), or one per
// hostfile entry over ssh (the secret on its stdin).
void start_nodes(const LaunchArgs& args, const config::RunConfig& config,
                 const std::vector<HostEntry>& hosts, const std::string& exe,
                 const CoordinatorReady& ready, const std::string& secret,
                 std::vector<std::unique_ptr<Child>>& children);
// Echoes every child's lines while a coordinator runs (the first `coords` children); a
// signal, or no node left for --grace-s, stops the coordinators with SIGTERM.
void watch_children(const LaunchArgs& args, std::vector<std::unique_ptr<Child>>& children,
                    size_t coords, const std::atomic<bool>& stop_requested);

}  // namespace swarmrt::launch
