// A worker reduced to its DiLoCo replica, for tests that drive a replica step by step against
// scoped actors standing in as the stage's group and the tracker.
#pragma once

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <caf/all.hpp>
#include <chrono>
#include <utility>

#include "actors/common/tensor_list.hpp"
#include "messages/frame.hpp"
#include "model/stage_model.hpp"

namespace swarmrt::testing {

using inner_atom = caf::atom_constant<caf::atom("inner")>;

// `inner` adds 0.01 to every parameter (the inner step) and then runs the replica's
// after-inner-step; round frames go to the replica (never busy: no micro-batch in flight).
template <class Replica>
struct replica_driver_state {
  Replica replica;
  model::StageModel module{nullptr};
  static inline const char* name = "replica_driver";
};

template <class Replica>
caf::behavior driver(caf::stateful_actor<replica_driver_state<Replica>>* self,
                     actors::ContextPtr ctx, caf::actor group, caf::actor tracker) {
  auto& s = self->state;
  const auto& cfg = ctx->config;
  s.module = model::make_stage_model(cfg.model, model::StageSpec{0, 1}, 1);
  s.replica.configure({ctx, 7, 0, tracker, group, at::Device(at::kCPU), {}, nullptr, nullptr},
                      s.module);  // θ(t−1) from the module's parameters
  return {
      [=](inner_atom, uint64_t step) {
        auto& s = self->state;
        {
          at::NoGradGuard no_grad;
          for (auto& p : s.module->parameters()) p.add_(0.01);
        }
        return s.replica.after_inner_step(self, step, s.module);
      },
      [=](atoms::round_atom, const messages::Frame& f) {
        auto& s = self->state;
        s.replica.on_round(self, f, s.module, false, [](const messages::WorkerState&) {});
      },
      [=](atoms::params_atom) {
        return actors::to_list(model::parameters_of(*self->state.module), true);
      },
  };
}

// The group's answer to contribution `c`: θ_global = `value` everywhere (θ itself, not an
// update), of round `c.round_id`.
inline messages::Frame answer(const messages::RoundHeader& c, float value) {
  messages::RoundHeader h = c;
  h.status = messages::RoundStatus::applied;
  std::vector<at::Tensor> theta;
  for (const auto& m : c.tensors) theta.push_back(at::full(m.shape, value));
  return messages::make_round_frame(h, std::move(theta));
}

inline std::pair<messages::RoundHeader, messages::Frame> next_contribution(
    caf::scoped_actor& group) {
  std::pair<messages::RoundHeader, messages::Frame> out;
  group->receive(
      [&](atoms::round_atom, const messages::Frame& f) {
        out = {messages::open_round_frame(f), f};
      },
      caf::after(std::chrono::seconds(10)) >> [&] { ADD_FAILURE() << "no contribution"; });
  return out;
}

// Runs inner step `step` on the driver; whether the replica holds the step for a round.
inline bool inner(caf::scoped_actor& self, const caf::actor& worker, uint64_t step) {
  bool held = false;
  self->request(worker, std::chrono::seconds(10), inner_atom::value, step)
      .receive([&](bool h) { held = h; },
               [&](const caf::error& e) { ADD_FAILURE() << to_string(e); });
  return held;
}

inline model::NamedTensors params_of(caf::scoped_actor& self, const caf::actor& worker) {
  model::NamedTensors out;
  self->request(worker, std::chrono::seconds(10), atoms::params_atom::value)
      .receive([&](const messages::TensorList& l) { out = actors::to_named(l); },
               [&](const caf::error& e) { ADD_FAILURE() << to_string(e); });
  return out;
}

}  // namespace swarmrt::testing
