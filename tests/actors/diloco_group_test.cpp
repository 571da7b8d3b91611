// A real DiLoCo group actor, driven by two scoped actors standing in as the stage's workers.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include "actor_test_util.hpp"
#include "actors/diloco_group.hpp"

using namespace swarmrt;
using namespace swarmrt::atoms;
using messages::RoundHeader;
using messages::RoundStatus;

namespace {
messages::Frame contribution(uint64_t round, uint32_t worker, at::Tensor delta) {
  RoundHeader h;
  h.round_id = round;
  h.stage = 0;
  h.contributor = worker;
  h.status = RoundStatus::contribution;
  h.tensor_names = {"w"};
  return messages::make_round_frame(h, {std::move(delta)});
}

// The next round frame the scoped actor receives.
std::pair<RoundHeader, messages::Frame> next_round(caf::scoped_actor& self) {
  std::pair<RoundHeader, messages::Frame> out;
  self->receive(
      [&](round_atom, const messages::Frame& f) {
        out = {messages::open_round_frame(f), f};
      },
      caf::after(std::chrono::seconds(10)) >> [&] { ADD_FAILURE() << "no round frame"; });
  return out;
}
}  // namespace

TEST(DilocoGroup, AppliesEachRoundOnceAndRejectsLateContributions) {
  swarmrt::testing::TestSystem ts;
  auto ctx = std::make_shared<actors::SwarmContext>();
  ctx->config.diloco.outer_lr = 0.7;
  ctx->config.diloco.outer_momentum = 0.9;
  caf::scoped_actor a{*ts.sys}, b{*ts.sys};
  auto group = ts.sys->spawn(actors::diloco_group, std::shared_ptr<const actors::SwarmContext>(ctx),
                             uint32_t{0}, model::NamedTensors{{"w", at::tensor({1.0f, 2.0f})}},
                             std::make_shared<actors::GroupStore>());
  messages::Membership m;
  m.stages = {
      {{1, 0, caf::actor_cast<caf::actor>(a), {}}, {2, 0, caf::actor_cast<caf::actor>(b), {}}}};
  a->send(group, members_atom::value, m);

  a->send(group, round_atom::value, contribution(0, 1, at::tensor({0.2f, 0.0f})));
  b->send(group, round_atom::value, contribution(0, 2, at::tensor({0.0f, 0.4f})));
  // Both workers get θ(1) = θ − 0.7 (Δ + 0.9 Δ) with Δ = (0.1, 0.2).
  for (auto* self : {&a, &b}) {
    auto [h, f] = next_round(*self);
    EXPECT_EQ(h.status, RoundStatus::applied);
    EXPECT_EQ(h.round_id, 0u);
    EXPECT_TRUE(at::allclose(f.tensors[0], at::tensor({1.0f - 1.33f * 0.1f, 2.0f - 1.33f * 0.2f})));
  }
  // A late contribution for round 0 is rejected, and so is one for a future round.
  a->send(group, round_atom::value, contribution(0, 1, at::tensor({5.0f, 5.0f})));
  auto [late, f1] = next_round(a);
  EXPECT_EQ(late.status, RoundStatus::rejected);
  EXPECT_NE(late.reason.find("already applied"), std::string::npos) << late.reason;
  a->send(group, round_atom::value, contribution(4, 1, at::tensor({5.0f, 5.0f})));
  auto [early, f2] = next_round(a);
  EXPECT_EQ(early.status, RoundStatus::rejected);
  EXPECT_NE(early.reason.find("collecting round 1"), std::string::npos) << early.reason;
  // A stranger and a malformed frame change nothing.
  a->send(group, round_atom::value, contribution(1, 99, at::tensor({5.0f, 5.0f})));
  auto [stranger, f3] = next_round(a);
  EXPECT_EQ(stranger.status, RoundStatus::rejected);
  a->send(group, round_atom::value, messages::Frame{{1, 2, 3}, {}});

  a->request(group, caf::infinite, stats_atom::value)
      .receive(
          [&](int64_t last_applied, uint64_t rejected) {
            EXPECT_EQ(last_applied, 0);  // round 0 applied exactly once
            EXPECT_EQ(rejected, 4u);
          },
          [&](const caf::error& e) { FAIL() << ts.sys->render(e); });
  a->request(group, caf::infinite, params_atom::value)
      .receive(
          [&](const messages::TensorList& theta) {
            EXPECT_TRUE(at::allclose(theta.tensors[0], at::tensor({1.0f - 0.133f, 2.0f - 0.266f})));
          },
          [&](const caf::error& e) { FAIL() << ts.sys->render(e); });
  a->send_exit(group, caf::exit_reason::user_shutdown);
}
