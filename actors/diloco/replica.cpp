#include "actors/diloco/replica.hpp"

#include <spdlog/spdlog.h>

#include "actors/common/tensor_list.hpp"
#include "model/diloco.hpp"
#include "model/fragments.hpp"
#include "transport/transport.hpp"

namespace swarmrt::actors {
using namespace swarmrt::atoms;

void DilocoReplica::load_global(model::StageModel& module, const messages::Frame& f,
                                const messages::RoundHeader& h) {
  model::NamedTensors theta;
  for (size_t i = 0; i < f.tensors.size(); ++i)
    theta.emplace_back(h.tensor_names[i], f.tensors[i].to(setup_.device).clone());
  model::assign_parameters(*module, theta);
  anchor_ = std::move(theta);
  round_ = h.round_id + 1;
}

void DilocoReplica::load_missed(model::StageModel& module) {
  if (!missed_) return;
  auto missed = std::move(*missed_);
  missed_.reset();
  const auto h = messages::open_round_frame(missed);
  if (h.round_id + 1 > round_) load_global(module, missed, h);
}

void DilocoReplica::take_state(const messages::WorkerState& st, model::NamedTensors anchor) {
  set_anchor(std::move(anchor));
  if (st.round >= 0) round_ = static_cast<uint64_t>(st.round);
}

void DilocoReplica::give_state(messages::WorkerState& st) const {
  st.anchor = to_list(anchor_, /*clone=*/true);
  st.round = static_cast<int64_t>(round_);
}

bool DilocoReplica::after_inner_step(Self* self, uint64_t step, model::StageModel& module) {
  const auto& cfg = setup_.ctx->config;
  say_when_h_changes(step);
  if (ends_warmup(step)) return start_from_warmup(self, step, module);
  const bool due =
      model::fragment_due(step, 0, cfg.diloco) || static_cast<int64_t>(step) == cfg.train.steps;
  if (!due) return false;
  auto delta = model::pseudo_gradient(anchor_, *module);
  if (backend_.empty()) {
    send_round(self, step, std::move(delta), false);
    return true;
  }
  // The group has a communicator: an all-reduce waits for every rank, so it starts only when
  // the group has heard that every worker of it is at this round.
  const bool usable =
      comm_ && comm_->ranks() >= 2 && ids_.size() == static_cast<size_t>(comm_->ranks());
  self->send(setup_.group, group_ready_atom::value, round_, epoch_, usable);
  if (!usable) {
    send_round(self, step, std::move(delta), false);
    return true;
  }
  awaiting_go_ = AwaitingGo{round_, epoch_, step, std::move(delta)};
  self->delayed_send(self, model::as_duration(cfg.transport.comm_timeout_s), go_timer_atom::value,
                     round_, epoch_);
  return true;
}

// `delta` becomes the mean of the group's pseudo-gradients, all-reduced over the group's
// communicator in one flat buffer. False, with the communicator dropped, when there is none or
// the all-reduce fails (a member gone, a timeout): the replica reports its own then.
bool DilocoReplica::group_mean(model::NamedTensors& delta) {
  if (!comm_ || comm_->ranks() < 2 || ids_.size() != static_cast<size_t>(comm_->ranks()))
    return false;
  try {
    std::vector<at::Tensor> flat;
    for (const auto& [name, t] : delta) flat.push_back(t.reshape({-1}));
    auto buffer = at::cat(flat);
    comm_->all_reduce_sum(buffer);
    buffer.div_(static_cast<double>(comm_->ranks()));
    int64_t offset = 0;
    for (auto& [name, t] : delta) {
      const auto n = t.numel();
      t = buffer.narrow(0, offset, n).view(t.sizes()).clone();
      offset += n;
    }
    ++reduces_;
    return true;
  } catch (const std::exception& e) {
    ++failures_;
    spdlog::warn("worker {}: the group all-reduce failed, it reports its own pseudo-gradient: {}",
                 setup_.id, e.what());
    comm_.reset();
    return false;
  }
}

// Sends round `round_`'s pseudo-gradient `delta` (of `step`) to the group. With `reduce` it is
// first all-reduced over the group's communicator, and of the workers in the mean only the
// first sends it.
void DilocoReplica::send_round(Self* self, uint64_t step, model::NamedTensors delta, bool reduce) {
  const bool mean = reduce && group_mean(delta);
  if (comm_ && !mean) ++fallbacks_;
  messages::RoundHeader rh;
  rh.round_id = round_;
  rh.stage = setup_.stage;
  rh.contributor = setup_.id;
  rh.step = step;
  if (mean) rh.contributors = ids_;
  std::vector<at::Tensor> tensors;
  for (auto& [name, t] : delta) {
    rh.tensor_names.push_back(name);
    tensors.push_back(t.to(at::kCPU));  // the group keeps θ in host memory
  }
  if (setup_.outgoing) setup_.outgoing(step, tensors);
  auto frame = messages::make_round_frame(rh, std::move(tensors));
  // Kept by every worker in a group mean: sent again to a restarted group.
  pending_ = frame;
  if (mean && comm_->rank() != 0) return;  // the first worker sends the mean
  count_sent(Traffic::pseudo_gradients, frame);
  transport::send_frame(self, setup_.group, messages::FrameKind::round, std::move(frame));
}

// The round held for the group's answer goes out now, all-reduced or (reduce = false) alone.
void DilocoReplica::release_round(Self* self, bool reduce) {
  if (!awaiting_go_) return;
  auto a = std::move(*awaiting_go_);
  awaiting_go_.reset();
  send_round(self, a.step, std::move(a.delta), reduce && a.epoch == epoch_);
}

bool DilocoReplica::on_round(Self* self, const messages::Frame& frame, model::StageModel& module,
                             bool busy, uint64_t step, const Reload& reload) {
  const auto opened = open_answer(frame, setup_.id);
  if (!opened) return false;
  const auto& h = *opened;
  if (on_warmup_answer(self, h)) return true;
  if (!pending_) {
    // A round applied without this replica (it joined or restarted while the round was
    // collected): it takes θ(t), but it has no step to report applied. An in-place copy would
    // break the backward of a micro-batch in flight: then it waits for the inner step.
    if (h.status == messages::RoundStatus::applied && h.round_id + 1 > round_) {
      if (!busy)
        load_global(module, frame, h);
      else
        missed_ = frame;
    }
    return true;
  }
  // θ of a round before the pending one is not its answer: a group restarted meanwhile sends
  // every member θ of the last round it applied, and the pending contribution, sent to it
  // again, brings θ of this round when it is applied. Taken as the answer, it would send the
  // worker back a round and release its step with the round still open.
  if (h.status == messages::RoundStatus::applied && h.round_id < round_) return true;
  pending_.reset();
  if (h.status == messages::RoundStatus::rejected) {
    // The step is still done, so the tracker must not wait for this worker. A round that was
    // applied without it (it joined or was restarted while the round closed) left it behind:
    // it takes the group's θ and round again. Otherwise it keeps its local parameters and the
    // next applied round brings θ.
    spdlog::warn("worker {}: round {} refused my contribution: {}", setup_.id, h.round_id,
                 h.reason);
    catch_up_if_behind(self, setup_, h, reload);
    tell_applied(self, setup_.tracker, step, setup_.id, *setup_.ctx);
    return true;
  }
  load_global(module, frame, h);
  tell_applied(self, setup_.tracker, step, setup_.id, *setup_.ctx);
  return true;
}

void DilocoReplica::on_group_comm(Self* self, const messages::GroupComm& c) {
  const auto epoch = c.epoch;
  const auto& backend = c.backend;
  const auto& handles = c.handles;
  const auto& ids = c.ids;
  if (epoch < epoch_) return;
  if (epoch > epoch_) {
    // A round held for the old communicator's answer goes alone: a group that was restarted
    // knows nothing of it (the same group has answered it already).
    release_round(self, false);
    comm_.reset();
    epoch_ = epoch;
  }
  backend_ = backend;
  ids_ = ids;
  if (backend.empty() || handles.empty() || handles[0].address() != self->address() || comm_)
    return;
  try {
    auto [comm, id] =
        transport::create_comm(backend, static_cast<int>(handles.size()), setup_.comm_options);
    for (size_t k = 1; k < handles.size(); ++k)
      self->send(handles[k], group_join_atom::value,
                 messages::GroupJoin{epoch, backend, id, static_cast<int32_t>(k), ids});
    comm_ = std::move(comm);
  } catch (const std::exception& e) {
    spdlog::warn("worker {}: no group communicator: {}", setup_.id, e.what());
  }
}

void DilocoReplica::on_group_join(Self* self, const messages::GroupJoin& j) {
  const auto epoch = j.epoch;
  const auto& backend = j.backend;
  const auto& id = j.id;
  const auto rank = j.rank;
  const auto& ids = j.ids;
  if (epoch < epoch_) return;
  if (epoch > epoch_) release_round(self, false);  // as in on_group_comm
  epoch_ = epoch;
  backend_ = backend;
  ids_ = ids;
  try {
    comm_ =
        transport::join_comm(backend, id, static_cast<int>(ids.size()), rank, setup_.comm_options);
  } catch (const std::exception& e) {
    comm_.reset();
    spdlog::warn("worker {}: cannot join the group communicator: {}", setup_.id, e.what());
  }
}

void DilocoReplica::on_go(Self* self, uint64_t round, uint64_t epoch, bool go) {
  if (!awaiting_go_ || awaiting_go_->round != round || awaiting_go_->epoch != epoch) return;
  release_round(self, go);
}

void DilocoReplica::on_go_timer(Self* self, uint64_t round, uint64_t epoch) {
  if (!awaiting_go_ || awaiting_go_->round != round || awaiting_go_->epoch != epoch) return;
  ++failures_;
  spdlog::warn(
      "worker {}: no answer from the group on round {} within {} s; it reports its own "
      "pseudo-gradient",
      setup_.id, round, setup_.ctx->config.transport.comm_timeout_s);
  release_round(self, false);
}

void DilocoReplica::on_group_replaced(Self* self, const caf::actor& group) {
  setup_.group = group;
  // The dead group took the workers' readiness with it: this round goes alone.
  release_round(self, false);
  // The contribution the dead group had not applied goes to its successor, which continues
  // from the last round it applied: the round is applied once, not lost.
  if (pending_) transport::send_frame(self, group, messages::FrameKind::round, *pending_);
  resend_warmup(self, group);
}

}  // namespace swarmrt::actors
