// A stage worker: serves one pipeline stage. It runs its layers forward, keeps the autograd
// state of each micro-batch keyed by (step, micro-batch, attempt) until the gradient comes
// back, forwards activations to a next-stage worker chosen by its wiring, and takes the inner
// optimizer step when the tracker closes the step. Torch compute runs on the worker's own
// thread (it is spawned detached), so it never starves CAF's scheduler.
#pragma once

#include <torch/optim/adamw.h>
#include <caf/all.hpp>
#include <chrono>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <tuple>
#include <unordered_map>

#include "actors/common/byte_counters.hpp"
#include "actors/common/context.hpp"
#include "actors/diloco/replica.hpp"
#include "actors/recovery/snapshot.hpp"
#include "actors/stage/peer_links.hpp"
#include "actors/stage/worker_faults.hpp"
#include "messages/frame.hpp"
#include "model/checkpoint.hpp"
#include "model/stage_model.hpp"
#include "policy/hop_choice.hpp"
#include "policy/wiring.hpp"
#include "transport/parcel.hpp"
#include "transport/staging.hpp"
#include "transport/transport.hpp"

namespace swarmrt::actors {

struct WorkerSetup {
  ContextPtr ctx;
  uint32_t id = 0;
  uint32_t stage = 0;
  caf::actor tracker;
  caf::actor averager;         // set in grad-sync modes with several workers per stage
  caf::actor group;            // DiLoCo modes: handed to the replica, which follows restarts
  double slow_factor = 1.0;    // fault injection: compute takes this many times longer
  int64_t nan_at_step = 0;     // fault injection: sends of this step carry a NaN (0: never)
  bool keep_grads = false;     // keep the last reduced gradient for inspection
  std::string device = "cpu";  // where its layers and tensors live: "cpu" or "cuda:K"
  // Ask the tracker for a starting state before taking work (a live peer's, the DiLoCo
  // group's or a checkpoint's). Off only where a test drives a worker without a tracker.
  bool take_state = true;
};

struct worker_state {
  using Clock = std::chrono::steady_clock;
  using Key = std::tuple<uint64_t, uint32_t, uint32_t>;  // step, micro-batch, attempt

  struct InFlight {
    torch::Tensor input;   // leaf that collects the gradient for the previous stage
    torch::Tensor output;  // what was sent on; backward starts here
    Clock::time_point sent;
    uint32_t samples = 0;
    caf::actor upstream;         // who sent the forward hop; the input gradient goes back to it
    std::optional<uint32_t> to;  // the next-stage worker it went to, once sent
    double forward_s = 0;        // its forward's compute (slowdown included), for `rate`
  };
  struct Outgoing {
    Key key;
    messages::MicroBatchHeader header;
    std::vector<at::Tensor> tensors;
  };

  WorkerSetup setup;
  model::StageModel module{nullptr};
  std::unique_ptr<torch::optim::AdamW> optimizer;
  std::vector<torch::Tensor> params;
  policy::Wiring next;
  std::unordered_map<uint32_t, caf::actor> by_id;
  std::vector<uint32_t> next_ids;
  std::map<Key, InFlight> inflight;
  std::deque<Outgoing> outbox;  // forward hops waiting for a free slot downstream
  // swarm.compression = auto: each other process's link's choice of encoding (hop_links.cpp),
  // and the step it was last told to the tracker in.
  struct LinkChoice {
    policy::HopChooser chooser;
    std::optional<uint64_t> told_step;
  };
  std::map<caf::node_id, LinkChoice> hop_choice;
  // Forward hops from another process whose sender (the last of their route) this worker
  // does not know yet: its membership is on the way. Taken when it comes.
  std::deque<messages::Frame> unrouted;
  // Hop reports not yet sent to the tracker, each with when its hop happened (compute.cpp).
  messages::HopReports hop_reports;
  std::vector<Clock::time_point> hop_times;  // when each of them happened
  bool flush_due = false;                    // a flush_atom is on its way (one at a time)
  Clock::time_point reports_sent;            // when they were last sent
  // What waits for the worker's device, in order: a GPU worker's loss reports and frames to
  // other processes leave once the device has computed them (transport/staging.hpp), while
  // the worker goes on queueing the next micro-batch. Done at a device_ready_atom.
  struct AfterDevice {
    transport::DeviceFence fence;
    std::function<void()> then;
  };
  std::deque<AfterDevice> after_device;
  bool device_check_due = false;    // a device_ready_atom is on its way
  transport::ChunkReceiver chunks;  // frames from other processes
  PeerLinks links;                  // communicator links to workers in other processes
  transport::ParcelInbox parcels;   // the stage's gradient sum from another process, in slices
  std::map<caf::actor_addr, std::string> device_of;  // every member's device, by handle
  at::Device device{at::kCPU};

  int64_t samples = 0;  // samples backpropagated in the current step
  // The open step's loss scale (its micro-batches' headers carry it), and whether this
  // worker's gradient of the step overflowed: the tracker then has the swarm skip the step.
  double loss_scale = 1.0;
  bool overflowed = false;
  int64_t forwards = 0;   // micro-batches forwarded, whole run
  uint64_t rejected = 0;  // frames and chunks refused (malformed, mismatched)
  uint64_t refused_chunks = 0;
  uint64_t stale = 0;  // hops of attempts this worker no longer holds or that are cancelled
  // Exactly-once gradients: the micro-batches whose gradient this worker has accumulated in
  // the open step (a re-run attempt that comes back computes only the input gradient), and
  // the lowest attempt still wanted per micro-batch (older attempts are dropped).
  std::set<std::pair<uint64_t, uint32_t>> accumulated;
  uint64_t recomputed = 0;   // backward passes that took only the input gradient
  bool sum_pending = false;  // its gradient is with the averager, the stage's sum not back yet
  // A sparse warm-up's error feedback (model/sparse_grads.hpp): per parameter, what its steps
  // left unsent; and as it was before the open step's send, for a step reopened after it.
  std::vector<at::Tensor> grad_residual, grad_residual_before;
  std::map<std::pair<uint64_t, uint32_t>, uint32_t> min_attempt;
  uint64_t step = 0;          // step being reduced/applied
  uint64_t applied_step = 0;  // the last step whose optimizer step this worker took
  model::NamedTensors last_grads;
  // DiLoCo modes: θ(t-1) and rounds (actors/diloco/replica.hpp); null otherwise.
  std::unique_ptr<DilocoReplica> replica;
  WorkerFaults faults;  // chaos: lost hops, slow compute, NaN sends
  // Spot checks (verify.fraction > 0; docs/security.md), until the step is applied: each
  // forward hop this worker sent as it went on the wire, which it sends again to a verifier
  // when the tracker checks the next stage's work on it; and each hidden state it received
  // with who sent it, which it compares with the verifier's recomputation.
  struct SentForward {
    messages::MicroBatchHeader header;
    std::vector<at::Tensor> wire;
  };
  struct Received {
    at::Tensor input;
    uint32_t from = 0;
  };
  std::map<Key, SentForward> sent_forward;
  std::map<Key, Received> received;
  // What the console's `info` shows of this worker alone: its compute rate (samples over
  // forward + backward seconds of each micro-batch) and the bytes it sent, by kind.
  policy::ThroughputEma rate;
  std::shared_ptr<ByteCounters> sent = std::make_shared<ByteCounters>();
  // Recovery (actors/recovery/): the snapshot of this worker's state a joiner fetches, and
  // the donor that serves it beside this worker.
  std::shared_ptr<recovery::SnapshotStore> snapshots = std::make_shared<recovery::SnapshotStore>();
  caf::actor donor;

  static inline const char* name = "stage_worker";
};

caf::behavior stage_worker(caf::stateful_actor<worker_state>* self, WorkerSetup setup);

}  // namespace swarmrt::actors
