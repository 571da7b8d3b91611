// Every way a frame reaches a stage worker — a CAF message in one process, chunks inside CAF
// messages, a frame link (bulk), a communicator link — folded into one
// (kind, frame, sender) and handled the same way. Anything that does not decode or does not
// fit is refused with a logged reason and a counter; the worker keeps serving.
#include <spdlog/spdlog.h>

#include "actors/stage/worker_internal.hpp"
#include "inspect/probe.hpp"
#include "model/hop_codec.hpp"
#include "model/precision.hpp"
#include "transport/bulk.hpp"
#include "transport/staging.hpp"

namespace swarmrt::actors::worker {
using messages::Direction;
using messages::Frame;
using messages::MicroBatchHeader;

namespace {

// Hidden states and their gradients travel in the run's hop encoding (swarm.hop_encoding, or
// one auto chooses down to it) of its compute dtype (train.precision): a hop in another
// encoding or dtype is refused.
void check_hidden(const worker_state& s, const MicroBatchHeader& h, const at::Tensor& t) {
  const auto& cfg = s.setup.ctx->config;
  const std::string what = h.direction == Direction::backward ? "gradients" : "activations";
  if (auto why = refuse_encoding(s, h); !why.empty())
    throw messages::DecodeError(what + " in " + why);
  const auto encoding = encoding_of(s, h);
  const auto want = model::hop_wire_dtype(encoding, model::compute_dtype(cfg.train.precision));
  if (t.scalar_type() != want)
    throw messages::DecodeError(what + " in " + c10::toString(t.scalar_type()) +
                                ", this run sends " + c10::toString(want) +
                                " (train.precision = " + config::name_of(cfg.train.precision) +
                                ", hop encoding " + config::name_of(encoding) + ")");
}

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
      check_hidden(s, h, frame.tensors[0]);
    }
  } catch (const messages::DecodeError& e) {
    ++s.rejected;
    spdlog::warn("worker {} rejected a frame: {}", s.setup.id, e.what());
    return;
  }
  // A traced worker's trace says which hop this frame was.
  if (inspect::any_traced())
    inspect::annotate(fmt::format("{} step {} mb {} attempt {}", messages::to_string(h.direction),
                                  h.step, h.micro_batch, h.attempt));
  // A forward hop that came on a frame link names no sender: the last worker of its route
  // sent it, and the input gradient goes back to it.
  caf::actor from = upstream;
  if (!from && h.direction == Direction::forward && s.setup.stage > 0) {
    if (h.route.empty()) {
      ++s.rejected;
      spdlog::warn("worker {} rejected a forward hop with an empty route", s.setup.id);
      return;
    }
    auto sender = s.by_id.find(h.route.back());
    if (sender == s.by_id.end()) {
      constexpr size_t kMaxUnrouted = 32;  // held frames hold their tensors
      if (s.unrouted.size() == kMaxUnrouted) {
        ++s.rejected;  // its micro-batch is re-run after the tracker's timeout
        spdlog::warn("worker {} dropped a hop from unknown worker {}", s.setup.id, h.route.back());
        s.unrouted.pop_front();
      }
      s.unrouted.push_back(frame);
      return;
    }
    from = sender->second;
  }
  if (h.direction != Direction::eval) {
    // A hop of a step this worker applied already: its sender woke late (frozen while the
    // tracker re-ran the micro-batch elsewhere and closed the step). Its samples would count
    // twice, in the next step (min_attempt forgets a step once it is applied).
    if (h.step <= s.applied_step) {
      ++s.stale;
      return;
    }
    auto cancelled = s.min_attempt.find({h.step, h.micro_batch});
    if (cancelled != s.min_attempt.end() && h.attempt < cancelled->second) {
      ++s.stale;  // an attempt the tracker has re-run: its hops are dropped
      return;
    }
  }
  try {
    // Frames from other processes bring host memory; links and this process's workers bring
    // device memory. All of it ends up on this worker's device.
    std::vector<at::Tensor> ts(frame.tensors.begin(), frame.tensors.end());
    // A hop one of this process's workers encoded on a device is not read back to check its
    // values (that would wait for the device); any other is (model/hop_codec.hpp).
    const bool ours = upstream && upstream.node() == self->node();
    // Encoded hidden states forward are decoded to [B, T, n_embd] (B and T are the targets')
    // on this worker's device; encoded gradients backward by on_backward, which holds the
    // output they belong to.
    const auto& cfg = s.setup.ctx->config;
    const auto encoding = encoding_of(s, h);
    const bool decode = encoding != config::HopEncoding::none &&
                        h.direction != Direction::backward && s.setup.stage > 0;
    std::vector<int64_t> shape;
    if (decode) shape = {ts[1].size(0), ts[1].size(1), cfg.model.n_embd};
    const auto dtype = model::compute_dtype(cfg.train.precision);
    if (decode) {
      try {
        model::check_hop(ts[0], encoding, cfg.swarm.hop_block, model::HopDirection::forward, shape,
                         dtype, !ours || ts[0].is_cpu());
        // An entropy wire's frame is checked as it is decoded, hence here too. It is inflated
        // on the host, so it is decoded from where it arrived (model/hop_codec.hpp).
        const bool host = encoding == config::HopEncoding::entropy;
        ts[0] = model::decode_hop(host ? ts[0] : transport::to_device(ts[0], s.device), encoding,
                                  cfg.swarm.hop_block, model::HopDirection::forward, shape, dtype,
                                  /*check_values=*/false, s.device);
      } catch (const std::invalid_argument& e) {
        ++s.rejected;
        spdlog::warn("worker {} rejected micro-batch {}/{}: {}", s.setup.id, h.step, h.micro_batch,
                     e.what());
        return;
      }
    }
    if (h.direction == Direction::backward) return on_backward(self, h, std::move(ts), !ours);
    for (auto& t : ts) t = transport::to_device(t, s.device);
    switch (h.direction) {
      case Direction::forward:
        on_forward(self, std::move(h), std::move(ts), from);
        break;
      case Direction::backward:
        break;  // above
      case Direction::eval:
        on_eval(self, std::move(h), std::move(ts));
        break;
      case Direction::verify:
        on_verify(self, std::move(h), std::move(ts));
        break;
      case Direction::verify_output:
        on_verify_output(self, h, std::move(ts));
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
      s.replica && s.replica->on_round(self, frame, s.module, !s.inflight.empty(), reload);
  if (!taken) ++s.rejected;
}

void take_unrouted(Self* self) {
  auto& s = self->state;
  auto waiting = std::exchange(s.unrouted, {});
  for (const auto& frame : waiting) on_hop(self, frame, caf::actor());
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
