// Gradient all-reduce inside one stage (pp, dp and swarm modes): each worker sends its
// accumulated gradient, already scaled by its share of the step's samples; the sum is the
// stage's gradient over the whole step, and every worker gets it back. A worker lost during the
// step leaves the sum rescaled to the mean over the samples that were backpropagated. A
// restarted averager holds nothing: the workers waiting for a sum send their gradient again.
// Under swarm.grad_aggregate other than mean, a worker that sends anything must not move the
// stage's gradient as far as it likes: each worker's gradient is kept apart, brought to its mean
// over the samples it backpropagated, and the stage's gradient is their robust aggregate
// (model/robust_mean.hpp), taken in worker order so that it does not depend on arrival.
// In a sparse warm-up step (diloco.warmup_compress) the averager sums nothing: it checks each
// worker's sparse wires and relays all of them to every worker (model/sparse_grads.hpp).
#pragma once

#include <caf/all.hpp>
#include <map>
#include <set>

#include "actors/common/context.hpp"
#include "messages/types.hpp"
#include "transport/parcel.hpp"

namespace swarmrt::actors {

struct averager_state {
  ContextPtr ctx;
  uint32_t stage = 0;
  std::set<uint32_t> members;  // workers of this stage
  uint64_t step = 0;
  std::map<uint32_t, caf::actor> reported;
  std::vector<at::Tensor> sum;
  int64_t samples = 0;  // samples behind `sum`
  // A robust aggregate's inputs: each worker's mean gradient over its own samples, by worker
  // id (a worker that backpropagated nothing has none).
  std::map<uint32_t, std::vector<at::Tensor>> parts;
  // A sparse warm-up step (model/sparse_grads.hpp): each accepted worker's wires, relayed to
  // every worker, and the values of each of its tensors (the first accepted worker's).
  std::map<uint32_t, std::vector<at::Tensor>> wires;
  std::vector<int64_t> numels;
  bool sent = false;
  bool has_members = false;  // a restarted averager learns them from the tracker
  struct Early {
    uint64_t step;
    uint32_t worker;
    int64_t samples;
    messages::TensorList grads;
    caf::actor from;
  };
  std::vector<Early> early;  // gradients that came before the membership
  caf::actor metrics;        // `rejected` events go here when the run has a metrics log
  uint64_t refused = 0;      // gradients refused (non-finite, wrong shape, impossible samples)
  transport::ParcelInbox parcels;  // gradients from other processes come in slices
  static inline const char* name = "grad_averager";
};

caf::behavior grad_averager(caf::stateful_actor<averager_state>* self, ContextPtr ctx,
                            uint32_t stage, caf::actor metrics);

}  // namespace swarmrt::actors
