#include "actors/stage_worker.hpp"

#include <spdlog/spdlog.h>
#include <torch/csrc/autograd/autograd.h>
#include <torch/utils.h>
#include <limits>
#include <thread>

#include "actors/tensor_list.hpp"
#include "model/diloco.hpp"
#include "model/optim.hpp"
#include "model/threads.hpp"
#include "transport/bulk.hpp"

namespace swarmrt::actors {
using namespace swarmrt::atoms;
using messages::Direction;
using messages::Frame;
using messages::MicroBatchHeader;
using Self = caf::stateful_actor<worker_state>;

namespace {

// No answer from the group on a round's all-reduce within transport.comm_timeout_s.
using go_timeout_atom = caf::atom_constant<caf::atom("gotimeout")>;

bool is_last(const worker_state& s) {
  return static_cast<int64_t>(s.setup.stage) == s.setup.ctx->stages() - 1;
}

void send_hop(Self* self, const caf::actor& to, MicroBatchHeader h, std::vector<at::Tensor> ts,
              Traffic kind) {
  auto& s = self->state;
  // Fault injection: the hop is lost on the way; the tracker re-runs the micro-batch when it
  // does not come back (supervision.microbatch_timeout_s).
  if (const double p = s.setup.ctx->config.chaos.drop_fraction;
      p > 0 && std::uniform_real_distribution<double>(0.0, 1.0)(s.chaos_rng) < p) {
    ++s.dropped;
    return;
  }
  auto& bytes = *s.setup.ctx->bytes;
  bytes.add(kind, messages::payload_bytes(ts));
  auto frame = messages::make_frame(std::move(h), std::move(ts));
  bytes.add(Traffic::control, frame.header.size());
  const auto device = s.device_of.find(to.address());
  if (s.links.send(self, to, device == s.device_of.end() ? nullptr : &device->second,
                   messages::FrameKind::microbatch, frame))
    return;
  for (auto& t : frame.tensors) t = t.to(at::kCPU);  // frames carry host memory
  transport::send_frame(self, to, messages::FrameKind::microbatch, std::move(frame));
}

// Fault injection: stretch the time just spent computing by slow_factor.
void slow_down(const worker_state& s, worker_state::Clock::time_point started) {
  if (s.setup.slow_factor <= 1.0) return;
  const auto spent = worker_state::Clock::now() - started;
  std::this_thread::sleep_for(spent * (s.setup.slow_factor - 1.0));
}

// Sends queued forward hops while the next stage has free slots.
void flush_outbox(Self* self) {
  auto& s = self->state;
  while (!s.outbox.empty()) {
    const auto& front = s.outbox.front().header;
    std::optional<uint32_t> pinned;
    if (front.pin.size() > s.setup.stage + 1 && front.pin[s.setup.stage + 1] != messages::kNoWorker)
      pinned = front.pin[s.setup.stage + 1];
    auto pick = s.next.choose(static_cast<double>(front.samples), pinned);
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
    self->send(s.setup.tracker, done_atom::value, h.step, h.micro_batch, h.attempt, s.setup.id);
    return;
  }
  MicroBatchHeader up = h;
  up.direction = Direction::backward;
  up.stage = s.setup.stage - 1;
  send_hop(self, upstream, std::move(up), {input_grad}, Traffic::gradients);
}

void on_forward(Self* self, MicroBatchHeader h, std::vector<at::Tensor> ts,
                const caf::actor& upstream) {
  auto& s = self->state;
  const auto started = worker_state::Clock::now();
  const auto& ctx = *s.setup.ctx;
  auto input = s.setup.stage == 0 ? ts[0] : ts[0].detach().requires_grad_(true);
  auto output = s.module->forward(input);
  h.route.push_back(s.setup.id);
  ++s.forwards;
  if (is_last(s)) {
    auto loss = model::lm_loss(output, ts[1]);
    // Seed backward with this micro-batch's share of the step's samples: the accumulated
    // gradient is then the step mean, exactly as the single-process trainer computes it.
    auto seeded = loss * (static_cast<double>(h.samples) / static_cast<double>(ctx.step_samples()));
    auto input_grad = backward(self, h, seeded, {}, input);
    self->send(s.setup.tracker, loss_atom::value, h.step, h.micro_batch, h.attempt,
               loss.item<double>(), h.route);
    slow_down(s, started);
    finish_backward(self, h, input_grad, upstream);
    return;
  }
  const worker_state::Key key{h.step, h.micro_batch, h.attempt};
  s.inflight[key] = {input, output, {}, h.samples, upstream, std::nullopt};
  slow_down(s, started);
  s.outbox.push_back({key, std::move(h), {output.detach(), ts[1]}});
  flush_outbox(self);
}

void on_backward(Self* self, const MicroBatchHeader& h, std::vector<at::Tensor> ts) {
  auto& s = self->state;
  const worker_state::Key key{h.step, h.micro_batch, h.attempt};
  auto it = s.inflight.find(key);
  if (it == s.inflight.end() || h.route.size() <= s.setup.stage + 1) {
    ++s.stale;  // an attempt this worker no longer holds: dropped
    return;
  }
  const auto now = worker_state::Clock::now();
  s.next.completed(h.route[s.setup.stage + 1], it->second.samples, it->second.sent, now);
  auto input = it->second.input;
  auto upstream = it->second.upstream;
  if (!ts[0].sizes().equals(it->second.output.sizes())) {
    ++s.rejected;
    spdlog::warn("worker {}: backward for {}/{} has shape {}, output was {}", s.setup.id, h.step,
                 h.micro_batch, c10::str(ts[0].sizes()), c10::str(it->second.output.sizes()));
    s.inflight.erase(it);
    return;
  }
  auto input_grad = backward(self, h, it->second.output, ts[0], input);
  slow_down(s, now);
  s.inflight.erase(it);
  finish_backward(self, h, input_grad, upstream);
  flush_outbox(self);
}

void on_eval(Self* self, MicroBatchHeader h, std::vector<at::Tensor> ts) {
  auto& s = self->state;
  torch::NoGradGuard no_grad;
  auto output = s.module->forward(ts[0]);
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

std::vector<at::Tensor> grads_or_zeros(const std::vector<torch::Tensor>& params) {
  std::vector<at::Tensor> out;
  for (const auto& p : params) out.push_back(p.grad().defined() ? p.grad() : at::zeros_like(p));
  return out;
}

void report_norm(Self* self) {
  auto& s = self->state;
  if (s.setup.keep_grads) {
    s.last_grads.clear();
    auto named = s.module->named_parameters();
    for (const auto& item : named)
      s.last_grads.emplace_back(item.key(), item.value().grad().defined()
                                                ? item.value().grad().clone()
                                                : at::zeros_like(item.value()));
  }
  self->send(s.setup.tracker, norm_atom::value, s.step, s.setup.stage, s.setup.id,
             model::grad_sqnorm(s.params), s.samples);
}

// Fault injection (chaos.nan_worker): the first tensor of a send carries a NaN. A copy, so
// the worker's own gradient or parameters stay finite: only its peers must refuse it.
void poison(std::vector<at::Tensor>& tensors) {
  if (tensors.empty() || tensors[0].numel() == 0) return;
  tensors[0] = tensors[0].clone();
  tensors[0].view(-1)[0] = std::numeric_limits<float>::quiet_NaN();
}

// Grad-sync modes: this worker's share of the stage's gradient to the averager, which sends
// the sum back (grads_atom). Kept in the parameters' grads until then.
void send_gradient(Self* self) {
  auto& s = self->state;
  auto grads = grads_or_zeros(s.params);
  for (auto& g : grads) g = g.to(at::kCPU);  // the averager sums in host memory
  if (s.setup.nan_at_step > 0 && s.step == static_cast<uint64_t>(s.setup.nan_at_step))
    poison(grads);
  s.setup.ctx->bytes->add(Traffic::gradients, messages::payload_bytes(grads));
  s.sum_pending = true;
  self->send(s.setup.averager, grads_atom::value, s.step, s.setup.id, s.samples,
             messages::TensorList{{}, std::move(grads), {}});
}

void load_global(Self* self, const messages::Frame& f, const messages::RoundHeader& h) {
  auto& s = self->state;
  model::NamedTensors theta;
  for (size_t i = 0; i < f.tensors.size(); ++i)
    theta.emplace_back(h.tensor_names[i], f.tensors[i].to(s.device).clone());
  model::assign_parameters(*s.module, theta);
  s.anchor = std::move(theta);
  s.round = h.round_id + 1;
}

// DiLoCo: `delta` becomes the mean of the group's pseudo-gradients, all-reduced over the
// group's communicator in one flat buffer. False, with the communicator dropped, when there is
// none or the all-reduce fails (a member gone, a timeout): the worker reports its own then.
bool group_mean(Self* self, model::NamedTensors& delta) {
  auto& s = self->state;
  if (!s.group_comm || s.group_comm->ranks() < 2 ||
      s.group_ids.size() != static_cast<size_t>(s.group_comm->ranks()))
    return false;
  try {
    std::vector<at::Tensor> flat;
    for (const auto& [name, t] : delta) flat.push_back(t.reshape({-1}));
    auto buffer = at::cat(flat);
    s.group_comm->all_reduce_sum(buffer);
    buffer.div_(static_cast<double>(s.group_comm->ranks()));
    int64_t offset = 0;
    for (auto& [name, t] : delta) {
      const auto n = t.numel();
      t = buffer.narrow(0, offset, n).view(t.sizes()).clone();
      offset += n;
    }
    ++s.group_reduces;
    return true;
  } catch (const std::exception& e) {
    ++s.group_failures;
    spdlog::warn("worker {}: the group all-reduce failed, it reports its own pseudo-gradient: {}",
                 s.setup.id, e.what());
    s.group_comm.reset();
    return false;
  }
}

// DiLoCo: sends round `s.round`'s pseudo-gradient `delta` (of `step`) to the group. With
// `reduce` it is first all-reduced over the group's communicator, and of the workers in the
// mean only the first sends it.
void send_round(Self* self, uint64_t step, model::NamedTensors delta, bool reduce) {
  auto& s = self->state;
  const bool mean = reduce && group_mean(self, delta);
  if (s.group_comm && !mean) ++s.group_fallbacks;
  messages::RoundHeader rh;
  rh.round_id = s.round;
  rh.stage = s.setup.stage;
  rh.contributor = s.setup.id;
  rh.step = step;
  if (mean) rh.contributors = s.group_ids;
  std::vector<at::Tensor> tensors;
  for (auto& [name, t] : delta) {
    rh.tensor_names.push_back(name);
    tensors.push_back(t.to(at::kCPU));  // the group keeps θ in host memory
  }
  const auto H = static_cast<uint64_t>(s.setup.ctx->config.diloco.inner_steps);
  const auto nan_step = static_cast<uint64_t>(s.setup.nan_at_step);
  if (nan_step > 0 && nan_step <= step && nan_step + H > step) poison(tensors);
  auto frame = messages::make_round_frame(rh, std::move(tensors));
  // Kept by every worker in a group mean: sent again to a restarted group.
  s.pending_round = frame;
  if (mean && s.group_comm->rank() != 0) return;  // the first worker sends the mean
  auto& bytes = *s.setup.ctx->bytes;
  bytes.add(Traffic::pseudo_gradients, messages::payload_bytes(frame.tensors));
  bytes.add(Traffic::control, frame.header.size());
  transport::send_frame(self, s.setup.group, messages::FrameKind::round, std::move(frame));
}

// The round held for the group's answer goes out now, all-reduced or (reduce = false) alone.
void release_round(Self* self, bool reduce) {
  auto& s = self->state;
  if (!s.awaiting_go) return;
  auto a = std::move(*s.awaiting_go);
  s.awaiting_go.reset();
  send_round(self, a.step, std::move(a.delta), reduce && a.epoch == s.group_epoch);
}

void on_frame(Self* self, const Frame& frame, const caf::actor& upstream) {
  auto& s = self->state;
  MicroBatchHeader h;
  try {
    h = messages::open_frame(frame);
    const size_t want = h.direction == Direction::backward ? 1 : 2;
    if (h.stage != s.setup.stage || frame.tensors.size() != want)
      throw messages::DecodeError("frame for stage " + std::to_string(h.stage) + " with " +
                                  std::to_string(frame.tensors.size()) + " tensors reached stage " +
                                  std::to_string(s.setup.stage));
    if (h.direction != Direction::backward && s.setup.stage == 0 &&
        frame.tensors[0].scalar_type() != at::kLong)
      throw messages::DecodeError("stage 0 needs int64 token ids");
  } catch (const messages::DecodeError& e) {
    ++s.rejected;
    spdlog::warn("worker {} rejected a frame: {}", s.setup.id, e.what());
    return;
  }
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

// Takes a state handed out by a peer, the DiLoCo group or a checkpoint (see WorkerSetup).
void load_state(Self* self, const messages::WorkerState& st) {
  auto& s = self->state;
  for (const auto* list : {&st.params, &st.anchor})
    if (!list->error.empty())
      throw std::runtime_error("worker " + std::to_string(s.setup.id) + ": state from " +
                               st.source + " was refused: " + list->error);
  if (!st.params.tensors.empty()) model::assign_parameters(*s.module, to_named(st.params));
  if (s.setup.ctx->diloco()) {
    s.anchor = st.anchor.tensors.empty() ? model::parameters_of(*s.module) : to_named(st.anchor);
    for (auto& [name, t] : s.anchor) t = t.to(s.device).clone();
  }
  if (!st.optimizer.empty()) model::load_optimizer_bytes(*s.optimizer, st.optimizer, s.device);
  if (st.round >= 0) s.round = static_cast<uint64_t>(st.round);
  if (!st.params.tensors.empty())
    spdlog::info("worker {} (stage {}) took its state from {}", s.setup.id, s.setup.stage,
                 st.source);
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
  s.optimizer->zero_grad();
}

void on_round(Self* self, const Frame& frame) {
  auto& s = self->state;
  messages::RoundHeader h;
  try {
    h = messages::open_round_frame(frame);
  } catch (const messages::DecodeError& e) {
    ++s.rejected;
    spdlog::warn("worker {} rejected a round frame: {}", s.setup.id, e.what());
    return;
  }
  if (!s.pending_round) {
    // A round applied without this worker (it joined or restarted while the round was
    // collected): it takes θ(t), but it has no step to report applied.
    if (h.status == messages::RoundStatus::applied && h.round_id + 1 > s.round) {
      if (s.inflight.empty())
        load_global(self, frame, h);
      else
        s.missed_round = frame;  // loaded after this step's optimizer step
    }
    return;
  }
  s.pending_round.reset();
  if (h.status == messages::RoundStatus::rejected) {
    // The step is still done, so the tracker must not wait for this worker. A round that was
    // applied without it (it joined or was restarted while the round closed) left it behind:
    // it takes the group's θ and round again. Otherwise it keeps its local parameters and the
    // next applied round brings θ.
    spdlog::warn("worker {}: round {} refused my contribution: {}", s.setup.id, h.round_id,
                 h.reason);
    if (h.reason.find("already applied") != std::string::npos && s.setup.group)
      self->request(s.setup.group, std::chrono::seconds(60), state_atom::value)
          .await([=](const messages::WorkerState& st) { load_state(self, st); },
                 [=](const caf::error&) {});
    self->send(s.setup.tracker, applied_atom::value, s.step, s.setup.id);
    return;
  }
  load_global(self, frame, h);
  self->send(s.setup.tracker, applied_atom::value, s.step, s.setup.id);
}

void on_bulk(Self* self, const transport::BulkDelivery& d) {
  auto& s = self->state;
  if (!d.error.empty()) {
    ++s.rejected;
    return;
  }
  if (d.kind == messages::FrameKind::microbatch)
    on_frame(self, d.frame, d.sender);
  else
    on_round(self, d.frame);
}

}  // namespace

caf::behavior stage_worker(Self* self, WorkerSetup setup) {
  auto& s = self->state;
  s.setup = std::move(setup);
  s.chaos_rng.seed(static_cast<uint64_t>(s.setup.ctx->config.chaos.seed) * 1000003u + s.setup.id);
  const auto& cfg = s.setup.ctx->config;
  // OpenMP's thread count is per thread: set it on this (detached) worker's own thread.
  model::set_compute_threads(static_cast<int>(cfg.train.threads));
  s.module = model::GPT(model::GPTConfig::from(cfg.model),
                        model::StageSpec{s.setup.stage, cfg.swarm.stages},
                        static_cast<uint64_t>(cfg.train.seed));
  s.device = at::Device(s.setup.device);
  s.module->to(s.device);
  s.module->train();
  s.optimizer = model::make_adamw(*s.module, cfg.train);
  s.params = s.module->parameters();
  s.next = Wiring(cfg.swarm.wiring, static_cast<uint64_t>(cfg.train.seed) * 7919 + s.setup.id,
                  static_cast<int>(cfg.swarm.max_inflight));
  s.next.set_measure(s.setup.ctx->wiring_measure);
  if (s.setup.ctx->diloco()) {
    s.anchor = model::parameters_of(*s.module);  // host copies: θ(t-1) lives where θ does
    for (auto& [name, t] : s.anchor) t = t.to(s.device);
  }
  s.links.configure("worker " + std::to_string(s.setup.id), cfg.transport.links, s.setup.device,
                    cfg.transport.comm_timeout_s);
  // A worker may start in a swarm that is already training (a restart, a late join, a
  // resumed run): it takes its stage's state before it handles anything else. At the start
  // of a fresh run the state handed out is the initialization it already holds.
  // The tracker hands out a live peer's state, the DiLoCo group's θ or a checkpoint's.
  if (s.setup.tracker && s.setup.take_state) {
    self->request(s.setup.tracker, std::chrono::minutes(10), state_atom::value, s.setup.stage,
                  s.setup.id)
        .await(
            [=](const messages::WorkerState& st) { load_state(self, st); },
            [=](const caf::error& e) {
              throw std::runtime_error("worker " + std::to_string(self->state.setup.id) +
                                       " got no state to start from: " + self->system().render(e));
            });
  }
  // Bad input is refused inside the frame handler; anything else that throws ends the worker
  // with the reason logged, and the tracker, which monitors every worker, fails the run
  // with that reason instead of waiting for it.
  self->set_exception_handler([](caf::scheduled_actor* a, std::exception_ptr& eptr) -> caf::error {
    try {
      std::rethrow_exception(eptr);
    } catch (const std::exception& e) {
      spdlog::error("{}: {}", a->name(), e.what());
    } catch (...) {
      spdlog::error("{}: unknown exception", a->name());
    }
    return caf::sec::runtime_error;
  });

  return {
      [=](members_atom, const messages::Membership& m) {
        auto& s = self->state;
        // A handle can arrive empty: the actor's node went down before this message was
        // read here (its proxy cannot be made). Such a member is skipped.
        std::map<caf::actor_addr, std::string> live;
        for (const auto& stage : m.stages)
          for (const auto& member : stage) {
            if (!member.handle) continue;
            s.by_id[member.id] = member.handle;
            s.device_of[member.handle.address()] = member.device;
            live[member.handle.address()] = "worker " + std::to_string(member.id);
            transport::register_endpoint(member.handle.node(), member.endpoint);
          }
        s.links.members(std::move(live));
        s.next_ids.clear();
        if (s.setup.stage + 1 < m.stages.size())
          for (const auto& member : m.stages[s.setup.stage + 1])
            if (member.handle) s.next_ids.push_back(member.id);
        s.next.set_members(s.next_ids);
        flush_outbox(self);
      },
      [=](frame_atom, const Frame& frame) {
        on_frame(self, frame, caf::actor_cast<caf::actor>(self->current_sender()));
      },
      [=](round_atom, const Frame& frame) { on_round(self, frame); },
      [=](chunk_atom, const std::vector<uint8_t>& chunk) {
        auto& s = self->state;
        auto complete = s.chunks.add(chunk, "worker " + std::to_string(s.setup.id));
        if (!complete) {
          if (s.chunks.refused() > s.refused_chunks) ++s.rejected;
          s.refused_chunks = s.chunks.refused();
          return;
        }
        if (complete->kind == messages::FrameKind::microbatch)
          on_frame(self, complete->frame, caf::actor_cast<caf::actor>(self->current_sender()));
        else
          on_round(self, complete->frame);
      },
      // The DiLoCo group's communicator from now on: its first worker creates it and sends the
      // others its id; an empty backend means none.
      [=](group_comm_atom, uint64_t epoch, const std::string& backend,
          const std::vector<caf::actor>& handles, const std::vector<uint32_t>& ids) {
        auto& s = self->state;
        if (epoch < s.group_epoch) return;
        if (epoch > s.group_epoch) {
          // A round held for the old communicator's answer goes alone: a group that was
          // restarted knows nothing of it (the same group has answered it already).
          release_round(self, false);
          s.group_comm.reset();
          s.group_epoch = epoch;
        }
        s.group_backend = backend;
        s.group_ids = ids;
        if (backend.empty() || handles.empty() || handles[0].address() != self->address() ||
            s.group_comm)
          return;
        try {
          auto [comm, id] = transport::create_comm(backend, static_cast<int>(handles.size()),
                                                   s.links.comm_options());
          for (size_t k = 1; k < handles.size(); ++k)
            self->send(handles[k], group_join_atom::value, epoch, backend, id,
                       static_cast<int32_t>(k), ids);
          s.group_comm = std::move(comm);
        } catch (const std::exception& e) {
          spdlog::warn("worker {}: no group communicator: {}", s.setup.id, e.what());
        }
      },
      [=](group_join_atom, uint64_t epoch, const std::string& backend,
          const std::vector<uint8_t>& id, int32_t rank, const std::vector<uint32_t>& ids) {
        auto& s = self->state;
        if (epoch < s.group_epoch) return;
        if (epoch > s.group_epoch) release_round(self, false);  // as for group_comm_atom
        s.group_epoch = epoch;
        s.group_backend = backend;
        s.group_ids = ids;
        try {
          s.group_comm = transport::join_comm(backend, id, static_cast<int>(ids.size()), rank,
                                              s.links.comm_options());
        } catch (const std::exception& e) {
          s.group_comm.reset();
          spdlog::warn("worker {}: cannot join the group communicator: {}", s.setup.id, e.what());
        }
      },
      // A peer in another process opened a communicator link to this worker.
      [=](link_atom, uint64_t link, const std::string& backend, const std::vector<uint8_t>& id) {
        auto& s = self->state;
        const auto why = s.links.join(caf::actor_cast<caf::actor_addr>(self->current_sender()),
                                      link, backend, id);
        if (!why.empty()) {
          ++s.rejected;
          spdlog::warn("worker {} cannot join a {} link: {}", s.setup.id, backend, why);
        }
      },
      // A hop whose tensors are on a link: they are received before it is handled.
      [=](comm_atom, uint64_t link, uint8_t kind, const std::vector<uint8_t>& header) {
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
        if (static_cast<messages::FrameKind>(kind) == messages::FrameKind::microbatch)
          on_frame(self, *frame, caf::actor_cast<caf::actor>(self->current_sender()));
        else
          on_round(self, *frame);
      },
      [=](transport::bulk_atom, uint64_t id) {
        if (auto d = transport::claim_bulk(self, id)) on_bulk(self, *d);
      },
      [=](transport::bulk_ready_atom, uint64_t id) {
        if (auto d = transport::take_bulk(id)) on_bulk(self, *d);
      },
      [=](reduce_atom, uint64_t step) {
        auto& s = self->state;
        s.step = step;
        const auto& ctx = *s.setup.ctx;
        if (ctx.diloco()) {
          // Local replica: normalize by the samples this worker backpropagated.
          if (s.samples > 0)
            model::scale_grads(
                s.params, static_cast<double>(ctx.step_samples()) / static_cast<double>(s.samples));
          report_norm(self);
        } else if (s.setup.averager) {
          send_gradient(self);
        } else {
          // The only worker of its stage: after a fault the stage may have backpropagated
          // more or fewer samples than the step holds; its gradient is their mean.
          if (s.samples > 0 && s.samples != ctx.step_samples())
            model::scale_grads(
                s.params, static_cast<double>(ctx.step_samples()) / static_cast<double>(s.samples));
          report_norm(self);
        }
      },
      [=](grads_atom, uint64_t step, const messages::TensorList& sum) {
        auto& s = self->state;
        if (step != s.step || sum.tensors.size() != s.params.size()) return;
        s.sum_pending = false;
        torch::NoGradGuard no_grad;
        for (size_t i = 0; i < s.params.size(); ++i) {
          if (!s.params[i].grad().defined())
            s.params[i].mutable_grad() = at::zeros_like(s.params[i]);
          s.params[i].grad().copy_(sum.tensors[i]);
        }
        report_norm(self);
      },
      [=](apply_atom, uint64_t step, double lr, double coef) {
        auto& s = self->state;
        const auto& ctx = *s.setup.ctx;
        // A restarted tracker sends the step's apply again (its predecessor died while the
        // workers applied): taken once; a worker that has taken it says so again, unless its
        // round is still open (it reports when the round answers).
        if (step <= s.applied_step) {
          if (!s.pending_round && !s.awaiting_go)
            self->send(s.setup.tracker, applied_atom::value, step, s.setup.id);
          return;
        }
        if (step != s.step) {
          // It did not reduce this step (it joined or restarted while the tracker was
          // being restarted): it took no data, so there is nothing to apply.
          self->send(s.setup.tracker, applied_atom::value, step, s.setup.id);
          return;
        }
        s.applied_step = step;
        if (coef < 0)
          model::clip_grad_norm(s.params, ctx.config.train.grad_clip);  // local clip
        else
          model::scale_grads(s.params, coef);
        const bool took_data = s.samples > 0 || ctx.grad_sync();
        if (took_data) {
          model::set_lr(*s.optimizer, lr);
          s.optimizer->step();
        }
        s.optimizer->zero_grad();
        s.samples = 0;
        if (s.missed_round) {
          auto missed = std::move(*s.missed_round);
          s.missed_round.reset();
          const auto mh = messages::open_round_frame(missed);
          if (mh.round_id + 1 > s.round) load_global(self, missed, mh);
        }
        s.accumulated.clear();
        for (auto it = s.min_attempt.begin(); it != s.min_attempt.end();)
          it = it->first.first <= step ? s.min_attempt.erase(it) : std::next(it);
        const bool round_due =
            ctx.diloco() && (step % ctx.config.diloco.inner_steps == 0 ||
                             static_cast<int64_t>(step) == ctx.config.train.steps);
        if (!round_due) {
          self->send(s.setup.tracker, applied_atom::value, step, s.setup.id);
          return;
        }
        auto delta = model::pseudo_gradient(s.anchor, *s.module);
        if (s.group_backend.empty()) return send_round(self, step, std::move(delta), false);
        // The group has a communicator: an all-reduce waits for every rank, so it starts only
        // when the group has heard that every worker of it is at this round.
        const bool usable = s.group_comm && s.group_comm->ranks() >= 2 &&
                            s.group_ids.size() == static_cast<size_t>(s.group_comm->ranks());
        self->send(s.setup.group, group_ready_atom::value, s.round, s.group_epoch, usable);
        if (!usable) return send_round(self, step, std::move(delta), false);
        s.awaiting_go = worker_state::AwaitingGo{s.round, s.group_epoch, step, std::move(delta)};
        self->delayed_send(self,
                           std::chrono::milliseconds(
                               static_cast<int64_t>(ctx.config.transport.comm_timeout_s * 1000)),
                           go_timeout_atom::value, s.round, s.group_epoch);
      },
      // The group's answer for a round held for it: all-reduce, or send this worker's own.
      [=](group_go_atom, uint64_t round, uint64_t epoch, bool go) {
        auto& s = self->state;
        if (!s.awaiting_go || s.awaiting_go->round != round || s.awaiting_go->epoch != epoch)
          return;
        release_round(self, go);
      },
      [=](go_timeout_atom, uint64_t round, uint64_t epoch) {
        auto& s = self->state;
        if (!s.awaiting_go || s.awaiting_go->round != round || s.awaiting_go->epoch != epoch)
          return;
        ++s.group_failures;
        spdlog::warn(
            "worker {}: no answer from the group on round {} within {} s; it reports "
            "its own pseudo-gradient",
            s.setup.id, round, s.setup.ctx->config.transport.comm_timeout_s);
        release_round(self, false);
      },
      [=](params_atom) { return to_list(model::parameters_of(*self->state.module)); },
      // Answers whether this worker holds the micro-batch's gradient of this step.
      [=](cancel_atom, uint64_t step, uint32_t mb, uint32_t attempt) {
        cancel(self, step, mb, attempt);
        return self->state.accumulated.count({step, mb}) > 0;
      },
      // A restarted tracker opens `step` again from its first micro-batch, with attempts from
      // `floor`: everything this worker did in it is dropped (no worker has applied it).
      [=](reset_atom, uint64_t step, uint32_t floor) {
        reset_step(self, step, floor);
        return true;
      },
      // This worker's state for a restarted or joining peer (asked between steps).
      [=](state_atom) {
        auto& s = self->state;
        messages::WorkerState st;
        st.params = to_list(model::parameters_of(*s.module));
        if (s.setup.ctx->diloco()) st.anchor = to_list(s.anchor, /*clone=*/true);
        st.optimizer = model::optimizer_bytes(*s.optimizer);
        st.round = s.setup.ctx->diloco() ? static_cast<int64_t>(s.round) : -1;
        st.source = "peer " + std::to_string(s.setup.id);
        return st;
      },
      // A supervisor restarted the stage's DiLoCo group or gradient averager.
      [=](replaced_atom, const std::string& kind, uint32_t stage, const caf::actor& handle) {
        auto& s = self->state;
        if (stage != s.setup.stage) return;
        if (kind == "group") {
          s.setup.group = handle;
          // The dead group took the workers' readiness with it: this round goes alone.
          release_round(self, false);
          // The contribution the dead group had not applied goes to its successor, which
          // continues from the last round it applied: the round is applied once, not lost.
          if (s.pending_round)
            transport::send_frame(self, handle, messages::FrameKind::round, *s.pending_round);
        }
        if (kind == "averager") {
          s.setup.averager = handle;
          // The dead averager's partial sum is gone: the new one needs this gradient again.
          if (s.sum_pending) send_gradient(self);
        }
      },
      [=](slow_atom, double factor) { self->state.setup.slow_factor = factor; },
      [=](grads_atom) { return to_list(self->state.last_grads); },
      [=](stats_atom) {
        auto& s = self->state;
        return caf::make_message(s.setup.id, s.rejected, s.forwards, s.stale, s.links.frames_in(),
                                 s.group_reduces, s.group_fallbacks, s.group_failures);
      },
      [=](faults_atom) {
        auto& s = self->state;
        return caf::make_message(s.stale, s.recomputed, s.dropped);
      },
  };
}

}  // namespace swarmrt::actors
