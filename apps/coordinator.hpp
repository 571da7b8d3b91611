// The coordinator's parts, shared by its two files:
//   coordinator_command.cpp  the command line, the signals, standing for leader (thin main)
//   coordinator_run.cpp      the run under this leader, as named steps: where it starts, the
//                            run directory, the swarm's actors, listening, training, stopping
#pragma once

#include <caf/all.hpp>
#include <mutex>
#include <string>
#include <vector>

#include "apps/net.hpp"
#include "config/config.hpp"
#include "leader/takeover.hpp"

namespace swarmrt::apps {

struct CoordinatorArgs {
  std::string config;
  std::vector<std::string> overrides;
  std::string listen = "127.0.0.1:0";
  std::string advertise;  // HOST:PORT nodes and consoles reach this coordinator at; empty: --listen
  std::string out;
  bool overwrite = false;
  bool resume = false;
  bool frames_over_caf = false;
  std::string http;                 // HOST:PORT of the status page, empty: none
  std::string run_id;               // hex; empty: a random one
  double signal_checkpoint_s = 60;  // SIGTERM/SIGUSR1: wait this long for a checkpoint
  uint32_t world_nodes = 0;         // node processes the launcher's world brings; 0: unknown
  NetOptions net;
  leader::LeaderOptions leader;  // --etcd: one of several replicas of the run
};

// The address this coordinator is listed under (etcd's replica list, a join's answer, `ctl
// nodes`), for nodes and consoles to find it by.
inline const std::string& listed_address(const CoordinatorArgs& args) {
  return args.advertise.empty() ? args.listen : args.advertise;
}

// What the signal handler reaches: the actor system and the handles it sends stop to, set
// once they exist and cleared before the system goes.
struct SignalTargets {
  std::mutex mu;
  caf::actor_system* system = nullptr;
  caf::actor directory, tracker;
  bool saved = false;
};

// The command line read and checked: the config, the addresses, the secret and the run id.
struct CoordinatorInputs {
  config::RunConfig config;
  HostPort listen, http;
  std::string secret;   // empty: the coordinator makes one
  uint64_t run_id = 0;  // 0: a random one
  std::string out;      // the run directory
  uint32_t world_nodes = 0;
};

// The run itself, under this process's leadership when there are replicas; its exit code.
int lead_run(const CoordinatorArgs& args, CoordinatorInputs& in, leader::Leading& leading,
             SignalTargets& targets, const StopSignals& signals);

}  // namespace swarmrt::apps
