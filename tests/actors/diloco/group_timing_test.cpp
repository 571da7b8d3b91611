// The DiLoCo group message by message on CAF's deterministic test scheduler and its clock: the
// test decides when each contribution arrives and when round_timeout_s has passed, so the
// quorum after the timeout (policy/round_quorum.hpp) and a restarted group finishing the round
// its predecessor was collecting are seen exactly.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include "../deterministic.hpp"

#include "actors/diloco/diloco_group.hpp"
#include "actors/runtime/runtime.hpp"
#include "round_util.hpp"

using namespace swarmrt;
using namespace swarmrt::atoms;
using namespace std::chrono_literals;
using messages::RoundHeader;
using messages::RoundStatus;

namespace {

using Rounds = std::shared_ptr<std::vector<RoundHeader>>;

// A stand-in for a stage worker: keeps the header of every round frame it is sent.
caf::behavior puppet(caf::event_based_actor*, Rounds rounds) {
  return {
      [rounds](round_atom, const messages::Frame& f) {
        rounds->push_back(messages::open_round_frame(f));
      },
  };
}

messages::Frame contribution(uint64_t round, uint32_t worker, float value) {
  return swarmrt::testing::contribution(round, worker, at::full({2}, value));
}

size_t applied(const Rounds& r, uint64_t round) {
  return static_cast<size_t>(std::count_if(r->begin(), r->end(), [&](const RoundHeader& h) {
    return h.status == RoundStatus::applied && h.round_id == round;
  }));
}

struct GroupFixture : ::testing::Test, swarmrt::testing::DeterministicSystem {
  std::shared_ptr<actors::SwarmContext> ctx = std::make_shared<actors::SwarmContext>();
  actors::GroupStorePtr store = std::make_shared<actors::GroupStore>();
  std::vector<Rounds> logs;
  std::vector<caf::actor> workers;
  caf::actor group;

  void SetUp() override {
    ctx->config.diloco.min_replicas = 2;
    ctx->config.diloco.round_timeout_s = 5;
    for (uint32_t i = 0; i < 3; ++i) {
      logs.push_back(std::make_shared<std::vector<RoundHeader>>());
      workers.push_back(sys->spawn(puppet, logs.back()));
    }
    group = spawn_group();
  }

  // A group of stage 0 over the fixture's store (a restarted group continues from it), told
  // the three workers 1, 2 and 3.
  caf::actor spawn_group() {
    auto g =
        sys->spawn(actors::diloco_group, std::shared_ptr<const actors::SwarmContext>(ctx),
                   uint32_t{0}, model::NamedTensors{{"w", at::zeros({2})}}, store, caf::actor{});
    messages::Membership m;
    m.version = 1;
    m.stages = {{{1, 0, workers[0], "", "cpu"},
                 {2, 0, workers[1], "", "cpu"},
                 {3, 0, workers[2], "", "cpu"}}};
    caf::anon_send(g, members_atom::value, m);
    sched->run();
    return g;
  }

  // From the worker's own actor, as a worker sends it (a refusal goes back to it).
  void contribute(uint64_t round, uint32_t worker, float value) {
    caf::send_as(workers[worker - 1], group, round_atom::value, contribution(round, worker, value));
    sched->run();
  }

  void wait(std::chrono::milliseconds d) {
    sched->advance_time(d);
    sched->run();
  }

  void TearDown() override {
    for (const auto& a : workers) caf::anon_send_exit(a, caf::exit_reason::kill);
    caf::anon_send_exit(group, caf::exit_reason::kill);
    sched->run();
    sched->trigger_timeouts();
    sched->run();
  }
};

}  // namespace

TEST_F(GroupFixture, AQuorumOfMinReplicasAppliesTheRoundOnlyAfterTheTimeout) {
  contribute(0, 1, 1.0f);
  contribute(0, 2, 3.0f);
  wait(4900ms);
  EXPECT_EQ(applied(logs[0], 0), 0u) << "applied before round_timeout_s without worker 3";
  wait(100ms);
  // Every member hears θ(1), the one that did not contribute too.
  for (const auto& log : logs) EXPECT_EQ(applied(log, 0), 1u);
  std::lock_guard<std::mutex> lock(store->mu);
  EXPECT_EQ(store->last_applied, 0);
  EXPECT_EQ(store->applied_rounds, (std::vector<uint64_t>{0}));
}

TEST_F(GroupFixture, BelowMinReplicasTheTimeoutWaitsForMore) {
  contribute(0, 1, 1.0f);
  wait(5000ms);
  EXPECT_EQ(applied(logs[0], 0), 0u) << "one contribution is below min_replicas = 2";
  // A second one arms the timer again: the round applies one timeout after it.
  contribute(0, 2, 3.0f);
  wait(4900ms);
  EXPECT_EQ(applied(logs[0], 0), 0u);
  wait(100ms);
  EXPECT_EQ(applied(logs[0], 0), 1u);
}

TEST_F(GroupFixture, EveryMemberInAppliesAtOnce) {
  contribute(0, 1, 1.0f);
  contribute(0, 2, 3.0f);
  contribute(0, 3, 5.0f);
  for (const auto& log : logs) EXPECT_EQ(applied(log, 0), 1u);
}

TEST_F(GroupFixture, ARestartedGroupFinishesTheRoundItsPredecessorWasCollecting) {
  contribute(0, 1, 1.0f);
  // The group dies with round 0 half collected; its successor starts from the store, which
  // holds no applied round, and the workers send their unanswered contributions again.
  caf::anon_send_exit(group, caf::exit_reason::kill);
  sched->run();
  group = spawn_group();
  contribute(0, 1, 1.0f);
  contribute(0, 2, 3.0f);
  contribute(0, 3, 5.0f);
  for (const auto& log : logs) EXPECT_EQ(applied(log, 0), 1u);
  // Killed again after applying round 0: its successor does not apply round 0 twice when a
  // contribution to it comes again, and collects round 1.
  caf::anon_send_exit(group, caf::exit_reason::kill);
  sched->run();
  group = spawn_group();
  contribute(0, 1, 1.0f);
  for (uint32_t w = 1; w <= 3; ++w) contribute(1, w, 2.0f);
  // (A new group hands every member the last applied θ once, as it would a worker new to the
  // stage: each log holds round 0 twice. The store says what was applied.)
  for (const auto& log : logs) EXPECT_EQ(applied(log, 1), 1u);
  std::lock_guard<std::mutex> lock(store->mu);
  EXPECT_EQ(store->applied_rounds, (std::vector<uint64_t>{0, 1}));
}

// A contribution from no actor (an anonymous message, local or from another process) that the
// group refuses is counted and answered to no one: the group lives on and collects the next
// round. (It once crashed answering the missing sender.)
TEST_F(GroupFixture, AnAnonymousContributionIsRefusedWithoutEndingTheGroup) {
  for (uint32_t w = 1; w <= 3; ++w) contribute(0, w, 1.0f);
  caf::anon_send(group, round_atom::value, contribution(0, 1, 1.0f));  // already applied
  sched->run();
  for (uint32_t w = 1; w <= 3; ++w) contribute(1, w, 2.0f);
  for (const auto& log : logs) EXPECT_EQ(applied(log, 1), 1u);
}
