// The group's communicator on the replica's side (replica.hpp): where the group announces one
// (whole-stage full-precision rounds: actors/diloco/group_comm.cpp), a round's Δ waits until
// the group says every worker of the communicator is at the round (group_go_atom), is
// all-reduced among them, and only the first sends the mean. Without an answer in
// transport.comm_timeout_s, or when the all-reduce fails, the replica sends its own.
#include <spdlog/spdlog.h>

#include "actors/diloco/replica.hpp"
#include "transport/transport.hpp"

namespace swarmrt::actors {
using namespace swarmrt::atoms;

void DilocoReplica::ask_group(Self* self, uint64_t step, std::vector<at::Tensor> delta, bool last) {
  const auto& cfg = setup_.ctx->config;
  const uint64_t round = fragments_[0].round;
  // An all-reduce waits for every rank, so it starts only when the group has heard that every
  // worker of it is at this round.
  const bool usable =
      comm_ && comm_->ranks() >= 2 && ids_.size() == static_cast<size_t>(comm_->ranks());
  self->send(setup_.group, group_ready_atom::value, round, epoch_, usable);
  if (!usable) {
    send_round(self, 0, step, std::move(delta), nullptr, last, false);
    return;
  }
  awaiting_go_ = AwaitingGo{round, epoch_, step, last, std::move(delta)};
  self->delayed_send(self, config::as_duration(cfg.transport.comm_timeout_s), go_timer_atom::value,
                     round, epoch_);
}

bool DilocoReplica::group_mean(std::vector<at::Tensor>& delta) {
  if (!comm_ || comm_->ranks() < 2 || ids_.size() != static_cast<size_t>(comm_->ranks()))
    return false;
  try {
    std::vector<at::Tensor> flat;
    for (const auto& t : delta) flat.push_back(t.reshape({-1}));
    auto buffer = at::cat(flat);  // one all-reduce for the whole stage
    comm_->all_reduce_sum(buffer);
    buffer.div_(static_cast<double>(comm_->ranks()));
    int64_t offset = 0;
    for (auto& t : delta) {
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

void DilocoReplica::release_round(Self* self, bool reduce) {
  if (!awaiting_go_) return;
  auto a = std::move(*awaiting_go_);
  awaiting_go_.reset();
  const bool mean = reduce && a.epoch == epoch_ && group_mean(a.delta);
  send_round(self, 0, a.step, std::move(a.delta), nullptr, a.last, mean);
}

void DilocoReplica::on_group_comm(Self* self, const messages::GroupComm& c) {
  if (c.epoch < epoch_) return;
  if (c.epoch > epoch_) {
    // A round held for the old communicator's answer goes alone: a group that was restarted
    // knows nothing of it (the same group has answered it already).
    release_round(self, false);
    comm_.reset();
    epoch_ = c.epoch;
  }
  backend_ = c.backend;
  ids_ = c.ids;
  if (c.backend.empty() || c.handles.empty() || c.handles[0].address() != self->address() || comm_)
    return;
  try {
    auto [comm, id] =
        transport::create_comm(c.backend, static_cast<int>(c.handles.size()), setup_.comm_options);
    for (size_t k = 1; k < c.handles.size(); ++k)
      self->send(c.handles[k], group_join_atom::value,
                 messages::GroupJoin{c.epoch, c.backend, id, static_cast<int32_t>(k), c.ids});
    comm_ = std::move(comm);
  } catch (const std::exception& e) {
    spdlog::warn("worker {}: no group communicator: {}", setup_.id, e.what());
  }
}

void DilocoReplica::on_group_join(Self* self, const messages::GroupJoin& j) {
  if (j.epoch < epoch_) return;
  if (j.epoch > epoch_) release_round(self, false);  // as in on_group_comm
  epoch_ = j.epoch;
  backend_ = j.backend;
  ids_ = j.ids;
  try {
    comm_ = transport::join_comm(j.backend, j.id, static_cast<int>(j.ids.size()), j.rank,
                                 setup_.comm_options);
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

}  // namespace swarmrt::actors
