#include "actors/membership/state_keeper.hpp"

#include <spdlog/spdlog.h>

#include "supervisors/entitled.hpp"
#include "transport/relay.hpp"

namespace swarmrt::actors {
using namespace swarmrt::atoms;

bool keeps_states(const SwarmContext& ctx) {
  return ctx.grad_sync() || (ctx.diloco() && ctx.config.diloco.whole_rounds());
}

size_t KeptStates::keep(uint32_t stage, messages::WorkerState st, bool each_worker) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!each_worker)
    for (const auto& k : kept_)
      if (k.stage == stage && k.state.step == st.step) return 0;
  // Its own copy: the worker it came from may still run until the node stops it.
  size_t bytes = st.optimizer.size();
  for (auto* list : {&st.params, &st.anchor})
    for (auto& t : list->tensors) {
      t = t.clone();
      bytes += t.nbytes();
    }
  kept_.push_back({stage, std::move(st)});
  return bytes;
}

void KeptStates::name_in(messages::JoinRequest& request, const caf::actor& keeper) const {
  std::lock_guard<std::mutex> lock(mu_);
  request.held_stages.clear();
  request.held_steps.clear();
  request.keeper = kept_.empty() ? caf::actor{} : keeper;
  for (const auto& k : kept_) {
    request.held_stages.push_back(k.stage);
    request.held_steps.push_back(k.state.step);
  }
}

std::optional<messages::WorkerState> KeptStates::find(uint32_t stage, int64_t step) const {
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& k : kept_)
    if (k.stage == stage && k.state.step == step) return k.state;
  return std::nullopt;
}

std::optional<messages::WorkerState> KeptStates::next(uint32_t stage, int64_t step) {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<const Kept*> of;
  for (const auto& k : kept_)
    if (k.stage == stage && k.state.step == step) of.push_back(&k);
  if (of.empty()) return std::nullopt;
  return of[turn_[{stage, step}]++ % of.size()]->state;
}

size_t KeptStates::clear() {
  std::lock_guard<std::mutex> lock(mu_);
  const size_t n = kept_.size();
  kept_.clear();
  turn_.clear();
  return n;
}

void KeptStates::serve(const caf::node_id& coordinator) {
  std::lock_guard<std::mutex> lock(mu_);
  coordinator_ = coordinator;
}

bool KeptStates::serves(const caf::node_id& sender) const {
  std::lock_guard<std::mutex> lock(mu_);
  return coordinator_ != caf::node_id{} && sender == coordinator_;
}

namespace {

// The state of (stage, step), or why there is none.
caf::expected<messages::WorkerState> kept_state(KeptStates& kept, uint32_t stage, int64_t step) {
  if (auto st = kept.next(stage, step)) {
    st->source = "the state a node kept of stage " + std::to_string(stage) + " at step " +
                 std::to_string(step);
    return std::move(*st);
  }
  return caf::make_error(caf::sec::runtime_error, "this node keeps no state of stage " +
                                                      std::to_string(stage) + " at step " +
                                                      std::to_string(step));
}

}  // namespace

caf::behavior state_keeper(caf::event_based_actor* self, KeptStatesPtr kept) {
  // Only the coordinator this node joined reads a kept state or drops them.
  auto entitled = [=](const char* what) {
    const auto& sender = self->current_sender();
    if (sender && (kept->serves(sender->node()) || sender->node() == self->node())) return true;
    supervisors::rejected(self, "the node's state keeper", what);
    return false;
  };
  return {
      [=](held_state_atom, uint32_t stage, int64_t step) -> caf::result<messages::WorkerState> {
        if (!entitled("a kept state")) return caf::sec::request_receiver_down;
        auto st = kept_state(*kept, stage, step);
        if (!st) return st.error();
        return std::move(*st);
      },
      // The same from the coordinator's process (transport/relay.hpp): answered here in slices,
      // before any later drop is read.
      [=](relay_atom, const caf::actor& collector, uint64_t, held_state_atom, uint32_t stage,
          int64_t step) {
        if (!entitled("a kept state")) return;
        auto st = kept_state(*kept, stage, step);
        if (!st)
          self->send(collector, relay_fail_atom::value, self->system().render(st.error()));
        else
          transport::send_relay_slices(self, collector, *st);
      },
      [=](drop_held_atom) {
        if (!entitled("drop the kept states")) return;
        if (const size_t n = kept->clear())
          spdlog::info("node: dropped the {} stage state(s) it kept since its coordinator was lost",
                       n);
      },
  };
}

}  // namespace swarmrt::actors
