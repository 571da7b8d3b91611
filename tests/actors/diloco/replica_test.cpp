// Plain DiLoCo's replica inside an actor, driven step by step against scoped actors standing in
// as the stage's group and the tracker.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include "../actor_test_util.hpp"
#include "../run_util.hpp"
#include "actors/diloco/replica.hpp"
#include "replica_driver.hpp"

using namespace swarmrt;
using namespace swarmrt::atoms;
using namespace swarmrt::testing;

namespace {

// Whether the tracker has heard that the held step is applied (what it has is all in: it was
// sent before the driver's answer the caller waited for).
bool heard_applied(caf::scoped_actor& tracker) {
  bool heard = false;
  tracker->receive(
      [&](applied_atom, uint64_t, uint32_t, const messages::ProcessBytes&) { heard = true; },
      caf::after(std::chrono::seconds(0)) >> [] {});
  return heard;
}

}  // namespace

// A group restarted while this worker's round 1 is pending sends every member θ of the last
// round it applied (round 0): that is not the answer to round 1. Before, the replica took it as
// one: it went back to θ(0), told the tracker the step was applied and sent its next round
// under an id the group had applied already, so a round was lost (SchedulesKilled.
// GroupAtTheChange_plain, 3 runs in 30). Now it waits for round 1's answer, which brings θ(1).
TEST(DilocoReplica, ASuccessorsThetaOfAnEarlierRoundIsNotThePendingRoundsAnswer) {
  TestSystem ts;
  auto ctx = std::make_shared<actors::SwarmContext>();
  ctx->config = micro_run("diloco", 1, 1, 1000);
  ctx->config.diloco.inner_steps = 2;
  caf::scoped_actor group{*ts.sys}, tracker{*ts.sys}, self{*ts.sys};
  auto worker =
      ts.sys->spawn(driver<actors::DilocoReplica>, actors::ContextPtr(ctx),
                    caf::actor_cast<caf::actor>(group), caf::actor_cast<caf::actor>(tracker));
  EXPECT_FALSE(inner(self, worker, 1));
  EXPECT_TRUE(inner(self, worker, 2));
  auto [r0, f0] = next_contribution(group);
  EXPECT_EQ(r0.round_id, 0u);
  self->send(worker, round_atom::value, answer(r0, 1.0f));
  (void)params_of(self, worker);
  EXPECT_TRUE(heard_applied(tracker));

  EXPECT_FALSE(inner(self, worker, 3));
  EXPECT_TRUE(inner(self, worker, 4));
  auto [r1, f1] = next_contribution(group);
  EXPECT_EQ(r1.round_id, 1u);
  self->send(worker, round_atom::value, answer(r0, 5.0f));  // the successor's θ(0)
  const auto local = params_of(self, worker);
  EXPECT_FALSE(heard_applied(tracker));
  for (const auto& [name, t] : local)  // θ(0) + two inner steps, not the successor's θ(0)
    EXPECT_TRUE(at::allclose(t, at::full_like(t, 1.02f))) << name;

  self->send(worker, round_atom::value, answer(r1, 3.0f));
  const auto after = params_of(self, worker);
  EXPECT_TRUE(heard_applied(tracker));
  for (const auto& [name, t] : after) EXPECT_TRUE(at::equal(t, at::full_like(t, 3.0f))) << name;
  EXPECT_FALSE(inner(self, worker, 5));
  EXPECT_TRUE(inner(self, worker, 6));
  EXPECT_EQ(next_contribution(group).first.round_id, 2u);
}
