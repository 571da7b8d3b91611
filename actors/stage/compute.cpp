// A stage worker's compute: forward, backward and evaluation of its layers for each hop (the
// step's reduce and apply are step.cpp). The parameters' gradients take each micro-batch of a
// step exactly once (architecture §7).
#include <spdlog/spdlog.h>
#include <torch/csrc/autograd/autograd.h>
#include <torch/utils.h>
#include <limits>
#include <utility>

#include "actors/common/tensor_list.hpp"
#include "actors/stage/worker_internal.hpp"
#include "inspect/probe.hpp"
#include "model/diloco.hpp"
#include "model/hop_codec.hpp"
#include "model/optim.hpp"
#include "model/precision.hpp"
#include "policy/hop_deadline.hpp"

namespace swarmrt::actors::worker {
using namespace swarmrt::atoms;
using messages::Direction;
using messages::Frame;
using messages::MicroBatchHeader;

void flush_hop_reports(Self* self) {
  auto& s = self->state;
  auto& batch = s.hop_reports;
  if (batch.reports.empty() && batch.losses.empty() && batch.done.empty()) return;
  const auto now = worker_state::Clock::now();
  for (size_t i = 0; i < s.hop_times.size(); ++i)
    s.hop_reports.reports[i].age_s = std::chrono::duration<double>(now - s.hop_times[i]).count();
  s.hop_times.clear();
  s.reports_sent = now;
  self->send(s.setup.tracker, hop_atom::value, std::exchange(s.hop_reports, {}));
}

void on_device_ready(Self* self) {
  auto& s = self->state;
  s.device_check_due = false;
  while (!s.after_device.empty() && s.after_device.front().fence.ready()) {
    auto then = std::move(s.after_device.front().then);
    s.after_device.pop_front();
    then();
  }
  if (s.after_device.empty()) return;
  // The device is still at work: looked at again shortly, with whatever arrives meanwhile.
  s.device_check_due = true;
  self->delayed_send(self, std::chrono::microseconds(100), device_ready_atom::value);
}

namespace {

double seconds_since(worker_state::Clock::time_point t) {
  return std::chrono::duration<double>(worker_state::Clock::now() - t).count();
}

// Runs `then` once `fence` is ready: at once when it is and nothing waits before it, else in
// order with what waits, from a device_ready_atom (on_device_ready).
void after_device(Self* self, const transport::DeviceFence& fence, std::function<void()> then) {
  auto& s = self->state;
  if (s.after_device.empty() && fence.ready()) return then();
  s.after_device.push_back({fence, std::move(then)});
  if (s.device_check_due) return;
  s.device_check_due = true;
  // Behind what the mailbox holds now: the next micro-batches are queued on the device first.
  self->send(self, device_ready_atom::value);
}

// One micro-batch's compute measured: into the rate the worker reports, and onto its probe,
// where the inspector (the console, the status page, /metrics) reads it without asking.
void measure(worker_state& s, int64_t samples, double seconds) {
  s.rate.add(samples, seconds);
  if (auto r = s.rate.value()) inspect::report_rate(*r);
}

// Gradients go backward; hidden states of training and evaluation go forward.
model::HopDirection hop_direction(const MicroBatchHeader& h) {
  return h.direction == Direction::backward ? model::HopDirection::backward
                                            : model::HopDirection::forward;
}

// The stochastic rounding of a hop's gradient, drawn from the run's seed and where the hop is
// in the run (step, micro-batch, attempt, stage), so a run rounds the same way every time.
uint64_t rounding_seed(int64_t run_seed, const MicroBatchHeader& h) {
  uint64_t z = static_cast<uint64_t>(run_seed);
  for (uint64_t v : {h.step, uint64_t{h.micro_batch}, uint64_t{h.attempt}, uint64_t{h.stage}}) {
    z = (z ^ v) + 0x9e3779b97f4a7c15ull;  // splitmix64's mix of each in turn
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z ^= z >> 31;
  }
  return z;
}

bool is_last(const worker_state& s) {
  return static_cast<int64_t>(s.setup.stage) == s.setup.ctx->stages() - 1;
}

// Tells the tracker that this worker took one hop of a training micro-batch (it starts
// computing it) or handed it on to `to`: how the tracker tells a micro-batch that a live
// worker is at work on from a lost one (policy/hop_deadline.hpp). Reports go with the
// worker's next loss or completion (a micro-batch's last stage and stage 0 send one per
// micro-batch), and otherwise at a flush_atom the worker sends itself a window after the
// first waiting one (policy::report_window_s); a take goes at once when the hop may be long
// or the window has passed since the last batch (report_at_once). Across processes each
// message costs a TLS write and a wake-up at both ends: one per hop took 6% of a 2-process
// pipeline's tokens/s, and a flush at every empty mailbox still 1-2% (docs/results.md).
void report_hop(Self* self, const MicroBatchHeader& h, bool passed, const caf::actor_addr& to) {
  auto& s = self->state;
  // Evaluation and spot checks are not hops of a training micro-batch.
  if (h.direction != Direction::forward && h.direction != Direction::backward) return;
  if (!s.setup.tracker) return;
  const auto now = worker_state::Clock::now();
  s.hop_reports.reports.push_back({h.step, h.micro_batch, h.attempt, s.setup.id, passed, to});
  s.hop_times.push_back(now);
  if (!passed) {
    std::optional<double> expected;
    if (const auto rate = s.rate.value(); rate && *rate > 0)
      expected = static_cast<double>(h.samples) / *rate;
    const double since = std::chrono::duration<double>(now - s.reports_sent).count();
    if (policy::report_at_once(expected, since,
                               s.setup.ctx->config.supervision.microbatch_timeout_s))
      return flush_hop_reports(self);
  }
  if (!s.flush_due) {
    s.flush_due = true;
    self->delayed_send(self,
                       config::as_duration(policy::report_window_s(
                           s.setup.ctx->config.supervision.microbatch_timeout_s)),
                       flush_atom::value);
  }
}

}  // namespace

void send_hop(Self* self, const caf::actor& to, MicroBatchHeader h, std::vector<at::Tensor> ts,
              Traffic kind) {
  auto& s = self->state;
  report_hop(self, h, true, to.address());
  // Fault injection: the hop is lost on the way; the tracker re-runs the micro-batch when it
  // does not come back (supervision.microbatch_timeout_s).
  if (s.faults.drop_hop() || transport::cut_off(to)) return;
  // chaos.hop_noise: a malicious worker's training hops carry noise (not what it evaluates).
  if (h.direction != Direction::eval) s.faults.noise_hop(h.step, ts[0]);
  // Hidden states and their gradients in the run's hop encoding (none: as they are).
  const auto& swarm = s.setup.ctx->config.swarm;
  const auto encoding = choose_encoding(self, to, h, ts);
  ts[0] = model::encode_hop(ts[0], encoding, swarm.hop_block, hop_direction(h),
                            rounding_seed(s.setup.ctx->config.train.seed, h));
  h.hop_encoding = static_cast<uint8_t>(encoding);
  // Spot checks: kept as it went on the wire, to be sent again to a verifier.
  if (h.direction == Direction::forward && s.setup.ctx->config.verify.fraction > 0)
    s.sent_forward[{h.step, h.micro_batch, h.attempt}] = {h, ts};
  const auto payload = messages::payload_bytes(ts);
  auto frame = messages::make_frame(std::move(h), std::move(ts));
  for (auto* bytes : {s.setup.ctx->bytes.get(), s.sent.get()}) {
    bytes->add(kind, payload);
    bytes->add(Traffic::control, frame.header.size());
  }
  send_encoded(self, to, std::move(frame));
}

void send_encoded(Self* self, const caf::actor& to, Frame frame) {
  auto& s = self->state;
  const auto device = s.device_of.find(to.address());
  if (s.links.send(self, to, device == s.device_of.end() ? nullptr : &device->second,
                   messages::FrameKind::microbatch, frame))
    return;
  // In this process the tensors go by reference, wherever they are; to another process a
  // frame carries host memory, staged without stopping this worker's device.
  if (to.node() == self->node()) {
    transport::send_frame(self, to, messages::FrameKind::microbatch, std::move(frame));
    return;
  }
  auto staged = std::make_shared<transport::HostStaged>(transport::stage_to_host(frame.tensors));
  frame.tensors = staged->host;
  after_device(self, staged->done, [self, to, staged, frame = std::move(frame)]() mutable {
    transport::send_frame(self, to, messages::FrameKind::microbatch, std::move(frame));
  });
}

// Sends queued forward hops while the next stage has free slots.
void flush_outbox(Self* self) {
  auto& s = self->state;
  while (!s.outbox.empty()) {
    const auto& front = s.outbox.front().header;
    std::optional<uint32_t> pinned;
    if (front.pin.size() > s.setup.stage + 1 && front.pin[s.setup.stage + 1] != messages::kNoWorker)
      pinned = front.pin[s.setup.stage + 1];
    auto pick = s.next.choose(static_cast<double>(front.samples), pinned,
                              policy::route_key(front.step, front.micro_batch, front.attempt));
    if (!pick) return;
    auto out = std::move(s.outbox.front());
    s.outbox.pop_front();
    auto& f = s.inflight[out.key];
    f.sent = worker_state::Clock::now();
    f.to = *pick;
    out.header.stage = s.setup.stage + 1;
    send_hop(self, s.by_id.at(*pick), std::move(out.header), std::move(out.tensors),
             Traffic::activations);
  }
}

namespace {

// Runs backward from `output` (seeded with `grad`, or a scalar loss when undefined). The
// parameters' gradients take each micro-batch of a step once: a re-run attempt reaching this
// worker again computes only the gradient of its input. Returns that input gradient
// (undefined at stage 0, which has no input gradient).
torch::Tensor backward(Self* self, const MicroBatchHeader& h, const torch::Tensor& output,
                       const torch::Tensor& grad, const torch::Tensor& input) {
  auto& s = self->state;
  const auto key = std::make_pair(h.step, h.micro_batch);
  if (s.accumulated.insert(key).second) {
    if (grad.defined())
      output.backward(grad);
    else
      output.backward();
    s.samples += h.samples;
    return s.setup.stage == 0 ? torch::Tensor{} : input.grad();
  }
  ++s.recomputed;
  if (s.setup.stage == 0) return {};
  std::vector<torch::Tensor> seed;
  if (grad.defined()) seed.push_back(grad);
  return torch::autograd::grad({output}, {input}, seed).at(0);
}

// Backward from this stage: send the input gradient upstream, or finish the micro-batch.
void finish_backward(Self* self, const MicroBatchHeader& h, const torch::Tensor& input_grad,
                     const caf::actor& upstream) {
  auto& s = self->state;
  if (s.setup.stage == 0) {
    s.hop_reports.done.push_back({h.step, h.micro_batch, h.attempt, s.setup.id});
    flush_hop_reports(self);  // with the reports before it, as one message
    return;
  }
  MicroBatchHeader up = h;
  up.direction = Direction::backward;
  up.stage = s.setup.stage - 1;
  send_hop(self, upstream, std::move(up), {input_grad}, Traffic::gradients);
}

}  // namespace

void on_forward(Self* self, MicroBatchHeader h, std::vector<at::Tensor> ts,
                const caf::actor& upstream) {
  auto& s = self->state;
  report_hop(self, h, false, {});
  const auto started = worker_state::Clock::now();
  const auto& ctx = *s.setup.ctx;
  auto input = s.setup.stage == 0 ? ts[0] : ts[0].detach().requires_grad_(true);
  s.loss_scale = h.loss_scale;
  torch::Tensor output, loss;
  {
    model::Autocast autocast(ctx.config.train.precision, s.device);
    output = s.module->forward(input);
    if (is_last(s)) loss = model::lm_loss(output, ts[1]);
  }
  // Spot checks: what came in and from whom, to compare with a verifier's recomputation.
  if (s.setup.stage > 0 && !h.route.empty() && ctx.config.verify.fraction > 0)
    s.received[{h.step, h.micro_batch, h.attempt}] = {ts[0], h.route.back()};
  h.route.push_back(s.setup.id);
  ++s.forwards;
  if (is_last(s)) {
    // Seed backward with this micro-batch's share of the step's samples: the accumulated
    // gradient is then the step mean, exactly as the single-process trainer computes it,
    // times the step's loss scale (1 without the scaler).
    auto seeded = loss * (static_cast<double>(h.samples) / static_cast<double>(ctx.step_samples()));
    if (h.loss_scale != 1.0) seeded = seeded * h.loss_scale;
    if (h.micro_batch == 0 && static_cast<int64_t>(h.step) == ctx.config.chaos.overflow_at_step)
      seeded = model::overflowed(seeded);
    auto input_grad = backward(self, h, seeded, {}, input);
    // The loss is read once the device has computed it: on a GPU reading it at once would
    // leave the device idle until this worker had queued the next micro-batch.
    auto value = std::make_shared<transport::HostStaged>(
        transport::stage_to_host({loss.detach().to(at::kFloat)}));
    after_device(self, value->done, [self, h, value] {
      self->state.hop_reports.losses.push_back(
          {h.step, h.micro_batch, h.attempt, value->host[0].item<double>(), h.route});
      flush_hop_reports(self);  // with the reports before it, as one message
    });
    s.faults.slow_down(started);
    measure(s, h.samples, seconds_since(started));
    finish_backward(self, h, input_grad, upstream);
    return;
  }
  const worker_state::Key key{h.step, h.micro_batch, h.attempt};
  auto& entry = s.inflight[key] = {input, output, {}, h.samples, upstream, std::nullopt};
  s.faults.slow_down(started);
  entry.forward_s = seconds_since(started);
  s.outbox.push_back({key, std::move(h), {output.detach(), ts[1]}});
  flush_outbox(self);
}

void on_backward(Self* self, const MicroBatchHeader& h, std::vector<at::Tensor> ts,
                 bool check_values) {
  auto& s = self->state;
  const worker_state::Key key{h.step, h.micro_batch, h.attempt};
  auto it = s.inflight.find(key);
  if (it == s.inflight.end() || h.route.size() <= s.setup.stage + 1) {
    ++s.stale;  // an attempt this worker no longer holds: dropped
    return;
  }
  report_hop(self, h, false, {});
  const auto now = worker_state::Clock::now();
  s.next.completed(h.route[s.setup.stage + 1], it->second.samples, it->second.sent, now);
  auto input = it->second.input;
  auto upstream = it->second.upstream;
  const auto& swarm = s.setup.ctx->config.swarm;
  const auto encoding = encoding_of(s, h);
  const auto& out = it->second.output;
  try {
    // Checked where the wire is (in host memory it costs nothing), decoded on this device.
    if (encoding != config::HopEncoding::none)
      model::check_hop(ts[0], encoding, swarm.hop_block, model::HopDirection::backward, out.sizes(),
                       out.scalar_type(), check_values || ts[0].is_cpu());
    // An entropy wire is inflated on the host: decoded from where it arrived.
    if (encoding != config::HopEncoding::entropy) ts[0] = transport::to_device(ts[0], s.device);
    if (encoding != config::HopEncoding::none)
      ts[0] = model::decode_hop(ts[0], encoding, swarm.hop_block, model::HopDirection::backward,
                                out.sizes(), out.scalar_type(),
                                /*check_values=*/false, s.device);
  } catch (const std::invalid_argument& e) {
    ++s.rejected;
    spdlog::warn("worker {}: backward for {}/{} refused: {}", s.setup.id, h.step, h.micro_batch,
                 e.what());
    s.inflight.erase(it);
    return;
  }
  if (!ts[0].sizes().equals(out.sizes())) {
    ++s.rejected;
    spdlog::warn("worker {}: backward for {}/{} has shape {}, output was {}", s.setup.id, h.step,
                 h.micro_batch, c10::str(ts[0].sizes()), c10::str(out.sizes()));
    s.inflight.erase(it);
    return;
  }
  auto input_grad = backward(self, h, it->second.output, ts[0], input);
  s.faults.slow_down(now);
  measure(s, it->second.samples, it->second.forward_s + seconds_since(now));
  s.inflight.erase(it);
  finish_backward(self, h, input_grad, upstream);
  flush_outbox(self);
}

void on_eval(Self* self, MicroBatchHeader h, std::vector<at::Tensor> ts) {
  auto& s = self->state;
  torch::NoGradGuard no_grad;
  torch::Tensor output;
  {
    model::Autocast autocast(s.setup.ctx->config.train.precision, s.device);
    output = s.module->forward(ts[0]);
  }
  if (is_last(s)) {
    self->send(s.setup.tracker, eval_loss_atom::value, h.step, h.micro_batch,
               model::lm_loss(output, ts[1]).item<double>());
    return;
  }
  // Replicas agree at evaluation points, so the first worker of the next stage serves. With
  // none (the pipeline is paused) the tracker starts the evaluation again later.
  if (s.next_ids.empty()) return;
  h.stage = s.setup.stage + 1;
  send_hop(self, s.by_id.at(s.next_ids.at(0)), std::move(h), {output, ts[1]}, Traffic::activations);
}

}  // namespace swarmrt::actors::worker
