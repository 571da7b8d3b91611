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
  // Workers: the spec of the worker of `id` on `stage` that a balancer's move puts in this
  // one's place (with its own start and on_restart), as slow as the one it replaces (the same
  // hardware, emulated); empty for children that never move.
  std::function<ChildSpec(uint32_t id, uint32_t stage, double slow_factor)> respec;
};

struct SupervisorSetup {
  std::string name;  // "stage 1 on node 'a'", "DiLoCo groups", ...
  config::SupervisionConfig policy;
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
// A balancer's move, from this process only: (move_atom, old id, stage, new id) -> int64_t:
// the worker of the old id stops (not a fault: it is not restarted), the worker of the new id
// starts in its place and is announced like a restart; -1 when no child has the old id.

}  // namespace swarmrt::supervisors
