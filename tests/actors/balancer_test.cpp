// The balancer in a live swarm (one process): it moves workers where the pipeline needs them,
// the moved worker starts from its new stage's state, and nothing is counted twice. The
// workers' speeds are injected (RuntimeOptions::balancer_speed), so the placements are the
// same on every run whatever the machine's load; everything else (the moves, the hand-off,
// the recovery of what the retired worker held) is the real runtime.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <numeric>

#include "model/run_dir.hpp"
#include "model/stage_cost.hpp"
#include "policy/balancer.hpp"
#include "run_util.hpp"

using namespace swarmrt;
using swarmrt::testing::expect_every_micro_batch_once;
using swarmrt::testing::lines_with;
using swarmrt::testing::micro_run;
using swarmrt::testing::run;

namespace {

model::RunConfig balanced_run(const std::string& mode, int64_t steps) {
  auto c = micro_run(mode, 2, 2, steps);
  c.diloco.inner_steps = 5;
  c.balancer.period_s = 0.1;
  c.balancer.cooldown_s = 1000;  // each worker moves once at most
  c.balancer.min_gain = 0.05;
  return c;
}

struct Moves {
  std::vector<nlohmann::json> events;
};

Moves moves_in(const swarmrt::testing::TempDir& dir) {
  Moves m;
  for (const auto& line : lines_with(dir / "run/metrics.jsonl", R"("event":"rebalance")"))
    m.events.push_back(nlohmann::json::parse(line));
  return m;
}

double mean(const std::vector<double>& v, size_t from, size_t to) {
  return std::accumulate(v.begin() + from, v.begin() + to, 0.0) / double(to - from);
}

void expect_loss_falls(const messages::RunReport& r) {
  const size_t n = r.losses.size();
  ASSERT_GE(n, 20u);
  EXPECT_LT(mean(r.losses, n - 10, n), mean(r.losses, 0, 10));
}

}  // namespace

TEST(Balancer, MovesAWorkerToTheShortStageWhichStartsFromThatStagesParameters) {
  // Three workers in stage 0, one in stage 1, all equally fast: stage 1 limits the pipeline.
  // swarm mode: a stage's workers sum their gradients every step, so they hold the same
  // parameters from step to step; the moved worker still does at the end only if it started
  // from its new stage's parameters and optimizer state.
  auto config = balanced_run("swarm", 60);
  swarmrt::testing::TempDir dir;
  model::RunDir rd(dir / "run", config, model::RunStart::fresh);
  actors::RuntimeOptions o;
  o.run = &rd;
  o.stage_workers = {3, 1};
  o.balancer_speed = [](uint32_t, double) { return 10.0; };
  const auto r = run(config, o);

  ASSERT_EQ(r.report.losses.size(), 60u);
  expect_every_micro_batch_once(r.report, config.train.micro_batches);
  expect_loss_falls(r.report);
  const auto moves = moves_in(dir);
  // 3 + 1 -> 2 + 2, and from there no move raises the pipeline.
  ASSERT_EQ(moves.events.size(), 1u);
  const auto& m = moves.events[0];
  EXPECT_EQ(m["from"], 0);
  EXPECT_EQ(m["to"], 1);
  EXPECT_LT(m["worker"].get<uint32_t>(), 3u);
  EXPECT_EQ(m["new_worker"], 1001);  // stage 1's next replica
  EXPECT_GE(r.balancer["periods"].get<int64_t>(), 2);
  ASSERT_TRUE(r.worker_params.count(1000) && r.worker_params.count(1001));
  const auto& a = r.worker_params.at(1000);
  const auto& b = r.worker_params.at(1001);
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i)
    EXPECT_TRUE(at::equal(a[i].second, b[i].second))
        << a[i].first << " max diff " << (a[i].second - b[i].second).abs().max().item<double>()
        << " of " << a[i].second.abs().max().item<double>();
  // The retired worker is gone: two workers in each stage.
  EXPECT_EQ(r.worker_params.size(), 4u);
  EXPECT_FALSE(r.worker_params.count(m["worker"].get<uint32_t>()));
}

TEST(Balancer, AWorkerSlowedFourTimesDrawsAnotherWorkerToItsStage) {
  // 3 + 2 with every worker as fast: no move raises the pipeline (2 + 3 is no better). With
  // worker 1001 four times slower (chaos slows its compute; its speed is injected to match),
  // stage 1 does 1.25 workers' worth: a worker of stage 0 moves there.
  auto config = balanced_run("diloco-swarm", 60);
  config.chaos.slow_worker = 1001;
  config.chaos.slow_factor = 4;
  swarmrt::testing::TempDir dir;
  model::RunDir rd(dir / "run", config, model::RunStart::fresh);
  actors::RuntimeOptions o;
  o.run = &rd;
  o.stage_workers = {3, 2};
  o.balancer_speed = [](uint32_t id, double) { return id == 1001 ? 2.5 : 10.0; };
  const auto r = run(config, o);

  ASSERT_EQ(r.report.losses.size(), 60u);
  expect_every_micro_batch_once(r.report, config.train.micro_batches);
  expect_loss_falls(r.report);
  const auto moves = moves_in(dir);
  ASSERT_EQ(moves.events.size(), 1u);
  EXPECT_EQ(moves.events[0]["from"], 0);
  EXPECT_EQ(moves.events[0]["to"], 1);
  EXPECT_EQ(moves.events[0]["new_worker"], 1002);
}

TEST(Balancer, BalancedStagesKeepTheirWorkersOverManyPeriods) {
  auto config = balanced_run("diloco-swarm", 150);
  swarmrt::testing::TempDir dir;
  model::RunDir rd(dir / "run", config, model::RunStart::fresh);
  actors::RuntimeOptions o;
  o.run = &rd;
  o.balancer_speed = [](uint32_t, double) { return 10.0; };
  const auto r = run(config, o);

  ASSERT_EQ(r.report.losses.size(), 150u);
  EXPECT_TRUE(moves_in(dir).events.empty());
  EXPECT_GE(r.balancer["periods"].get<int64_t>(), 3);  // it did look, more than once
  EXPECT_EQ(r.balancer["moves"], 0);
}

TEST(Balancer, AMovedWorkerKilledAsItStartsIsRestartedOnItsNewStage) {
  // The move of the first test, and the chaos actor killing the new worker (stage1/worker1)
  // every 150 ms, up to twice, from the moment it exists: it is restarted as itself on stage 1
  // and takes the stage's state again, like any worker that failed.
  auto config = balanced_run("swarm", 80);
  config.chaos.kill = "stage1/worker1";
  config.chaos.kill_every_s = 0.15;
  config.chaos.kill_limit = 2;
  swarmrt::testing::TempDir dir;
  model::RunDir rd(dir / "run", config, model::RunStart::fresh);
  actors::RuntimeOptions o;
  o.run = &rd;
  o.stage_workers = {3, 1};
  o.balancer_speed = [](uint32_t, double) { return 10.0; };
  const auto r = run(config, o);

  ASSERT_EQ(r.report.losses.size(), 80u);
  expect_every_micro_batch_once(r.report, config.train.micro_batches);
  EXPECT_EQ(moves_in(dir).events.size(), 1u);
  EXPECT_EQ(r.kills, 2u);
  EXPECT_GE(r.restarts, 2u);
  ASSERT_TRUE(r.worker_params.count(1000) && r.worker_params.count(1001));
  const auto& a = r.worker_params.at(1000);
  const auto& b = r.worker_params.at(1001);
  for (size_t i = 0; i < a.size(); ++i)
    EXPECT_TRUE(at::equal(a[i].second, b[i].second)) << a[i].first;
}

TEST(Balancer, TheLiveBalancersMoveIsTheSimulatorsForTheSameSpeeds) {
  // The live balancer and `swarmrt simulate` call the same plan_moves: for the speeds the live
  // run took (injected) and its starting placement, the plan is the move the run made.
  auto config = balanced_run("swarm", 40);
  swarmrt::testing::TempDir dir;
  model::RunDir rd(dir / "run", config, model::RunStart::fresh);
  actors::RuntimeOptions o;
  o.run = &rd;
  o.stage_workers = {3, 1};
  o.balancer_speed = [](uint32_t id, double) { return id == 2 ? 12.0 : 10.0; };
  const auto r = run(config, o);
  const auto moves = moves_in(dir);
  ASSERT_EQ(moves.events.size(), 1u);

  const auto cost = model::stage_costs(config);
  std::vector<policy::Peer> peers;
  for (uint32_t id : {0u, 1u, 2u}) peers.push_back({id, 0, (id == 2 ? 12.0 : 10.0) * cost[0]});
  peers.push_back({1000, 1, 10.0 * cost[1]});
  policy::BalancerParams p;
  p.min_gain = config.balancer.min_gain;
  p.cooldown_s = config.balancer.cooldown_s;
  p.max_moves = config.balancer.max_moves;
  const auto plan = policy::plan_moves(peers, cost, p, 0);
  ASSERT_EQ(plan.size(), 1u);
  EXPECT_EQ(moves.events[0]["worker"], plan[0].worker);
  EXPECT_EQ(moves.events[0]["from"], plan[0].from);
  EXPECT_EQ(moves.events[0]["to"], plan[0].to);
  EXPECT_DOUBLE_EQ(moves.events[0]["gain"].get<double>(), plan[0].gain);
}
