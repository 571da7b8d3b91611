#include "actors/stage/grad_averager.hpp"

#include <ATen/ATen.h>
#include <spdlog/spdlog.h>
#include <nlohmann/json.hpp>

#include "messages/frame.hpp"
#include "model/checks.hpp"
#include "model/robust_mean.hpp"
#include "model/sparse_grads.hpp"
#include "transport/bulk.hpp"

namespace swarmrt::actors {
using namespace swarmrt::atoms;
using Self = caf::stateful_actor<averager_state>;

namespace {

bool robust(const averager_state& s) {
  return s.ctx->config.swarm.grad_aggregate != config::Aggregate::mean;
}

// The stage's gradient over the whole step: the aggregate of the workers' mean gradients,
// in worker order.
void aggregate_parts(averager_state& s) {
  std::vector<model::NamedTensors> means;
  for (auto& [id, part] : s.parts) {
    model::NamedTensors named;
    for (size_t i = 0; i < part.size(); ++i) named.emplace_back(std::to_string(i), part[i]);
    means.push_back(std::move(named));
  }
  if (means.empty()) return;  // `sum` stays zeros: nothing was backpropagated
  std::vector<const model::NamedTensors*> ptrs;
  for (const auto& m : means) ptrs.push_back(&m);
  auto rule = s.ctx->config.diloco;
  rule.aggregate = s.ctx->config.swarm.grad_aggregate;
  const auto v = model::aggregate(ptrs, rule);
  for (size_t i = 0; i < s.sum.size(); ++i) s.sum[i] = v[i].second;
}

// Sends the stage's gradient once every live worker has reported. Each worker's gradient is
// already scaled by its share of the step's samples; when a fault lost some of them (a dead
// worker's gradient) or a re-run counted some twice, the sum is rescaled so the stage's
// gradient stays the mean over the samples it actually backpropagated.
// A sparse step's answer: every accepted worker's wires, and the factor that makes their sum
// the mean over the samples behind them.
void relay_wires(Self* self) {
  auto& s = self->state;
  const int64_t want = s.ctx->step_samples();
  const double scale = s.samples > 0 && s.samples != want
                           ? static_cast<double>(want) / static_cast<double>(s.samples)
                           : 1.0;
  std::vector<const std::vector<at::Tensor>*> wires;
  for (const auto& [id, w] : s.wires) wires.push_back(&w);
  const auto answer = model::sparse_answer(scale, wires);
  const auto bytes = messages::payload_bytes(answer);
  for (const auto& [id, handle] : s.reported) {
    s.ctx->bytes->add(Traffic::gradients, bytes);
    const auto wire = transport::paced_delay(self->node(), handle.node(), bytes);
    transport::send_parcel(self, handle, wire, grad_sum_atom::value, s.step,
                           messages::TensorList{{}, answer, {}});
  }
  s.sent = true;
}

void maybe_finish(Self* self) {
  auto& s = self->state;
  const bool sparse = s.ctx->sparse_grads(s.step);
  if ((sparse ? s.reported.empty() : s.sum.empty()) || s.sent) return;
  for (const auto& id : s.members)
    if (!s.reported.count(id)) return;
  if (sparse) return relay_wires(self);
  const int64_t want = s.ctx->step_samples();
  if (robust(s))
    aggregate_parts(s);
  else if (s.samples > 0 && s.samples != want)
    for (auto& t : s.sum) t.mul_(static_cast<double>(want) / static_cast<double>(s.samples));
  uint64_t bytes = 0;
  for (const auto& t : s.sum) bytes += static_cast<uint64_t>(t.numel()) * t.element_size();
  for (const auto& [id, handle] : s.reported) {
    s.ctx->bytes->add(Traffic::gradients, bytes);
    // Every worker gets the same sum by reference and copies it into its own gradients;
    // no one writes to it, and the next step starts a new one.
    const auto wire = transport::paced_delay(self->node(), handle.node(), bytes);
    transport::send_parcel(self, handle, wire, grad_sum_atom::value, s.step,
                           messages::TensorList{{}, s.sum, {}});
  }
  s.sent = true;
}

void add_gradient(Self* self, uint64_t step, uint32_t worker, int64_t samples,
                  const messages::TensorList& grads, const caf::actor& from) {
  auto& s = self->state;
  const uint32_t stage = s.stage;
  if (step != s.step) {  // a new step: start a fresh sum
    s.step = step;
    s.reported.clear();
    s.sum.clear();
    s.parts.clear();
    s.wires.clear();
    s.numels.clear();
    s.samples = 0;
    s.sent = false;
  }
  if (!s.members.count(worker) || s.reported.count(worker)) {
    spdlog::warn("averager {}: ignoring gradient from worker {} for step {}", stage, worker, step);
    return;
  }
  // Checked before use (architecture §8): a gradient that does not fit the sum, holds a NaN or Inf,
  // or claims more samples than a step has is refused. The worker still counts as reported
  // (it gets the stage's gradient like every other), but its gradient and samples are left
  // out, as if it had failed in this step; the sum is rescaled to the samples it has.
  std::string why;
  const bool sparse = s.ctx->sparse_grads(step);
  if (!grads.error.empty()) {
    why = grads.error;
  } else if (samples < 0 || samples > s.ctx->step_samples()) {
    why = std::to_string(samples) + " samples claimed, a step has " +
          std::to_string(s.ctx->step_samples());
  } else if (sparse) {
    why = model::check_sparse_grads(grads.tensors, model::warmup_topk(s.ctx->config.diloco),
                                    s.numels);
  } else if (!s.sum.empty() && grads.tensors.size() != s.sum.size()) {
    why = std::to_string(grads.tensors.size()) + " gradients, expected " +
          std::to_string(s.sum.size());
  } else {
    for (size_t i = 0; i < s.sum.size() && why.empty(); ++i)
      if (!grads.tensors[i].sizes().equals(s.sum[i].sizes()) ||
          grads.tensors[i].scalar_type() != s.sum[i].scalar_type())
        why = "gradient #" + std::to_string(i) + " has shape " +
              c10::str(grads.tensors[i].sizes()) + ", expected " + c10::str(s.sum[i].sizes());
    if (why.empty()) why = model::nonfinite_tensor(grads.tensors);
  }
  if (!why.empty()) {
    ++s.refused;
    spdlog::warn("averager {}: refused the gradient of worker {} for step {}: {}", stage, worker,
                 step, why);
    if (s.metrics)
      self->send(s.metrics, metrics_atom::value,
                 nlohmann::json{{"event", "rejected"},
                                {"kind", "gradient"},
                                {"stage", stage},
                                {"worker", worker},
                                {"step", step},
                                {"reason", why}}
                     .dump());
    // The first report fixes the sum's shapes: a refused one starts it at zero.
    if (s.sum.empty() && grads.error.empty() && !sparse)
      for (const auto& g : grads.tensors) s.sum.push_back(at::zeros_like(g));
    s.reported[worker] = from;
    maybe_finish(self);
    return;
  }
  if (sparse) {
    s.wires[worker] = grads.tensors;
  } else if (robust(s)) {
    if (s.sum.empty())
      for (const auto& g : grads.tensors) s.sum.push_back(at::zeros_like(g));
    // Its mean over its own samples (it sent its share, samples / step_samples): a new tensor,
    // as a worker of this process sends its own gradient tensors. Without samples it has none.
    if (samples > 0) {
      const double to_mean =
          static_cast<double>(s.ctx->step_samples()) / static_cast<double>(samples);
      auto& part = s.parts[worker];
      for (const auto& g : grads.tensors) part.push_back(g * to_mean);
    }
  } else if (s.sum.empty()) {
    for (const auto& g : grads.tensors) s.sum.push_back(g.clone());
  } else {
    for (size_t i = 0; i < s.sum.size(); ++i) s.sum[i].add_(grads.tensors[i]);
  }
  s.samples += samples;
  s.reported[worker] = from;
  maybe_finish(self);
}

}  // namespace

caf::behavior grad_averager(Self* self, ContextPtr ctx, uint32_t stage, caf::actor metrics) {
  self->state.metrics = std::move(metrics);
  self->state.ctx = std::move(ctx);
  self->state.stage = stage;
  return {
      [=](members_atom, const messages::Membership& m) {
        auto& s = self->state;
        s.members.clear();
        if (stage < m.stages.size())
          for (const auto& w : m.stages[stage]) s.members.insert(w.id);
        s.has_members = true;
        auto early = std::move(s.early);
        s.early.clear();
        for (auto& e : early) add_gradient(self, e.step, e.worker, e.samples, e.grads, e.from);
        maybe_finish(self);  // a worker that died while the others had reported
      },
      // A restarted tracker opens `step` again: the sum of it so far is dropped (the workers
      // have dropped their gradients and send new ones).
      [=](reset_atom, uint64_t step, uint32_t /* attempt floor: the workers' concern */) {
        auto& s = self->state;
        if (s.step == step) {
          s.reported.clear();
          s.sum.clear();
          s.parts.clear();
          s.wires.clear();
          s.numels.clear();
          s.samples = 0;
          s.sent = false;
        }
        s.early.erase(std::remove_if(s.early.begin(), s.early.end(),
                                     [&](const auto& e) { return e.step >= step; }),
                      s.early.end());
        return true;
      },
      [=](grads_atom, const messages::GradsReport& r) {
        auto& s = self->state;
        const auto from = caf::actor_cast<caf::actor>(self->current_sender());
        if (!s.has_members) {  // restarted: the tracker's membership is on its way
          s.early.push_back({r.step, r.worker, r.samples, r.grads, from});
          return;
        }
        add_gradient(self, r.step, r.worker, r.samples, r.grads, from);
      },
      [=](parcel_atom, uint64_t id, uint32_t index, uint32_t count, uint64_t total,
          const std::vector<uint8_t>& slice) {
        transport::take_parcel(self, id, index, count, total, slice,
                               "averager " + std::to_string(stage));
      },
  };
}

}  // namespace swarmrt::actors
