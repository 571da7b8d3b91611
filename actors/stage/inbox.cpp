// Every way a frame reaches a stage worker — a CAF message in one process, chunks inside CAF
// messages, a frame link (bulk), a communicator link — folded into one
// (kind, frame, sender) and handled the same way. Anything that does not decode or does not
// fit is refused with a logged reason and a counter; the worker keeps serving.
#include <spdlog/spdlog.h>

#include "actors/stage/worker_internal.hpp"
#include "inspect/probe.hpp"
#include "model/precision.hpp"
#include "transport/bulk.hpp"

namespace swarmrt::actors::worker {
using messages::Direction;
using messages::Frame;
using messages::MicroBatchHeader;

namespace {

// A micro-batch hop: decoded and checked against this stage, dropped when its attempt was
// cancelled, then run forward, backward or for evaluation on this worker's device.
void on_hop(Self* self, const Frame& frame, const caf::actor& upstream) {
  auto& s = self->state;
  MicroBatchHeader h;
  try {
    h = messages::open_frame(frame);
    const size_t want = h.direction == Direction::backward ? 1 : 2;
    if (h.stage != s.setup.stage || frame.tensors.size() != want)
      throw messages::DecodeError("frame for stage " + std::to_string(h.stage) + " with " +
                                  std::to_string(frame.tensors.size()) + " tensors reached stage " +
                                  std::to_string(s.setup.stage));
    if (h.direction != Direction::backward && s.setup.stage == 0) {
      if (frame.tensors[0].scalar_type() != at::kLong)
        throw messages::DecodeError("stage 0 needs int64 token ids");
    } else {
      // Hidden states and their gradients travel in the run's compute dtype (train.precision).
      const auto want_dtype = model::compute_dtype(s.setup.ctx->config.train.precision);
      if (frame.tensors[0].scalar_type() != want_dtype)
        throw messages::DecodeError(
            std::string(h.direction == Direction::backward ? "gradients" : "activations") + " in " +
            c10::toString(frame.tensors[0].scalar_type()) + ", this run computes in " +
            c10::toString(want_dtype) +
            " (train.precision = " + model::name_of(s.setup.ctx->config.train.precision) + ")");
    }
  } catch (const messages::DecodeError& e) {
    ++s.rejected;
    spdlog::warn("worker {} rejected a frame: {}", s.setup.id, e.what());
    return;
  }
  // A traced worker's trace says which hop this frame was.
  if (inspect::any_traced())
    inspect::annotate(fmt::format("{} step {} mb {} attempt {}",
                                  h.direction == Direction::forward    ? "forward"
                                  : h.direction == Direction::backward ? "backward"
                                                                       : "eval",
                                  h.step, h.micro_batch, h.attempt));
  if (h.direction != Direction::eval) {
    auto cancelled = s.min_attempt.find({h.step, h.micro_batch});
    if (cancelled != s.min_attempt.end() && h.attempt < cancelled->second) {
      ++s.stale;  // an attempt the tracker has re-run: its hops are dropped
      return;
    }
  }
  try {
    // Frames bring host memory and links the worker's device memory: both end up there.
    std::vector<at::Tensor> ts;
    for (const auto& t : frame.tensors) ts.push_back(t.to(s.device));
    switch (h.direction) {
      case Direction::forward:
        on_forward(self, std::move(h), std::move(ts), upstream);
        break;
      case Direction::backward:
        on_backward(self, h, std::move(ts));
        break;
      case Direction::eval:
        on_eval(self, std::move(h), std::move(ts));
        break;
    }
  } catch (const c10::Error& e) {
    // Shapes the model cannot take: refused, the worker keeps serving.
    ++s.rejected;
    spdlog::warn("worker {} rejected micro-batch {}/{}: {}", s.setup.id, h.step, h.micro_batch,
                 e.what_without_backtrace());
  }
}

}  // namespace

void deliver(Self* self, messages::FrameKind kind, const Frame& frame, const caf::actor& sender) {
  auto& s = self->state;
  if (kind == messages::FrameKind::microbatch) return on_hop(self, frame, sender);
  // A round's answer from the DiLoCo group. Micro-batches in flight hold autograd graphs over
  // the parameters: a θ that arrives then waits for the inner step.
  auto reload = [self](const messages::WorkerState& st) { load_state(self, st); };
  const bool taken =
      s.replica && s.replica->on_round(self, frame, s.module, !s.inflight.empty(), s.step, reload);
  if (!taken) ++s.rejected;
}

void on_chunk(Self* self, const std::vector<uint8_t>& chunk, const caf::actor& sender) {
  auto& s = self->state;
  auto complete = s.chunks.add(chunk, "worker " + std::to_string(s.setup.id));
  if (!complete) {
    if (s.chunks.refused() > s.refused_chunks) ++s.rejected;
    s.refused_chunks = s.chunks.refused();
    return;
  }
  deliver(self, complete->kind, complete->frame, sender);
}

// A hop whose tensors are on a communicator link: they are received before it is handled.
void on_comm_hop(Self* self, uint64_t link, uint8_t kind, const std::vector<uint8_t>& header,
                 const caf::actor& sender) {
  auto& s = self->state;
  if (kind > static_cast<uint8_t>(messages::FrameKind::round)) {
    ++s.rejected;
    spdlog::warn("worker {} rejected a hop of unknown kind {}", s.setup.id, kind);
    return;
  }
  auto frame = s.links.receive(link, static_cast<messages::FrameKind>(kind), header);
  if (!frame) {
    ++s.rejected;
    return;
  }
  deliver(self, static_cast<messages::FrameKind>(kind), *frame, sender);
}

void on_bulk(Self* self, const transport::BulkDelivery& d) {
  auto& s = self->state;
  if (!d.error.empty()) {
    ++s.rejected;
    return;
  }
  deliver(self, d.kind, d.frame, d.sender);
}

}  // namespace swarmrt::actors::worker
