// Spot checks of stage work, in real in-process swarms (actors/tracker/verify.cpp,
// actors/stage/verify.cpp): a worker that adds noise to the activations it sends is found by a
// recomputation on another worker of its stage, settled by a third, and banned, and the step
// runs again without it; with two workers a stage a mismatch is never a ban; honest workers are
// never banned. The draw of what is checked is seeded (verify.seed), every run's routes too.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "../../temp_dir.hpp"
#include "../run_util.hpp"

using namespace swarmrt;
using swarmrt::testing::expect_every_micro_batch_once;
using swarmrt::testing::lines_with;
using swarmrt::testing::micro_run;
using swarmrt::testing::route_deterministically;
using swarmrt::testing::run_in;
using swarmrt::testing::TempDir;
namespace fs = std::filesystem;

namespace {

config::RunConfig checked_swarm(int64_t workers, int64_t steps, double fraction, int64_t seed) {
  auto c = micro_run("swarm", 2, workers, steps);
  route_deterministically(c);
  c.verify.fraction = fraction;
  c.verify.seed = seed;
  return c;
}

// The stage-0 worker that lies: noise of its activations' RMS on what it sends from step 3.
void add_liar(config::RunConfig& c) {
  c.chaos.hop_noise = 1.0;
  c.chaos.malicious_workers = 1;  // workers 0 and 1000; only stage 0 sends activations
  c.chaos.malicious_from_step = 3;
}

std::vector<nlohmann::json> records(const fs::path& dir, const std::string& needle) {
  std::vector<nlohmann::json> out;
  for (const auto& line : lines_with(dir / "metrics.jsonl", needle))
    out.push_back(nlohmann::json::parse(line));
  return out;
}

// Runs `c` in `dir`: every step completes with each micro-batch once, and exactly one worker is
// banned; that ban's record.
nlohmann::json run_to_one_ban(const fs::path& dir, const config::RunConfig& c) {
  const auto r = run_in(dir, c);
  EXPECT_EQ(r.report.losses.size(), static_cast<size_t>(c.train.steps));
  expect_every_micro_batch_once(r.report, c.train.micro_batches);
  EXPECT_EQ(r.worker_params.count(0), 0u);  // the banned worker took no part to the end
  const auto bans = records(dir, R"("kind":"banned")");
  EXPECT_EQ(bans.size(), 1u);
  return bans.empty() ? nlohmann::json::object() : bans[0];
}

}  // namespace

TEST(SpotCheck, ANoisyWorkerIsBannedAndItsStepRunsAgainWithoutIt) {
  auto c = checked_swarm(3, 6, 0.5, 11);
  add_liar(c);
  TempDir dir;
  const auto ban = run_to_one_ban(dir.path(), c);
  EXPECT_EQ(ban["worker"], 0);
  EXPECT_GE(ban["step"].get<int>(), 3);
  EXPECT_NE(ban["why"].get<std::string>().find("spot check of stage 0"), std::string::npos);
  // The settlement: two workers against the liar, whether it was the checked worker (both
  // recomputations differ from its output) or the first verifier (the third agrees with the
  // checked worker).
  auto settled = records(dir.path(), R"("verdict":"checked_wrong")");
  const auto framed = records(dir.path(), R"("verdict":"verifier_wrong")");
  settled.insert(settled.end(), framed.begin(), framed.end());
  ASSERT_EQ(settled.size(), 1u);
  const auto& s = settled[0];
  const double tolerance = s["tolerance"].get<double>();
  EXPECT_GT(s["difference"].get<double>(), tolerance);
  if (s["verdict"] == "checked_wrong") {
    EXPECT_EQ(s["checked"], 0);
    EXPECT_GT(s["third_difference"].get<double>(), tolerance);
  } else {
    EXPECT_EQ(s["verifier"], 0);
    EXPECT_LE(s["third_difference"].get<double>(), tolerance);
  }
  // Before its noise, the liar's checks agreed; it took no part in the run after its ban.
  for (const auto& check : records(dir.path(), R"("event":"spot_check")")) {
    if (check["step"].get<int>() < 3) {
      EXPECT_EQ(check["verdict"], "agreed") << check.dump();
    }
  }
  // The step records carry the tally.
  const auto steps = records(dir.path(), R"("event":"step")");
  ASSERT_EQ(steps.size(), 6u);
  EXPECT_EQ(steps.back()["spot_checks"]["bans"], 1);
  EXPECT_EQ(steps.back()["spot_checks"]["banned"][0]["worker"], 0);
}

// The tracker killed at step 6, after the ban at step 4: its successor (started by the
// tracker supervisor) keeps the ban and the spot checks' tally, so the step records after the
// restart still list the banned worker (a tracker that forgot them listed none, and would have
// taken the worker back, had anything restarted it).
TEST(SpotCheck, ARestartedTrackerKeepsItsBans) {
  auto c = checked_swarm(3, 8, 0.5, 11);
  add_liar(c);
  c.chaos.kill = "tracker";
  c.chaos.kill_at_step = 6;
  c.chaos.kill_at_phase = config::KillPhase::start;
  TempDir dir;
  const auto ban = run_to_one_ban(dir.path(), c);
  EXPECT_EQ(ban["worker"], 0);
  ASSERT_LT(ban["step"].get<int>(), 6);
  EXPECT_FALSE(lines_with(dir.path() / "metrics.jsonl", R"("kind":"tracker")").empty());
  const auto steps = records(dir.path(), R"("event":"step")");
  ASSERT_EQ(steps.size(), 8u);
  const auto bans_at_4 = steps[3]["spot_checks"]["bans"].get<int>();
  EXPECT_EQ(bans_at_4, 1);
  for (size_t i = 5; i < steps.size(); ++i) {
    EXPECT_EQ(steps[i]["spot_checks"]["bans"], 1) << "step " << i + 1;
    ASSERT_EQ(steps[i]["spot_checks"]["banned"].size(), 1u) << "step " << i + 1;
    EXPECT_EQ(steps[i]["spot_checks"]["banned"][0]["worker"], 0) << "step " << i + 1;
    EXPECT_GE(steps[i]["spot_checks"]["checks"].get<int>(),
              steps[3]["spot_checks"]["checks"].get<int>())
        << "the tally went back at step " << i + 1;
  }
}

// A worker that stops taking its optimizer steps (chaos.malicious = stale) computes with stale
// parameters from the step after: its outputs differ from its peers', and it is banned.
TEST(SpotCheck, StaleParametersAreFound) {
  auto c = checked_swarm(3, 6, 1.0, 2);
  c.chaos.malicious = config::Malicious::stale;
  c.chaos.malicious_workers = 1;
  c.chaos.malicious_from_step = 3;
  TempDir dir;
  const auto ban = run_to_one_ban(dir.path(), c);
  EXPECT_EQ(ban["worker"], 0);
  EXPECT_EQ(ban["step"], 4);  // step 3 ran on the parameters of step 2, as everyone's
}

// With two workers a stage, a mismatch has no third worker to settle it: nobody is banned, the
// run goes on, and the mismatches are on record.
TEST(SpotCheck, OneAccuserNeverBans) {
  auto c = checked_swarm(2, 5, 1.0, 5);
  add_liar(c);
  TempDir dir;
  const auto r = run_in(dir.path(), c);
  ASSERT_EQ(r.report.losses.size(), 5u);
  expect_every_micro_batch_once(r.report, c.train.micro_batches);
  EXPECT_TRUE(records(dir.path(), R"("kind":"banned")").empty());
  EXPECT_FALSE(records(dir.path(), R"("verdict":"unsettled")").empty());
  EXPECT_EQ(r.worker_params.count(0), 1u);
}

// 30 seeded runs of honest workers, every stage-0 output checked (verify.fraction = 1), in the
// run's precision with and without an encoding of the hops: no mismatch, no ban.
TEST(SpotCheck, HonestWorkersAreNeverBanned) {
  for (int64_t seed = 1; seed <= 30; ++seed) {
    auto c = checked_swarm(3, 2, 1.0, seed);
    c.train.seed = seed;
    if (seed % 2 == 0) c.swarm.hop_encoding = config::HopEncoding::int8;
    TempDir dir;
    const auto r = run_in(dir.path(), c);
    ASSERT_EQ(r.report.losses.size(), 2u) << seed;
    const auto checks = records(dir.path(), R"("event":"spot_check")");
    EXPECT_EQ(checks.size(), 2u * static_cast<size_t>(c.train.micro_batches)) << seed;
    for (const auto& check : checks) EXPECT_EQ(check["verdict"], "agreed") << check.dump();
    EXPECT_TRUE(records(dir.path(), R"("kind":"banned")").empty()) << seed;
  }
}
