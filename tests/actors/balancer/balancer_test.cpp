// The balancer in a live swarm (one process): it moves workers where the pipeline needs them,
// the moved worker starts from its new stage's state, and nothing is counted twice. The
// workers' speeds are injected (RuntimeOptions::balancer_speed), so the placements are the
// same on every run whatever the machine's load; everything else (the moves, the hand-off,
// the recovery of what the retired worker held) is the real runtime.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <numeric>

#include "../run_util.hpp"
#include "model/run_dir.hpp"
#include "model/stage_cost.hpp"
#include "policy/balancer.hpp"

using namespace swarmrt;
using swarmrt::testing::expect_every_micro_batch_once;
using swarmrt::testing::lines_with;
using swarmrt::testing::micro_run;
using swarmrt::testing::run;

namespace {

config::RunConfig balanced_run(const std::string& mode, int64_t steps) {
  auto c = micro_run(mode, 2, 2, steps);
  c.diloco.inner_steps = 5;
  c.balancer.period_s = 0.1;
  c.balancer.cooldown_s = 1000;  // each worker moves once at most
  c.balancer.min_gain = 0.05;
  return c;
}

// A run with its metrics in a temporary run directory: the result and its rebalance events.
struct BalancedRun {
  actors::RuntimeResult result;
  std::vector<nlohmann::json> moves;
};

BalancedRun run_balanced(const config::RunConfig& config, std::vector<int64_t> stage_workers,
                         std::function<double(uint32_t, double)> speed) {
  swarmrt::testing::TempDir dir;
  model::RunDir rd(dir / "run", config, model::RunStart::fresh);
  actors::RuntimeOptions o;
  o.run = &rd;
  o.stage_workers = std::move(stage_workers);
  o.balancer_speed = std::move(speed);
  BalancedRun out{run(config, o), {}};
  for (const auto& line : lines_with(dir / "run/metrics.jsonl", R"("event":"rebalance")"))
    out.moves.push_back(nlohmann::json::parse(line));
  return out;
}

// Every parameter of worker a equal to worker b's.
void expect_same_parameters(const actors::RuntimeResult& r, uint32_t a, uint32_t b) {
  ASSERT_TRUE(r.worker_params.count(a) && r.worker_params.count(b));
  const auto& pa = r.worker_params.at(a);
  const auto& pb = r.worker_params.at(b);
  ASSERT_EQ(pa.size(), pb.size());
  for (size_t i = 0; i < pa.size(); ++i)
    EXPECT_TRUE(at::equal(pa[i].second, pb[i].second))
        << pa[i].first << " max diff " << (pa[i].second - pb[i].second).abs().max().item<double>()
        << " of " << pa[i].second.abs().max().item<double>();
}

const auto equally_fast = [](uint32_t, double) { return 10.0; };

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
  const auto [r, moves] = run_balanced(config, {3, 1}, equally_fast);

  ASSERT_EQ(r.report.losses.size(), 60u);
  expect_every_micro_batch_once(r.report, config.train.micro_batches);
  expect_loss_falls(r.report);
  // 3 + 1 -> 2 + 2, and from there no move raises the pipeline.
  ASSERT_EQ(moves.size(), 1u);
  const auto& m = moves[0];
  EXPECT_EQ(m["from"], 0);
  EXPECT_EQ(m["to"], 1);
  EXPECT_LT(m["worker"].get<uint32_t>(), 3u);
  EXPECT_EQ(m["new_worker"], 1001);  // stage 1's next replica
  EXPECT_GE(r.balancer["periods"].get<int64_t>(), 2);
  expect_same_parameters(r, 1000, 1001);
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
  const auto [r, moves] =
      run_balanced(config, {3, 2}, [](uint32_t id, double) { return id == 1001 ? 2.5 : 10.0; });

  ASSERT_EQ(r.report.losses.size(), 60u);
  expect_every_micro_batch_once(r.report, config.train.micro_batches);
  expect_loss_falls(r.report);
  ASSERT_EQ(moves.size(), 1u);
  EXPECT_EQ(moves[0]["from"], 0);
  EXPECT_EQ(moves[0]["to"], 1);
  EXPECT_EQ(moves[0]["new_worker"], 1002);
}

TEST(Balancer, BalancedStagesKeepTheirWorkersOverManyPeriods) {
  auto config = balanced_run("diloco-swarm", 150);
  const auto [r, moves] = run_balanced(config, {}, equally_fast);

  ASSERT_EQ(r.report.losses.size(), 150u);
  EXPECT_TRUE(moves.empty());
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
  const auto [r, moves] = run_balanced(config, {3, 1}, equally_fast);

  ASSERT_EQ(r.report.losses.size(), 80u);
  expect_every_micro_batch_once(r.report, config.train.micro_batches);
  EXPECT_EQ(moves.size(), 1u);
  EXPECT_EQ(r.kills, 2u);
  EXPECT_GE(r.restarts, 2u);
  expect_same_parameters(r, 1000, 1001);
}

TEST(Balancer, TheLiveBalancersMoveIsTheSimulatorsForTheSameSpeeds) {
  // The live balancer and `swarmrt simulate` call the same plan_moves: for the speeds the live
  // run took (injected) and its starting placement, the plan is the move the run made.
  auto config = balanced_run("swarm", 40);
  const auto [r, moves] =
      run_balanced(config, {3, 1}, [](uint32_t id, double) { return id == 2 ? 12.0 : 10.0; });
  ASSERT_EQ(moves.size(), 1u);

  const auto cost = model::stage_costs(config);
  std::vector<policy::Peer> peers;
  for (uint32_t id : {0u, 1u, 2u}) peers.push_back({id, 0, (id == 2 ? 12.0 : 10.0) * cost[0]});
  peers.push_back({1000, 1, 10.0 * cost[1]});
  policy::BalancerParams p;
  p.min_gain = config.balancer.min_gain;
  p.cooldown_s = config.balancer.cooldown_s;
  p.max_moves = config.balancer.max_moves;
  const auto plan =
      policy::plan_moves(peers, policy::Stages(cost, {}, config.train.micro_batches), p, 0);
  ASSERT_EQ(plan.size(), 1u);
  EXPECT_EQ(moves[0]["worker"], plan[0].worker);
  EXPECT_EQ(moves[0]["from"], plan[0].from);
  EXPECT_EQ(moves[0]["to"], plan[0].to);
  EXPECT_DOUBLE_EQ(moves[0]["gain"].get<double>(), plan[0].gain);
}

TEST(Balancer, AMovedWorkerKeepsItsSpeedUntilItHasMeasuredItselfAgain) {
  // 3 + 1, the stage-1 worker 4x slower than most, one of stage 0's faster than the others.
  // The first plan moves the fastest to stage 1. The moved worker (1001) never reports a rate
  // of its own here (injected 0: a worker's first micro-batches at its new stage). Counted with
  // the mean of the others, stage 1 would look short and the next period would move another
  // worker (the plan below); with its speed carried over, no further move.
  auto config = balanced_run("diloco-swarm", 60);
  config.balancer.max_moves = 2;
  const auto cost = model::stage_costs(config);
  const policy::Stages stages(cost, {}, config.train.micro_batches);
  const std::map<uint32_t, double> speed = {{0, 12}, {1, 8}, {2, 8}, {1000, 2}};
  auto injected = [&](uint32_t id, double) {
    const auto it = speed.find(id);
    return it == speed.end() ? 0.0 : it->second / cost[id / 1000];
  };

  policy::BalancerParams p;
  p.min_gain = config.balancer.min_gain;
  p.cooldown_s = config.balancer.cooldown_s;
  p.max_moves = config.balancer.max_moves;
  auto first = policy::plan_moves({{0, 0, 12}, {1, 0, 8}, {2, 0, 8}, {1000, 1, 2}}, stages, p, 0);
  ASSERT_EQ(first.size(), 1u);
  ASSERT_EQ(first[0].worker, 0u);
  const std::vector<policy::Peer> unmeasured = {
      {1, 0, 8}, {2, 0, 8}, {1000, 1, 2}, {1001, 1, 0, 0}};
  ASSERT_FALSE(policy::plan_moves(unmeasured, stages, p, 1).empty());  // what carrying prevents
  auto carried = unmeasured;
  carried[3].speed = 12;
  ASSERT_TRUE(policy::plan_moves(carried, stages, p, 1).empty());

  const auto [r, moves] = run_balanced(config, {3, 1}, injected);
  ASSERT_EQ(r.report.losses.size(), 60u);
  expect_every_micro_batch_once(r.report, config.train.micro_batches);
  ASSERT_EQ(moves.size(), 1u);
  EXPECT_EQ(moves[0]["worker"], 0);
  EXPECT_EQ(moves[0]["new_worker"], 1001);
  // The balancer's last period took 1001's speed from before its move.
  bool seen = false;
  for (const auto& rate : r.balancer["last"]["rates"])
    if (rate["worker"] == 1001) seen = rate["carried"].get<bool>();
  EXPECT_TRUE(seen) << r.balancer.dump();
}
