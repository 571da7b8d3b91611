#include "actors/grad_averager.hpp"

#include <ATen/ATen.h>
#include <spdlog/spdlog.h>

namespace swarmrt::actors {
using namespace swarmrt::atoms;

caf::behavior grad_averager(caf::stateful_actor<averager_state>* self, ContextPtr ctx,
                            uint32_t stage) {
  self->state.ctx = std::move(ctx);
  self->state.stage = stage;
  return {
      [=](members_atom, const messages::Membership& m) {
        auto& s = self->state;
        s.members.clear();
        if (stage < m.stages.size())
          for (const auto& w : m.stages[stage]) s.members.insert(w.id);
      },
      [=](grads_atom, uint64_t step, uint32_t worker, const messages::TensorList& grads) {
        auto& s = self->state;
        if (step != s.step) {  // a new step: start a fresh sum
          s.step = step;
          s.reported.clear();
          s.sum.clear();
        }
        if (!s.members.count(worker) || s.reported.count(worker)) {
          spdlog::warn("averager {}: ignoring gradient from worker {} for step {}", stage, worker,
                       step);
          return;
        }
        if (s.sum.empty()) {
          for (const auto& g : grads.tensors) s.sum.push_back(g.clone());
        } else {
          if (grads.tensors.size() != s.sum.size()) {
            spdlog::warn("averager {}: worker {} sent {} gradients, expected {}", stage, worker,
                         grads.tensors.size(), s.sum.size());
            return;
          }
          for (size_t i = 0; i < s.sum.size(); ++i) s.sum[i].add_(grads.tensors[i]);
        }
        s.reported[worker] = caf::actor_cast<caf::actor>(self->current_sender());
        if (s.reported.size() < s.members.size()) return;
        uint64_t bytes = 0;
        for (const auto& t : s.sum) bytes += static_cast<uint64_t>(t.numel()) * t.element_size();
        for (const auto& [id, handle] : s.reported) {
          s.ctx->bytes->add(Traffic::gradients, bytes);
          // Every worker gets the same sum by reference and copies it into its own gradients;
          // no one writes to it, and the next step starts a new one.
          self->send(handle, grads_atom::value, step, messages::TensorList{{}, s.sum, {}});
        }
      },
  };
}

}  // namespace swarmrt::actors
