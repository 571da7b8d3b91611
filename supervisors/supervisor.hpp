// A one-for-one supervisor (architecture §7): it monitors its children (a monitor, not a link: a
// `kill` exit cannot be trapped), restarts a child that dies abnormally after the restart
// policy's backoff, hands the new handle to whoever must re-wire (`on_restart`), and gives up
// when the restart intensity is exceeded: it then quits with an error its own watcher sees
// (escalation). Every fault and recovery is a metrics record.
//
// One supervisor per stage watches that stage's workers on a node; on the coordinator one
// watches the DiLoCo groups and one the data loaders.
#pragma once

#include <caf/all.hpp>
#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "policy/restart_policy.hpp"
#include "supervisors/roster.hpp"

namespace swarmrt::supervisors {

struct ChildSpec {
  std::string name;    // "stage1/worker1", "stage0/diloco", "loader/1" (supervisors/roster.hpp)
  std::string kind;    // "worker", "group", "loader"
  int64_t stage = -1;  // the stage it serves, -1: none
  std::function<caf::actor()> start;                  // spawns a fresh instance
  std::function<void(const caf::actor&)> on_restart;  // announces the new instance
  caf::actor current;                                 // the running instance
};

struct SupervisorSetup {
  std::string name;  // "stage 1 on node 'a'", "DiLoCo groups", ...
  model::SupervisionConfig policy;
  std::vector<ChildSpec> children;  // already started (current set)
  caf::actor metrics;               // optional metrics sink
  std::shared_ptr<Roster> roster;   // optional
};

struct supervisor_state {
  using Clock = std::chrono::steady_clock;
  SupervisorSetup setup;
  std::unique_ptr<policy::RestartPolicy> policy;
  std::vector<Clock::time_point> died_at;  // per child, of the pending restart
  uint64_t restarts = 0;
  static inline const char* name = "supervisor";
};

caf::behavior supervisor(caf::stateful_actor<supervisor_state>* self, SupervisorSetup setup);

// Restarts performed so far: (faults_atom) -> uint64_t.

}  // namespace swarmrt::supervisors
