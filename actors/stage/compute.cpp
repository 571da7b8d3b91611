// A stage worker's compute: forward, backward and evaluation of its layers for each hop, and
// the step's reduce and apply when the tracker closes the step. The parameters' gradients
// take each micro-batch of a step exactly once (architecture §7).
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
  if (h.direction == Direction::eval || !s.setup.tracker) return;
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
                       model::as_duration(policy::report_window_s(
                           s.setup.ctx->config.supervision.microbatch_timeout_s)),
                       flush_atom::value);
  }
}

void send_hop(Self* self, const caf::actor& to, MicroBatchHeader h, std::vector<at::Tensor> ts,
              Traffic kind) {
  auto& s = self->state;
  report_hop(self, h, true, to.address());
  // Fault injection: the hop is lost on the way; the tracker re-runs the micro-batch when it
  // does not come back (supervision.microbatch_timeout_s).
  if (s.faults.drop_hop() || transport::cut_off(to)) return;
  // Hidden states and their gradients in the run's hop encoding (none: as they are).
  const auto& swarm = s.setup.ctx->config.swarm;
  ts[0] = model::encode_hop(ts[0], swarm.hop_encoding, swarm.hop_block, hop_direction(h),
                            rounding_seed(s.setup.ctx->config.train.seed, h));
  h.hop_encoding = static_cast<uint8_t>(swarm.hop_encoding);
  const auto payload = messages::payload_bytes(ts);
  auto frame = messages::make_frame(std::move(h), std::move(ts));
  for (auto* bytes : {s.setup.ctx->bytes.get(), s.sent.get()}) {
    bytes->add(kind, payload);
    bytes->add(Traffic::control, frame.header.size());
  }
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

}  // namespace

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

std::vector<at::Tensor> grads_or_zeros(const std::vector<torch::Tensor>& params) {
  std::vector<at::Tensor> out;
  for (const auto& p : params) out.push_back(p.grad().defined() ? p.grad() : at::zeros_like(p));
  return out;
}

void report_norm(Self* self) {
  auto& s = self->state;
  // An overflowed gradient (its grads may be zeros, see send_gradient) reports an infinite
  // norm: the tracker has every worker skip the step.
  const double sqnorm =
      s.overflowed ? std::numeric_limits<double>::infinity() : model::grad_sqnorm(s.params);
  if (s.setup.keep_grads) {
    s.last_grads.clear();
    auto named = s.module->named_parameters();
    for (const auto& item : named)
      s.last_grads.emplace_back(item.key(), item.value().grad().defined()
                                                ? item.value().grad().clone()
                                                : at::zeros_like(item.value()));
  }
  self->send(s.setup.tracker, norm_atom::value,
             messages::NormReport{s.step, s.setup.stage, s.setup.id, sqnorm, s.samples});
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
  const auto& out = it->second.output;
  try {
    // Checked where the wire is (in host memory it costs nothing), decoded on this device.
    if (swarm.hop_encoding != model::HopEncoding::none)
      model::check_hop(ts[0], swarm.hop_encoding, swarm.hop_block, model::HopDirection::backward,
                       out.sizes(), out.scalar_type(), check_values || ts[0].is_cpu());
    ts[0] = transport::to_device(ts[0], s.device);
    if (swarm.hop_encoding != model::HopEncoding::none)
      ts[0] = model::decode_hop(ts[0], swarm.hop_encoding, swarm.hop_block,
                                model::HopDirection::backward, out.sizes(), out.scalar_type(),
                                /*check_values=*/false);
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

// Grad-sync modes: this worker's share of the stage's gradient to the averager, which sends
// the sum back (grad_sum_atom). Kept in the parameters' grads until then.
void send_gradient(Self* self) {
  auto& s = self->state;
  auto grads = grads_or_zeros(s.params);
  for (auto& g : grads) g = g.to(at::kCPU);  // the averager sums in host memory
  // An overflowed gradient is not the averager's to refuse: the step is skipped swarm-wide
  // (report_norm), and the averager sums zeros in its place.
  if (s.overflowed)
    for (auto& g : grads) g = at::zeros_like(g);
  if (s.faults.poisons_gradient(s.step)) WorkerFaults::poison(grads);
  const auto bytes = messages::payload_bytes(grads);
  s.setup.ctx->bytes->add(Traffic::gradients, bytes);
  s.sent->add(Traffic::gradients, bytes);
  s.sum_pending = true;
  // A capped link to an averager in another process (chaos.link_mbit_s) delivers it later.
  messages::GradsReport report{s.step, s.setup.id, s.samples, {{}, std::move(grads), {}}};
  const auto wire = transport::paced_delay(self->node(), s.setup.averager.node(), bytes);
  transport::send_parcel(self, s.setup.averager, wire, grads_atom::value, std::move(report));
}

// The tracker closed `step`: the gradient is reduced (through the averager, or by this
// worker's own sample count) and its norm reported.
void reduce_step(Self* self, uint64_t step) {
  auto& s = self->state;
  s.step = step;
  const auto& ctx = *s.setup.ctx;
  // The loss scaler's: the gradient back to its true size, and whether it overflowed.
  if (ctx.config.train.scales_loss()) s.overflowed = !model::unscale_grads(s.params, s.loss_scale);
  if (!ctx.syncs_gradients(step)) {
    // Local replica: normalize by the samples this worker backpropagated.
    if (s.samples > 0)
      model::scale_grads(s.params,
                         static_cast<double>(ctx.step_samples()) / static_cast<double>(s.samples));
    report_norm(self);
  } else if (s.setup.averager) {
    send_gradient(self);
  } else {
    // The only worker of its stage: after a fault the stage may have backpropagated
    // more or fewer samples than the step holds; its gradient is their mean.
    if (s.samples > 0 && s.samples != ctx.step_samples())
      model::scale_grads(s.params,
                         static_cast<double>(ctx.step_samples()) / static_cast<double>(s.samples));
    report_norm(self);
  }
}

// The stage's gradient sum from the averager.
void take_sum(Self* self, uint64_t step, const messages::TensorList& sum) {
  auto& s = self->state;
  if (step != s.step || sum.tensors.size() != s.params.size()) return;
  s.sum_pending = false;
  torch::NoGradGuard no_grad;
  for (size_t i = 0; i < s.params.size(); ++i) {
    if (!s.params[i].grad().defined()) s.params[i].mutable_grad() = at::zeros_like(s.params[i]);
    s.params[i].grad().copy_(sum.tensors[i]);
  }
  report_norm(self);
}

// The tracker's apply of `step` with its learning rate and clip coefficient (-1: clip
// locally): the inner optimizer step, then a DiLoCo round when one is due.
void apply_step(Self* self, uint64_t step, double lr, double coef) {
  auto& s = self->state;
  const auto& ctx = *s.setup.ctx;
  // A restarted tracker sends the step's apply again (its predecessor died while the
  // workers applied): taken once; a worker that has taken it says so again, unless its
  // round is still open (it reports when the round answers).
  if (step <= s.applied_step) {
    const bool open = s.replica && s.replica->round_open();
    if (!open) tell_applied(self, s.setup.tracker, step, s.setup.id, ctx);
    return;
  }
  if (step != s.step) {
    // It did not reduce this step (it joined or restarted while the tracker was
    // being restarted): it took no data, so there is nothing to apply.
    tell_applied(self, s.setup.tracker, step, s.setup.id, ctx);
    return;
  }
  s.applied_step = step;
  // kSkipStep: the loss scaler found the gradient overflowed somewhere; it is dropped below.
  const bool skip = coef == kSkipStep;
  if (!skip) {
    if (coef < 0)
      model::clip_grad_norm(s.params, ctx.config.train.grad_clip);  // local clip
    else
      model::scale_grads(s.params, coef);
  }
  s.overflowed = false;
  const bool took_data = !skip && (s.samples > 0 || ctx.syncs_gradients(step));
  if (took_data) {
    model::set_lr(*s.optimizer, lr);
    model::adamw_step(*s.optimizer);
  }
  model::zero_grads(*s.optimizer);
  s.samples = 0;
  if (s.replica) s.replica->load_missed(s.module);
  s.accumulated.clear();
  for (auto it = s.min_attempt.begin(); it != s.min_attempt.end();)
    it = it->first.first <= step ? s.min_attempt.erase(it) : std::next(it);
  const bool held = s.replica && s.replica->after_inner_step(self, step, s.module);
  if (!held) tell_applied(self, s.setup.tracker, step, s.setup.id, ctx);
}

// Takes a state handed out by a peer, the DiLoCo group or a checkpoint (see WorkerSetup).
void load_state(Self* self, const messages::WorkerState& st) {
  auto& s = self->state;
  for (const auto* list : {&st.params, &st.anchor})
    if (!list->error.empty())
      throw std::runtime_error("worker " + std::to_string(s.setup.id) + ": state from " +
                               st.source + " was refused: " + list->error);
  if (!st.params.tensors.empty()) model::assign_parameters(*s.module, to_named(st.params));
  if (s.replica)
    s.replica->take_state(
        st, st.anchor.tensors.empty() ? model::parameters_of(*s.module) : to_named(st.anchor));
  if (!st.optimizer.empty()) model::load_optimizer_bytes(*s.optimizer, st.optimizer, s.device);
  // Its parameters are those after `step`: so is this worker now (a node that keeps its state
  // when the coordinator is lost says which step it holds; see state_of).
  if (st.step >= 0) s.applied_step = static_cast<uint64_t>(st.step);
  if (!st.params.tensors.empty())
    spdlog::info("worker {} (stage {}) took its state from {}", s.setup.id, s.setup.stage,
                 st.source);
}

// This worker's state for a restarted or joining peer (asked between steps).
messages::WorkerState state_of(Self* self) {
  auto& s = self->state;
  messages::WorkerState st;
  st.params = to_list(model::parameters_of(*s.module));
  st.round = -1;
  if (s.replica) s.replica->give_state(st);
  st.optimizer = model::optimizer_bytes(*s.optimizer);
  st.source = "peer " + std::to_string(s.setup.id);
  // Parameters change only when a step is applied (gradients accumulate beside them), so
  // between any two messages they are those after the last applied step.
  st.step = static_cast<int64_t>(s.applied_step);
  return st;
}

// Drops every attempt of (step, mb) below `attempt`: its autograd state, its queued hop, its
// slot at the next stage. The tracker re-runs the micro-batch from stage 0 as `attempt`.
void cancel(Self* self, uint64_t step, uint32_t mb, uint32_t attempt) {
  auto& s = self->state;
  auto& floor = s.min_attempt[{step, mb}];
  floor = std::max(floor, attempt);
  for (auto it = s.inflight.lower_bound({step, mb, 0});
       it != s.inflight.end() && std::get<0>(it->first) == step && std::get<1>(it->first) == mb &&
       std::get<2>(it->first) < attempt;) {
    if (it->second.to) s.next.release(*it->second.to);
    it = s.inflight.erase(it);
  }
  s.outbox.erase(std::remove_if(s.outbox.begin(), s.outbox.end(),
                                [&](const worker_state::Outgoing& o) {
                                  return std::get<0>(o.key) == step && std::get<1>(o.key) == mb &&
                                         std::get<2>(o.key) < attempt;
                                }),
                 s.outbox.end());
  flush_outbox(self);
}

// The open step starts again (a restarted tracker): its micro-batches, queued hops, slots
// downstream and accumulated gradient are dropped, and attempts below `floor` stay dropped.
void reset_step(Self* self, uint64_t step, uint32_t floor) {
  auto& s = self->state;
  if (s.applied_step >= step) {
    spdlog::error("worker {}: asked to reopen step {}, which it has applied already", s.setup.id,
                  step);
    return;
  }
  for (auto it = s.inflight.begin(); it != s.inflight.end();) {
    if (std::get<0>(it->first) < step) {
      ++it;
      continue;
    }
    if (it->second.to) s.next.release(*it->second.to);
    it = s.inflight.erase(it);
  }
  s.outbox.erase(
      std::remove_if(s.outbox.begin(), s.outbox.end(),
                     [&](const worker_state::Outgoing& o) { return std::get<0>(o.key) >= step; }),
      s.outbox.end());
  s.accumulated.clear();
  for (uint32_t mb = 0; mb < static_cast<uint32_t>(s.setup.ctx->config.train.micro_batches); ++mb) {
    auto& f = s.min_attempt[{step, mb}];
    f = std::max(f, floor);
  }
  s.samples = 0;
  s.sum_pending = false;
  s.overflowed = false;
  model::zero_grads(*s.optimizer);
}

}  // namespace swarmrt::actors::worker
