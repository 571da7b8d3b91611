// The step tracker: opens step s with M micro-batches, has the loaders produce them and sends
// each to a stage-0 worker chosen by its wiring, counts every micro-batch exactly once as it
// completes, then closes the step: gradients are reduced, clipped by the norm the mode calls
// for and applied (with a DiLoCo round every H steps) before the next step opens. It also
// runs evaluations and writes one metrics record per step.
#pragma once

#include <caf/all.hpp>
#include <chrono>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <set>

#include "actors/context.hpp"
#include "actors/wiring.hpp"
#include "messages/types.hpp"
#include "model/data.hpp"

namespace swarmrt::actors {

struct TrackerSetup {
  ContextPtr ctx;
  std::vector<caf::actor> loaders;
  std::vector<caf::actor> stage_actors;  // DiLoCo groups and gradient averagers
  caf::actor metrics;                    // optional metrics sink
  std::shared_ptr<const model::TextCorpus> corpus;
  bool progress = true;
};

struct tracker_state {
  using Clock = std::chrono::steady_clock;
  struct Micro {
    messages::TensorList batch;
    uint32_t attempt = 0;
    uint32_t worker = 0;
    Clock::time_point sent;
    bool ready = false;  // the loader delivered it
    bool done = false;   // backward reached stage 0
    bool has_loss = false;
    double loss = 0;
  };

  TrackerSetup setup;
  Wiring stage0{"throughput"};
  messages::Membership members;
  std::optional<messages::Membership> pending;  // adopted when the next step starts
  std::map<uint32_t, caf::actor> by_id;
  std::map<uint32_t, uint32_t> stage_of;

  uint64_t step = 0;
  Clock::time_point run_start, step_start;
  std::vector<Micro> micro;
  std::deque<uint32_t> waiting;  // micro-batches waiting for a free stage-0 slot
  int64_t duplicates = 0;
  std::map<uint32_t, double> sqnorms;
  std::map<uint32_t, int64_t> samples;
  std::set<uint32_t> applied;
  double lr = 0;
  enum class Phase { idle, running, reducing, applying, evaluating } phase = Phase::idle;

  std::vector<model::Batch> val;
  std::vector<double> val_losses;
  size_t val_received = 0;

  messages::RunReport report;
  caf::response_promise promise;
  static inline const char* name = "step_tracker";
};

caf::behavior step_tracker(caf::stateful_actor<tracker_state>* self, TrackerSetup setup);

}  // namespace swarmrt::actors
