// launch --from-env: the coordinator or a node, as the scheduler's environment says.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "credential/endpoint.hpp"

namespace swarmrt::launch {

struct FromEnvArgs {
  std::string config;
  std::vector<std::string> overrides;
  std::string out;
  bool resume = false;
  bool overwrite = false;
  std::string http;
  uint16_t port = 0;        // rank 0's port; 0: from the environment
  std::string listen_addr;  // a node's frame-link address; empty: its host name's
  uint32_t workers = 0;     // per node; 0: one per CPU (or GPU) of the task
  double connect_timeout_s = 300;
  double stop_grace_s = 60;
  double signal_checkpoint_s = 60;
  bool dry_run = false;
  credential::NetOptions net;
};

// Execs the coordinator (rank 0) or a node; returns only on refusal (2) or failure (1), or
// with 0 after --dry-run printed the command it would run.
int launch_from_env(const FromEnvArgs& args, const std::string& secret);

}  // namespace swarmrt::launch
