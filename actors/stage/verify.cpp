// A stage worker's part in spot checks of stage work (docs/security.md, the tracker's side is
// actors/tracker/verify.cpp). Three workers take part in a check of stage k's work on a
// micro-batch, none of them the checked one: its upstream sends the hop it sent the checked
// worker again, as it went on the wire, to a verifier of stage k; the verifier computes its
// layers on it and sends its output, in the run's hop encoding, to the next-stage worker that
// received the checked worker's; that one compares the two and tells the tracker how far apart
// they are. The checked worker hears nothing of it: it cannot tell a checked micro-batch.
#include <spdlog/spdlog.h>
#include <torch/utils.h>

#include "actors/stage/worker_internal.hpp"
#include "model/checks.hpp"
#include "model/precision.hpp"

namespace swarmrt::actors::worker {
using namespace swarmrt::atoms;
using messages::Direction;
using messages::MicroBatchHeader;

void send_again(Self* self, uint64_t step, uint32_t mb, uint32_t attempt, uint32_t verifier,
                uint32_t checker) {
  auto& s = self->state;
  auto it = s.sent_forward.find({step, mb, attempt});
  auto to = s.by_id.find(verifier);
  if (it == s.sent_forward.end() || to == s.by_id.end()) {
    // The tracker's wait for the answer ends the check (expired).
    spdlog::warn("worker {}: no hop of {}/{} (attempt {}) or no worker {} for a spot check",
                 s.setup.id, step, mb, attempt, verifier);
    return;
  }
  MicroBatchHeader h = it->second.header;
  h.direction = Direction::verify;
  // pin names the checker on the next stage (the checked one's receiver): the verifier's
  // output goes to it.
  h.pin.assign(static_cast<size_t>(s.setup.ctx->stages()), messages::kNoWorker);
  if (h.stage + 1 < h.pin.size()) h.pin[h.stage + 1] = checker;
  auto frame = messages::make_frame(std::move(h), it->second.wire);
  s.setup.ctx->bytes->add(Traffic::activations, messages::payload_bytes(frame.tensors));
  send_encoded(self, to->second, std::move(frame));
}

void on_verify(Self* self, MicroBatchHeader h, std::vector<at::Tensor> ts) {
  auto& s = self->state;
  const auto next = s.setup.stage + 1;
  if (static_cast<int64_t>(next) >= s.setup.ctx->stages() || h.pin.size() <= next) return;
  auto checker = s.by_id.find(h.pin[next]);
  if (checker == s.by_id.end()) {
    spdlog::warn("worker {}: spot check of {}/{} for unknown worker {}", s.setup.id, h.step,
                 h.micro_batch, h.pin[next]);
    return;
  }
  torch::Tensor output;
  {
    torch::NoGradGuard no_grad;
    model::Autocast autocast(s.setup.ctx->config.train.precision, s.device);
    output = s.module->forward(ts[0]);
  }
  h.route.push_back(s.setup.id);
  h.stage = next;
  h.direction = Direction::verify_output;
  send_hop(self, checker->second, std::move(h), {output, ts[1]}, Traffic::activations);
}

void on_verify_output(Self* self, const MicroBatchHeader& h, std::vector<at::Tensor> ts) {
  auto& s = self->state;
  auto it = s.received.find({h.step, h.micro_batch, h.attempt});
  if (it == s.received.end() || h.route.empty()) {
    spdlog::warn("worker {}: a spot check's output of {}/{} (attempt {}) it holds no input for",
                 s.setup.id, h.step, h.micro_batch, h.attempt);
    return;
  }
  const double difference = model::relative_difference(ts[0], it->second.input);
  self->send(s.setup.tracker, verified_atom::value, h.step, h.micro_batch, h.attempt,
             s.setup.stage - 1, it->second.from, h.route.back(), difference);
}

void forget_checked(Self* self, uint64_t step, bool from_step) {
  auto& s = self->state;
  auto drop = [&](auto& kept) {
    for (auto it = kept.begin(); it != kept.end();) {
      const uint64_t at = std::get<0>(it->first);
      it = (from_step ? at >= step : at <= step) ? kept.erase(it) : std::next(it);
    }
  };
  drop(s.sent_forward);
  drop(s.received);
}

}  // namespace swarmrt::actors::worker
