#include "policy/balancer.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <set>

namespace swarmrt::policy {
namespace {

const std::vector<double> kTwoEqual = {1.0, 1.0};

TEST(Balancer, PipelineRateIsTheSlowestStagesSumAndTheBoundSharesAllSpeed) {
  const std::vector<Peer> peers = {{0, 0, 4}, {1, 1, 1}, {2, 0, 4}, {3, 1, 1}};
  EXPECT_EQ(stage_rates(peers, kTwoEqual), (std::vector<double>{8, 2}));
  EXPECT_EQ(pipeline_rate(peers, kTwoEqual), 2);
  EXPECT_EQ(optimal_bound(peers, kTwoEqual), 5);
  // A stage twice as costly does half the samples with the same workers.
  EXPECT_EQ(stage_rates(peers, {1.0, 2.0}), (std::vector<double>{8, 1}));
}

TEST(Balancer, WithStepsAStagesRateIsItsMicroBatchesOverTheStepsMakespan) {
  // Without steps, the sum. With 4 micro-batches a step, a worker 4x slower than the other adds
  // nothing (the fast one finishes all four when the slow one would finish its first); two
  // equal workers with 3 micro-batches take two rounds: 3 a step in 1 s, not 4.
  EXPECT_EQ(stage_rate({4, 1}, 0), 5);
  EXPECT_EQ(stage_rate({4, 1}, 4), 4);
  EXPECT_EQ(stage_rate({4, 1}, 5), 5);  // the fifth goes to the slow one: 5 in 1 s
  EXPECT_EQ(stage_rate({2, 2}, 4), 4);
  EXPECT_EQ(stage_rate({2, 2}, 3), 3);
  EXPECT_EQ(stage_rate({}, 4), 0);
  // The pipeline the balancer sees: 2 + 2 with the slow worker in stage 1.
  const std::vector<Peer> peers = {{0, 0, 4}, {1, 0, 4}, {1000, 1, 4}, {1001, 1, 1}};
  EXPECT_EQ(stage_rates(peers, Stages({1, 1}, {}, 4)), (std::vector<double>{8, 4}));
  EXPECT_EQ(stage_rates(peers, kTwoEqual), (std::vector<double>{8, 5}));
}

TEST(Balancer, MovesTheWorkerThatRaisesTheSlowestStageMost) {
  // Three workers in stage 0, one in stage 1, all equally fast: one moves to stage 1.
  const std::vector<Peer> peers = {{0, 0, 2}, {1, 0, 2}, {2, 0, 2}, {1000, 1, 2}};
  auto m = best_move(peers, kTwoEqual, {}, 0);
  ASSERT_TRUE(m);
  EXPECT_EQ(m->worker, 0u);  // ties: the lowest id
  EXPECT_EQ(m->from, 0u);
  EXPECT_EQ(m->to, 1u);
  EXPECT_EQ(m->before, 2);
  EXPECT_EQ(m->after, 4);
  EXPECT_DOUBLE_EQ(m->gain, 1.0);
  EXPECT_NE(m->reason.find("stage 1"), std::string::npos) << m->reason;
  // Once moved, 2 + 2: no move raises the pipeline (no oscillation).
  const std::vector<Peer> balanced = {{0, 1, 2, 0}, {1, 0, 2}, {2, 0, 2}, {1000, 1, 2}};
  EXPECT_FALSE(best_move(balanced, kTwoEqual, {}, 1000));
}

TEST(Balancer, PrefersTheMoveWithTheLargestGainNotTheFirst) {
  // Stage 0 at 10 samples/s, stage 1 at 1. Moving worker 1 (speed 1) gives min(9, 2) = 2,
  // worker 2 (speed 3) min(7, 4) = 4, worker 5 (speed 6) min(4, 7) = 4: worker 2, the lower id
  // of the two best.
  const std::vector<Peer> peers = {{1, 0, 1}, {2, 0, 3}, {5, 0, 6}, {9, 1, 1}};
  auto m = best_move(peers, kTwoEqual, {}, 0);
  ASSERT_TRUE(m);
  EXPECT_EQ(m->worker, 2u);
  EXPECT_EQ(m->after, 4);
}

TEST(Balancer, RespectsMinGainMinWorkersCooldownAndUnmeasuredPeers) {
  const std::vector<Peer> peers = {{0, 0, 2}, {1, 0, 2}, {2, 0, 2}, {1000, 1, 2}};
  BalancerParams p;
  p.min_gain = 1.0;  // the best move doubles the rate exactly: not more than 100%
  EXPECT_FALSE(best_move(peers, kTwoEqual, p, 0));
  p.min_gain = 0.05;
  // Stage 1's only worker is slow; stage 0's two cannot leave with min_workers = 2.
  p.min_workers = 2;
  EXPECT_FALSE(best_move({{0, 0, 2}, {1, 0, 2}, {1000, 1, 1}}, kTwoEqual, p, 0));
  p.min_workers = 1;
  // Moved 10 s ago with a 60 s cooldown: the others move instead, or nobody.
  p.cooldown_s = 60;
  auto m = best_move({{0, 0, 2, -5}, {1, 0, 2, -5}, {2, 0, 2}, {1000, 1, 2}}, kTwoEqual, p, 5);
  ASSERT_TRUE(m);
  EXPECT_EQ(m->worker, 2u);
  EXPECT_FALSE(best_move({{0, 0, 2, 0}, {1, 0, 2, 0}, {1000, 1, 2}}, kTwoEqual, p, 59));
  // Unmeasured workers count with the measured mean but are not moved.
  EXPECT_FALSE(best_move({{0, 0, 0}, {1, 0, 0}, {1000, 1, 2}}, kTwoEqual, p, 0));
}

std::vector<Peer> equal_peers(const std::vector<int>& per_stage) {
  std::vector<Peer> peers;
  uint32_t id = 0;
  for (size_t k = 0; k < per_stage.size(); ++k)
    for (int i = 0; i < per_stage[k]; ++i) peers.push_back({id++, static_cast<uint32_t>(k), 1});
  return peers;
}

TEST(Balancer, ProvisionalSpeedsMoveAWorkerOnlyForAPlanThatMoreThanDoublesThePipeline) {
  // 3 + 1, the lone stage-1 worker 4x slow and measured; stage 0's speeds are provisional
  // (their first micro-batches). Taken as unmeasured they cannot move; counted, moving one
  // takes P from 2 to min(24, 2 + 8) = 10: far more than double, so it is planned.
  auto peer = [](uint32_t id, uint32_t stage, double speed, bool provisional) {
    Peer p{id, stage, speed};
    p.provisional = provisional;
    return p;
  };
  const std::vector<Peer> starved = {peer(0, 0, 8, true), peer(1, 0, 8, true), peer(2, 0, 8, true),
                                     peer(1000, 1, 2, false)};
  auto moves = plan_moves(starved, kTwoEqual, {}, 0);
  ASSERT_EQ(moves.size(), 1u);
  EXPECT_EQ(moves[0].from, 0u);
  EXPECT_EQ(moves[0].to, 1u);
  EXPECT_DOUBLE_EQ(moves[0].gain, 4.0);
  // 3 + 1, all provisional, stage 1's worker at 15 and stage 0's at 10: moving one takes P
  // from 15 to min(20, 25) = 20 (+33%): planned from trusted speeds, not from provisional ones.
  std::vector<Peer> slower = {peer(0, 0, 10, true), peer(1, 0, 10, true), peer(2, 0, 10, true),
                              peer(1000, 1, 15, true)};
  EXPECT_TRUE(plan_moves(slower, kTwoEqual, {}, 0).empty());
  for (auto& p : slower) p.provisional = false;
  ASSERT_EQ(plan_moves(slower, kTwoEqual, {}, 0).size(), 1u);
  // A provisional speed that is not needed does not hold a trusted plan back: stage 0's
  // workers measured, stage 1's newcomer provisional and counted as the mean.
  const std::vector<Peer> mixed = {peer(0, 0, 8, false), peer(1, 0, 8, false), peer(2, 0, 8, false),
                                   peer(1000, 1, 1, true)};
  moves = plan_moves(mixed, kTwoEqual, {}, 0);
  ASSERT_EQ(moves.size(), 1u);
  EXPECT_DOUBLE_EQ(moves[0].gain, 1.0);  // 8 (the mean) -> 16: the trusted plan
}

TEST(Balancer, WithoutLinksAnExchangeTradesAFastWorkerForASlowOneNotTwoAlike) {
  // 3 + 1, the lone stage-1 worker 4x slow, stage 1 half again as costly. One move gives
  // 2 + 2 with the slow worker in stage 1: P = min(8, 5 / 1.5) = 3.3. No single move helps
  // from there, but exchanging a fast stage-0 worker for the slow one gives min(5, 8 / 1.5) = 5.
  const Stages costly = {1.0, 1.5};
  BalancerParams p;
  p.max_moves = 4;
  auto moves = plan_moves({{0, 0, 4}, {1, 0, 4}, {2, 0, 4}, {1000, 1, 1}}, costly, p, 0);
  ASSERT_EQ(moves.size(), 3u);
  EXPECT_EQ(moves[0].to, 1u);
  EXPECT_EQ(moves[1].to, 1u);
  EXPECT_EQ(moves[2].worker, 1000u);
  EXPECT_EQ(moves[2].to, 0u);
  EXPECT_DOUBLE_EQ(moves[2].after, 5.0);
  // Workers whose speeds are within 2x of each other are not exchanged (measured speeds of
  // equal workers spread that far): 6 + 6 against 4 + 4 would even out at 10 + 10 (+25%).
  EXPECT_TRUE(
      plan_moves({{0, 0, 6}, {1, 0, 6}, {1000, 1, 4}, {1001, 1, 4}}, kTwoEqual, p, 0).empty());
  // 6 + 6 against 2.5 + 5.5: exchanging 6 for 2.5 takes P from 8 to 8.5.
  moves = plan_moves({{0, 0, 6}, {1, 0, 6}, {1000, 1, 2.5}, {1001, 1, 5.5}}, kTwoEqual, p, 0);
  ASSERT_EQ(moves.size(), 2u);
  EXPECT_EQ(moves[1].worker, 1000u);
  EXPECT_DOUBLE_EQ(moves[1].after, 8.5);
  // With one move allowed no exchange is planned.
  p.max_moves = 1;
  EXPECT_TRUE(
      plan_moves({{0, 0, 6}, {1, 0, 6}, {1000, 1, 2.5}, {1001, 1, 5.5}}, kTwoEqual, p, 0).empty());
}

TEST(Balancer, PlansSeveralMovesThatTogetherBalanceTheStages) {
  BalancerParams p;
  p.max_moves = 10;
  const auto moves = plan_moves(equal_peers({10, 2}), kTwoEqual, p, 0);
  ASSERT_EQ(moves.size(), 4u);  // 10 + 2 -> 6 + 6, then no move raises stage 1 further
  std::set<uint32_t> workers;
  for (const auto& m : moves) {
    EXPECT_EQ(m.from, 0u);
    EXPECT_EQ(m.to, 1u);
    EXPECT_DOUBLE_EQ(m.gain, 2.0);
    workers.insert(m.worker);
  }
  EXPECT_EQ(workers.size(), 4u);  // four different workers
  EXPECT_EQ(moves.back().after, 6);
}

TEST(Balancer, APlanIsMadeWhenTogetherItsMovesGainEnough) {
  // 100 + 80 workers: one move raises P by 1.25%, ten moves by 12.5%.
  BalancerParams p;
  p.min_gain = 0.05;
  EXPECT_TRUE(plan_moves(equal_peers({100, 80}), kTwoEqual, p, 0).empty());
  p.max_moves = 10;
  EXPECT_EQ(plan_moves(equal_peers({100, 80}), kTwoEqual, p, 0).size(), 10u);
}

TEST(Balancer, StagesTiedAtTheMinimumAreRaisedOneAfterTheOther) {
  // 10, 10, 10 and 20 samples/s: no single move raises P; three moves (one into each slow
  // stage) raise it to 11.
  const std::vector<double> four = {1, 1, 1, 1};
  BalancerParams p;
  p.min_gain = 0;
  p.max_moves = 2;
  EXPECT_TRUE(plan_moves(equal_peers({10, 10, 10, 20}), four, p, 0).empty());
  p.max_moves = 3;
  const auto moves = plan_moves(equal_peers({10, 10, 10, 20}), four, p, 0);
  ASSERT_EQ(moves.size(), 3u);
  std::set<uint32_t> to;
  for (const auto& m : moves) {
    EXPECT_EQ(m.from, 3u);
    to.insert(m.to);
  }
  EXPECT_EQ(to, (std::set<uint32_t>{0, 1, 2}));
  EXPECT_EQ(moves.back().after, 11);
}

TEST(Balancer, AnEmptyStageIsFilledWhateverTheGain) {
  auto m = best_move({{0, 0, 1}, {1, 0, 1}}, kTwoEqual, {}, 0);
  ASSERT_TRUE(m);
  EXPECT_EQ(m->to, 1u);
  EXPECT_TRUE(std::isinf(m->gain));
  EXPECT_NE(m->reason.find("had no worker"), std::string::npos) << m->reason;
}

TEST(Balancer, PlacesANewcomerWhereThePipelineNeedsIt) {
  // Stage 1 has fewer samples/s though as many workers: the newcomer goes there.
  const std::vector<Peer> peers = {{0, 0, 4}, {1, 1, 1}};
  EXPECT_EQ(place(peers, kTwoEqual, 2), 1u);
  EXPECT_EQ(place_fewest(peers, 2), 0u);  // the rule without a balancer: fewest workers, lowest
  // A costly stage needs more workers for the same rate.
  EXPECT_EQ(place({{0, 0, 2}, {1, 1, 2}}, {1.0, 3.0}, 2), 1u);
  // Stages 1 and 2 both at 1 sample/s: the pipeline stays at 1 wherever a newcomer goes; it
  // goes to the slowest stage, the lower of the two.
  EXPECT_EQ(place({{0, 0, 3}, {1, 1, 1}, {2, 2, 1}}, {1.0, 1.0, 1.0}, 1), 1u);
}

TEST(Balancer, ANewcomerIsPlacedAmongTheWorkersThatServeNowNotTheLastPeriods) {
  // The churn bench's case: the last period measured 2 + 2 (stage 1 a little slower), then
  // worker 2's node froze and was dropped; the node comes back and joins. Placed by the
  // period's snapshot it went to stage 1 (1 + 3: stage 0 short until the next move).
  const std::vector<Peer> measured = {{1, 0, 10}, {2, 0, 10}, {1000, 1, 9}, {1002, 1, 9}};
  EXPECT_EQ(place(measured, kTwoEqual, 0), 1u);
  const std::vector<std::pair<uint32_t, uint32_t>> serving = {{1, 0}, {1000, 1}, {1002, 1}};
  const auto peers = serving_peers(measured, serving);
  ASSERT_EQ(peers.size(), 3u);
  EXPECT_EQ(peers[0].speed, 10);
  EXPECT_EQ(place(peers, kTwoEqual, 0), 0u);
  // A worker that moved since counts at its new stage; one not measured yet with the mean.
  const auto moved = serving_peers(measured, {{1, 1}, {3, 0}, {1000, 1}, {1002, 1}});
  ASSERT_EQ(moved.size(), 4u);
  EXPECT_EQ(moved[0].stage, 1u);
  EXPECT_EQ(moved[1].id, 3u);
  EXPECT_EQ(moved[1].speed, 0);
  EXPECT_EQ(place(moved, kTwoEqual, 0), 0u);
}

TEST(Balancer, LinkCapsAreModelledAndAnExchangeFreesAFastWorkerFromACappedStage) {
  // Stage 1 moves 4 bytes per sample, stage 0 one; every link carries 4 bytes/s: stage 1
  // caps a worker at 1 sample/s, stage 0 at 4. Worker 0 (speed 4) sits capped in stage 1,
  // workers 1 and 2 (speed 1) in stage 0: rates 2 and 1, P = 1.
  const Stages stages({1.0, 1.0}, {1.0, 4.0});
  const std::vector<Peer> peers = {{0, 1, 4, -1e9, 4}, {1, 0, 1, -1e9, 4}, {2, 0, 1, -1e9, 4}};
  EXPECT_EQ(stage_rates(peers, stages), (std::vector<double>{2, 1}));
  EXPECT_EQ(rate_at(peers[0], stages, 0, 0), 4);
  // No single move helps (worker 1 to stage 1 gives 1 and 2), and worker 0 is stage 1's only
  // one: one move at a time P stays at 1.
  BalancerParams p;
  p.min_gain = 0;
  p.max_moves = 1;
  EXPECT_TRUE(plan_moves(peers, stages, p, 0).empty());
  // With room for an exchange: worker 0 to stage 0 for worker 1 (5 and 1), then worker 2 to
  // stage 1 (4 and 2): P = 2, the optimum.
  p.max_moves = 3;
  const auto moves = plan_moves(peers, stages, p, 0);
  ASSERT_EQ(moves.size(), 3u);
  EXPECT_EQ(moves[0].worker, 1u);
  EXPECT_EQ(moves[0].to, 1u);
  EXPECT_EQ(moves[1].worker, 0u);
  EXPECT_EQ(moves[1].to, 0u);
  EXPECT_EQ(moves[2].worker, 2u);
  EXPECT_EQ(moves[2].to, 1u);
  EXPECT_EQ(moves.back().after, 2);
  // Splitting worker 0's time would do better still (0.4 of it in stage 1: 2.4 and 2.4):
  // the bound is that linear program's optimum.
  EXPECT_NEAR(optimal_bound(peers, stages), 2.4, 0.01);
  EXPECT_GE(optimal_bound(peers, stages), 2.4 - 1e-9);
  // Without link figures the balancer takes worker 0 for 4 samples/s in stage 1 (P = 2
  // already, nothing to gain): the blind spot that measuring links removes.
  std::vector<Peer> unmeasured = peers;
  for (auto& w : unmeasured) w.link = 0;
  EXPECT_EQ(pipeline_rate(unmeasured, stages), 2);
  EXPECT_TRUE(plan_moves(unmeasured, stages, p, 0).empty());
  // A newcomer with a measured link goes where it is not capped.
  EXPECT_EQ(place({{0, 0, 1, -1e9, 4}, {1, 1, 4, -1e9, 4}}, stages, 4, 4), 0u);
}

// A stage left without a worker takes newcomers first, whatever the balancer placed: its
// measurements are a period old and may still count the workers of a node that has gone (the
// chaos soak's run paused for good when a rejoining node's two workers were both placed at
// stage 0 while stage 1 had none left).
TEST(Balancer, AnEmptyStageTakesNewcomersFirst) {
  // Stage 1 is empty; the balancer put both newcomers at stage 0: one moves to stage 1.
  EXPECT_EQ(fill_empty_stages({0, 0}, {2, 0}), (std::vector<uint32_t>{0, 1}));
  // Three empty stages, both newcomers at stage 0: the last moves to stage 1; stage 2 stays
  // empty (no newcomer left to spare).
  EXPECT_EQ(fill_empty_stages({0, 0}, {0, 0, 0}), (std::vector<uint32_t>{0, 1}));
  // No empty stage: the balancer's placement stands.
  EXPECT_EQ(fill_empty_stages({0, 0}, {1, 1}), (std::vector<uint32_t>{0, 0}));
  // Filled already by the placement: it stands.
  EXPECT_EQ(fill_empty_stages({1, 0}, {1, 0}), (std::vector<uint32_t>{1, 0}));
  // One newcomer, two empty stages: the balancer's choice between them stands.
  EXPECT_EQ(fill_empty_stages({2}, {0, 1, 0}), (std::vector<uint32_t>{2}));
  // A newcomer is not taken from a stage it alone would serve.
  EXPECT_EQ(fill_empty_stages({0, 1}, {0, 0, 0}), (std::vector<uint32_t>{0, 1}));
}

}  // namespace
}  // namespace swarmrt::policy
