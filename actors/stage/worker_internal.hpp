// The stage worker's parts, sharing its state (stage_worker.hpp):
//   compute.cpp       forward, backward, evaluation of each hop
//   step.cpp          the step's reduce and apply, states for peers, cancels and reopenings
//   inbox.cpp         every way a frame arrives, folded into one (kind, frame, sender)
//   stage_worker.cpp  set-up and the behaviour: which message calls which of these
// DiLoCo's replica side is actors/diloco/replica.*, fault injection worker_faults.*.
#pragma once

#include "actors/stage/stage_worker.hpp"
#include "transport/bulk.hpp"

namespace swarmrt::actors::worker {

using Self = caf::stateful_actor<worker_state>;

// compute.cpp
void flush_outbox(Self* self);
// Sends the hop reports gathered since the last flush to the tracker, as one message.
void flush_hop_reports(Self* self);
// Does, in order, what waited for the device and is ready now (worker_state::after_device).
void on_device_ready(Self* self);
void on_forward(Self* self, messages::MicroBatchHeader h, std::vector<at::Tensor> ts,
                const caf::actor& upstream);
// `check_values`: read the gradient's encoded scales back for the check (model/hop_codec.hpp).
// A hop to `to`, reported to the tracker (training hops), with chaos's faults, in the run's hop
// encoding.
void send_hop(Self* self, const caf::actor& to, messages::MicroBatchHeader h,
              std::vector<at::Tensor> ts, Traffic kind);
// Sends `frame`, already encoded, to `to`: by reference in this process, on a communicator
// link where there is one, else staged to host memory without stopping this worker's device.
void send_encoded(Self* self, const caf::actor& to, messages::Frame frame);
void on_backward(Self* self, const messages::MicroBatchHeader& h, std::vector<at::Tensor> ts,
                 bool check_values);
void on_eval(Self* self, messages::MicroBatchHeader h, std::vector<at::Tensor> ts);

// verify.cpp: spot checks of stage work (docs/security.md). The tracker asks this worker, the
// checked stage's upstream, to send its hop of (step, micro-batch, attempt) again to
// `verifier`, which recomputes it and sends its output to `checker`, which compares.
void send_again(Self* self, uint64_t step, uint32_t mb, uint32_t attempt, uint32_t verifier,
                uint32_t checker);
void on_verify(Self* self, messages::MicroBatchHeader h, std::vector<at::Tensor> ts);
void on_verify_output(Self* self, const messages::MicroBatchHeader& h, std::vector<at::Tensor> ts);
// Drops what spot checks kept of steps up to `step` (applied), or from `step` on (reopened).
void forget_checked(Self* self, uint64_t step, bool from_step);

// step.cpp
void reduce_step(Self* self, uint64_t step);
void take_sum(Self* self, uint64_t step, const messages::TensorList& sum);
void apply_step(Self* self, uint64_t step, double lr, double coef);
void send_gradient(Self* self);
void load_state(Self* self, const messages::WorkerState& st);
// `canonical`: the optimizer as tensors (moments) and a source every peer gives alike, so that
// equal states serialize to equal bytes (a snapshot for joiners, actors/recovery/).
messages::WorkerState state_of(Self* self, bool canonical = false);
// Takes a snapshot of this worker's state for joiners unless it holds one of this step:
// (its donor, the snapshot's step).
std::pair<caf::actor, int64_t> take_snapshot(Self* self);
// Fetches the state the tracker named donors for (WorkerState::donors), then loads it.
void fetch_state(Self* self, const messages::WorkerState& offer);
void cancel(Self* self, uint64_t step, uint32_t mb, uint32_t attempt);
void reset_step(Self* self, uint64_t step, uint32_t floor);

// hop_links.cpp: swarm.compression = auto.
// Has this process's frame links time their messages when the run compresses by link.
void set_up_hop_links(const config::RunConfig& cfg);
// The encoding of a hop to `to`: the run's (fixed), or what `to`'s link's chooser picks (auto).
config::HopEncoding choose_encoding(Self* self, const caf::actor& to,
                                    const messages::MicroBatchHeader& h,
                                    const std::vector<at::Tensor>& ts);
// The encoding a received hop is in (fixed: the run's; auto: the one its header names).
config::HopEncoding encoding_of(const worker_state& s, const messages::MicroBatchHeader& h);
// Why a received hop's encoding is refused (empty: it is not).
std::string refuse_encoding(const worker_state& s, const messages::MicroBatchHeader& h);

// inbox.cpp
void deliver(Self* self, messages::FrameKind kind, const messages::Frame& frame,
             const caf::actor& sender);
void on_chunk(Self* self, const std::vector<uint8_t>& chunk, const caf::actor& sender);
void on_comm_hop(Self* self, uint64_t link, uint8_t kind, const std::vector<uint8_t>& header,
                 const caf::actor& sender);
void on_bulk(Self* self, const transport::BulkDelivery& d);
// Forward hops parked until membership named their sender (worker_state::unrouted).
void take_unrouted(Self* self);

}  // namespace swarmrt::actors::worker
