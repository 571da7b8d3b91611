// The step tracker's supervisor (architecture §7), which is also the tracker's address: everyone
// (workers, the directory, other supervisors, the runtime) holds this actor's handle, and it
// passes every message on to the tracker it runs now, keeping the sender, so a request is
// answered by the tracker. When the tracker dies it starts a new one after the restart
// policy's backoff (or escalates: it quits with the reason, which fails the run), and the
// new tracker continues the run from the tracker store (actors/tracker/step_tracker.hpp). Messages
// that arrive meanwhile wait here.
//
// Some messages shape what the tracker knows and are replayed to a new tracker: the newest
// membership (with the restarts since), the restarted loaders, groups and averagers, and the
// supervisors to watch. The run request is held here: the run's answer comes from whichever
// tracker finishes it.
//
//   (run_atom)     -> RunReport        (held here, asked of each tracker in turn)
//   (stop_atom)                        the run ends with an error (no restart after it)
//   (faults_atom)  -> uint64_t         trackers restarted so far
//   (start_state_atom, StateRequest) -> WorkerState   a worker's starting state, asked of each
//   tracker
//                                      in turn until one answers
//   anything else                      passed on to the tracker
#pragma once

#include <caf/all.hpp>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "messages/types.hpp"
#include "policy/restart_policy.hpp"
#include "supervisors/roster.hpp"

namespace swarmrt::supervisors {

struct TrackerSupervisorSetup {
  config::SupervisionConfig policy;
  std::function<caf::actor()> start;  // spawns a tracker (which reads the store)
  caf::actor metrics;                 // optional metrics sink
  std::shared_ptr<Roster> roster;     // optional: the tracker is "tracker" in it
};

struct tracker_supervisor_state {
  using Clock = std::chrono::steady_clock;
  TrackerSupervisorSetup setup;
  std::unique_ptr<policy::RestartPolicy> policy;
  caf::actor tracker;  // null while a restart is pending
  Clock::time_point died_at;
  uint64_t restarts = 0;
  // Replayed to a new tracker.
  std::optional<messages::Membership> members;
  std::map<std::pair<std::string, uint32_t>, caf::actor> replaced;
  std::vector<caf::actor> watches;
  // Passed on once a tracker runs again.
  std::vector<std::pair<caf::response_promise, caf::message>> queued;
  std::optional<caf::response_promise> run;
  // Workers' requests for a starting state, asked again of a new tracker until answered (a
  // tracker that dies holding one never answers it).
  struct StateAsk {
    caf::response_promise promise;
    messages::StateRequest request;
  };
  std::map<uint64_t, StateAsk> state_asks;
  uint64_t next_ask = 0;
  uint64_t run_epoch = 0;  // the latest run request sent to a tracker
  bool stopped = false;
  static inline const char* name = "tracker_supervisor";
};

caf::behavior tracker_supervisor(caf::stateful_actor<tracker_supervisor_state>* self,
                                 TrackerSupervisorSetup setup);

}  // namespace swarmrt::supervisors
