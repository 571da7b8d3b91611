// A stage worker's side of closing a step: its gradient reduced (by the stage's averager in
// grad-sync modes, else by its own sample count), the norm reported, the inner optimizer step
// the tracker applies; the state a restarted or joining peer takes; attempts cancelled and a
// step reopened after a fault (architecture §7).
#include <spdlog/spdlog.h>
#include <torch/utils.h>
#include <cstring>
#include <limits>
#include <utility>

#include "actors/common/tensor_list.hpp"
#include "actors/stage/worker_internal.hpp"
#include "model/diloco.hpp"
#include "model/optim.hpp"
#include "model/precision.hpp"
#include "model/sparse_grads.hpp"

namespace swarmrt::actors::worker {
using namespace swarmrt::atoms;

namespace {

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
  s.faults.misbehave(s.step, grads);  // chaos.malicious: no-op for an honest worker
  if (s.setup.ctx->sparse_grads(s.step)) {
    // The residual moves on only with a gradient the step will use (an overflowed one's step
    // is skipped swarm-wide); a step reopened after the send restores it (reset_step).
    if (s.sum_pending)
      s.grad_residual = s.grad_residual_before;  // sent again, to a restarted averager
    else
      s.grad_residual_before = s.grad_residual;
    auto residual = s.grad_residual;
    grads =
        model::encode_sparse_grads(grads, residual, model::warmup_topk(s.setup.ctx->config.diloco));
    if (!s.overflowed) s.grad_residual = std::move(residual);
  }
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
  if (!ctx.sparse_grads(step)) s.grad_residual.clear();  // the warm-up's is over
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
  if (step != s.step) return;
  auto grads = sum.tensors;
  if (s.setup.ctx->sparse_grads(step)) {
    try {
      grads = model::sum_sparse_answer(sum.tensors, model::warmup_topk(s.setup.ctx->config.diloco),
                                       s.params);
    } catch (const std::invalid_argument& e) {
      spdlog::error("worker {}: the averager's sparse answer for step {} was refused: {}",
                    s.setup.id, step, e.what());
      return;
    }
  }
  if (grads.size() != s.params.size()) return;
  s.sum_pending = false;
  torch::NoGradGuard no_grad;
  for (size_t i = 0; i < s.params.size(); ++i) {
    if (!s.params[i].grad().defined()) s.params[i].mutable_grad() = at::zeros_like(s.params[i]);
    s.params[i].grad().copy_(grads[i]);
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
  forget_checked(self, step, /*from_step=*/false);
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
  // chaos.malicious = stale: the liar keeps its parameters and says it took the step.
  if (took_data && !s.faults.stale(step)) {
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

namespace {
constexpr const char* kGradResidual = "grad/";

// A sparse warm-up's error feedback travels in the state's residual beside the rounds' (which
// start only after the warm-up), each as "grad/" and its parameter's name.
void give_grad_residual(Self* self, messages::WorkerState& st) {
  auto& s = self->state;
  if (s.grad_residual.empty()) return;
  const auto names = s.module->named_parameters().keys();
  for (size_t i = 0; i < s.grad_residual.size() && i < names.size(); ++i)
    if (s.grad_residual[i].defined()) {
      st.residual.names.push_back(kGradResidual + names[i]);
      st.residual.tensors.push_back(s.grad_residual[i].clone());
    }
  st.residual_of = static_cast<int64_t>(s.setup.id);
}

// Only its own: a peer's unsent gradient, sent again, would count twice.
void take_grad_residual(Self* self, const messages::WorkerState& st) {
  auto& s = self->state;
  s.grad_residual.clear();
  if (st.residual_of != static_cast<int64_t>(s.setup.id)) return;
  const auto names = s.module->named_parameters().keys();
  for (size_t k = 0; k < st.residual.names.size(); ++k) {
    const auto& name = st.residual.names[k];
    if (name.rfind(kGradResidual, 0) != 0) continue;
    const auto it = std::find(names.begin(), names.end(), name.substr(std::strlen(kGradResidual)));
    if (it == names.end()) continue;
    const auto i = static_cast<size_t>(it - names.begin());
    const auto& t = st.residual.tensors[k];
    if (t.numel() != s.params[i].numel())
      throw std::runtime_error("worker " + std::to_string(s.setup.id) + ": state from " +
                               st.source + " was refused: its residual of " + name + " has " +
                               std::to_string(t.numel()) + " values, the parameter " +
                               std::to_string(s.params[i].numel()));
    s.grad_residual.resize(names.size());
    s.grad_residual[i] = t.to(at::kFloat).reshape({-1}).clone();
  }
}
}  // namespace

// Takes a state handed out by a peer, the DiLoCo group or a checkpoint (see WorkerSetup).
void load_state(Self* self, const messages::WorkerState& st) {
  auto& s = self->state;
  for (const auto* list : {&st.params, &st.anchor, &st.moments, &st.residual})
    if (!list->error.empty())
      throw std::runtime_error("worker " + std::to_string(s.setup.id) + ": state from " +
                               st.source + " was refused: " + list->error);
  if (!st.params.tensors.empty()) model::assign_parameters(*s.module, to_named(st.params));
  if (s.replica)
    s.replica->take_state(
        st, st.anchor.tensors.empty() ? model::parameters_of(*s.module) : to_named(st.anchor));
  if (!st.optimizer.empty()) model::load_optimizer_bytes(*s.optimizer, st.optimizer, s.device);
  if (!st.moments.tensors.empty())
    model::load_adamw_moments(*s.optimizer, to_named(st.moments), s.device);
  // Its parameters are those after `step`: so is this worker now (a node that keeps its state
  // when the coordinator is lost says which step it holds; see state_of).
  if (st.step >= 0) s.applied_step = static_cast<uint64_t>(st.step);
  take_grad_residual(self, st);
  if (!st.params.tensors.empty())
    spdlog::info("worker {} (stage {}) took its state from {}", s.setup.id, s.setup.stage,
                 st.source);
}

// This worker's state for a restarted or joining peer (asked between steps).
messages::WorkerState state_of(Self* self, bool canonical) {
  auto& s = self->state;
  messages::WorkerState st;
  st.params = to_list(model::parameters_of(*s.module));
  st.round = -1;
  if (s.replica) s.replica->give_state(st);
  if (canonical) {
    st.moments = to_list(model::adamw_moments(*s.optimizer));
    // A snapshot's bytes are equal on every donor of one state; the error feedback is each
    // worker's own, which no other worker takes.
    st.residual = {};
    st.residual_of = -1;
  } else {
    st.optimizer = model::optimizer_bytes(*s.optimizer);
    give_grad_residual(self, st);
  }
  st.source =
      canonical ? "stage " + std::to_string(s.setup.stage) : "peer " + std::to_string(s.setup.id);
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
  if (s.sum_pending) s.grad_residual = s.grad_residual_before;  // its send is dropped
  forget_checked(self, step, /*from_step=*/true);
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
