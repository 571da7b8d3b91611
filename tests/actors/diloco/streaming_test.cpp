// Streaming DiLoCo in the actors: a real DilocoReplica inside an actor, driven step by
// step against a scoped actor standing in as the stage's group; and whole in-process runs
// with fragments, overlap and 4-bit rounds against plain DiLoCo.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <torch/nn/module.h>
#include <cmath>

#include "../../temp_dir.hpp"
#include "../actor_test_util.hpp"
#include "actors/common/tensor_list.hpp"
#include "actors/diloco/replica.hpp"
#include "model/checkpoint.hpp"
#include "model/fragments.hpp"
#include "model/quantize.hpp"
#include "model/run_dir.hpp"
#include "replica_driver.hpp"

using namespace swarmrt;
using namespace swarmrt::atoms;

#include "../run_util.hpp"

namespace {
using swarmrt::testing::micro_run;
using swarmrt::testing::route_deterministically;
using swarmrt::testing::run;
using swarmrt::testing::run_in;

using driver_state = swarmrt::testing::replica_driver_state<actors::DilocoReplica>;
using swarmrt::testing::driver;
using swarmrt::testing::inner_atom;

config::RunConfig streaming_config(int64_t P, int64_t tau, double alpha, config::Quantize q) {
  auto c = micro_run("diloco", 1, 1, 1000);
  c.diloco.inner_steps = 8;
  c.diloco.fragments = P;
  c.diloco.overlap_steps = tau;
  c.diloco.alpha = alpha;
  c.diloco.quantize = q;
  config::validate(c, "test");
  return c;
}

using swarmrt::testing::answer;

using swarmrt::testing::inner;
using swarmrt::testing::next_contribution;
using swarmrt::testing::params_of;

// A 12-step run of 2 stages of 2 workers with P = 2, H = 4 (int4): every micro-batch once, each
// stage's group applied fragment 0's rounds at steps 4, 8 and 12 (the last) and fragment 1's at
// 2, 6, 10 and 12, once each and in order, both workers of a stage ended on the same
// parameters, and the loss fell.
void expect_two_fragments_in_order(const actors::RuntimeResult& r,
                                   const config::RunConfig& config) {
  ASSERT_EQ(r.report.losses.size(), 12u);
  swarmrt::testing::expect_every_micro_batch_once(r.report, config.train.micro_batches);
  for (uint32_t stage = 0; stage < 2; ++stage) {
    ASSERT_EQ(r.fragment_rounds.at(stage).size(), 2u);
    EXPECT_EQ(r.fragment_rounds.at(stage)[0], (std::vector<uint64_t>{0, 1, 2})) << stage;
    EXPECT_EQ(r.fragment_rounds.at(stage)[1], (std::vector<uint64_t>{0, 1, 2, 3})) << stage;
    swarmrt::testing::expect_stage_workers_equal(r, stage);
  }
  EXPECT_LT(r.report.losses.back(), r.report.losses.front());
}

}  // namespace

// P = 2, H = 8, τ = 2, α = 0.5: fragment 1 starts its round after inner step 4 and, although
// the answer is in at once, its parameters stay local through step 5 and take
// α·local + (1 − α)·global after inner step 6; fragment 0 is untouched. Fragment 0's round
// (step 8) is answered late: step 9 goes on, step 10 is held until the answer is merged.
TEST(DilocoReplica, MergeLandsTauInnerStepsAfterTheRoundStarts) {
  swarmrt::testing::TestSystem ts;
  auto ctx = std::make_shared<actors::SwarmContext>();
  ctx->config = streaming_config(2, 2, 0.5, config::Quantize::none);
  caf::scoped_actor group{*ts.sys}, tracker{*ts.sys}, self{*ts.sys};
  auto worker =
      ts.sys->spawn(driver<actors::DilocoReplica>, actors::ContextPtr(ctx),
                    caf::actor_cast<caf::actor>(group), caf::actor_cast<caf::actor>(tracker));
  const auto init = params_of(self, worker);
  const auto frag = model::assign_fragments(
      [&] {
        std::vector<std::string> n;
        for (const auto& [name, t] : init) n.push_back(name);
        return n;
      }(),
      2, config::FragmentPattern::strided);

  for (uint64_t t = 1; t <= 3; ++t) EXPECT_FALSE(inner(self, worker, t)) << t;
  EXPECT_FALSE(inner(self, worker, 4));
  auto [h, f] = next_contribution(group);
  EXPECT_EQ(h.fragment, 1u);
  EXPECT_EQ(h.step, 4u);
  EXPECT_EQ(h.round_id, 0u);
  // Δ = θ(0) − θ(4) = −0.04 everywhere in fragment 1.
  for (const auto& t : f.tensors) EXPECT_TRUE(at::allclose(t, at::full_like(t, -0.04), 0, 1e-6));
  group->send(worker, round_atom::value, answer(h, 1.0f));

  EXPECT_FALSE(inner(self, worker, 5));
  auto p5 = params_of(self, worker);
  for (size_t i = 0; i < p5.size(); ++i)
    EXPECT_TRUE(at::allclose(p5[i].second, init[i].second + 0.05, 0, 1e-5))
        << p5[i].first << ": merged before its step";

  EXPECT_FALSE(inner(self, worker, 6));
  auto p6 = params_of(self, worker);
  for (size_t i = 0; i < p6.size(); ++i) {
    const auto local = init[i].second + 0.06;
    const auto want = frag[i] == 1 ? 0.5 * local + 0.5 * 1.0 : local;
    EXPECT_TRUE(at::allclose(p6[i].second, want, 0, 1e-5)) << p6[i].first;
  }

  EXPECT_FALSE(inner(self, worker, 7));
  EXPECT_FALSE(inner(self, worker, 8));
  auto [h0, f0] = next_contribution(group);
  EXPECT_EQ(h0.fragment, 0u);
  EXPECT_EQ(h0.step, 8u);
  EXPECT_FALSE(inner(self, worker, 9));
  EXPECT_TRUE(inner(self, worker, 10));  // held: the round of step 8 has not landed
  // Nothing reaches the tracker until the answer is merged.
  tracker->receive([&](applied_atom, uint64_t, uint32_t,
                       const messages::ProcessBytes&) { ADD_FAILURE() << "released early"; },
                   caf::after(std::chrono::milliseconds(200)) >> [] {});
  group->send(worker, round_atom::value, answer(h0, -2.0f));
  tracker->receive(
      [&](applied_atom, uint64_t step, uint32_t id, const messages::ProcessBytes& sent) {
        EXPECT_EQ(step, 10u);
        EXPECT_EQ(id, 7u);
        // The worker's process's counters ride along: the round's bytes are in them.
        ASSERT_EQ(sent.sent.size(), 5u);
        EXPECT_GT(sent.sent[static_cast<size_t>(actors::Traffic::pseudo_gradients)], 0u);
      },
      caf::after(std::chrono::seconds(10)) >> [] { ADD_FAILURE() << "step 10 never released"; });
  auto p10 = params_of(self, worker);
  for (size_t i = 0; i < p10.size(); ++i) {
    if (frag[i] != 0) continue;
    const auto local = init[i].second + 0.10;
    EXPECT_TRUE(at::allclose(p10[i].second, 0.5 * local + 0.5 * -2.0, 0, 1e-5)) << p10[i].first;
  }
  self->send_exit(worker, caf::exit_reason::user_shutdown);
}

// Eager (P = 1, H = 8, τ = 1, one worker per stage): after inner step 8 the worker steps its
// own outer optimizer at once with Δ̃ = Δ / 1 (no mean yet): θ = θ(0) − η·(Δ̃ + μ·b), b = Δ̃.
// The group's answer, a mean of two other workers, moves nothing when it lands at step 9; at
// step 16 the next round's Δ̃ = (Δ + 2·mean) / 3 (this worker was not in the mean) and the
// momentum carries over.
TEST(DilocoReplica, EagerStepsAtTheRoundStartAndTheMeanFeedsTheNext) {
  swarmrt::testing::TestSystem ts;
  auto ctx = std::make_shared<actors::SwarmContext>();
  ctx->config = streaming_config(1, 1, 0.0, config::Quantize::none);
  ctx->config.diloco.eager = true;
  config::validate(ctx->config, "test");
  const double eta = ctx->config.diloco.outer_lr, mu = ctx->config.diloco.outer_momentum;
  caf::scoped_actor group{*ts.sys}, tracker{*ts.sys}, self{*ts.sys};
  auto worker =
      ts.sys->spawn(driver<actors::DilocoReplica>, actors::ContextPtr(ctx),
                    caf::actor_cast<caf::actor>(group), caf::actor_cast<caf::actor>(tracker));
  const auto init = params_of(self, worker);
  for (uint64_t t = 1; t <= 7; ++t) EXPECT_FALSE(inner(self, worker, t));
  EXPECT_FALSE(inner(self, worker, 8));  // the eager step needs no answer
  auto [h, f] = next_contribution(group);
  EXPECT_EQ(h.round_id, 0u);
  EXPECT_FALSE(h.final);
  for (const auto& t : f.tensors) EXPECT_TRUE(at::allclose(t, at::full_like(t, -0.08), 0, 1e-6));
  double b = -0.08;
  const double first = -eta * (-0.08 + mu * b);  // +0.1064
  auto p8 = params_of(self, worker);
  for (size_t i = 0; i < p8.size(); ++i)
    EXPECT_TRUE(at::allclose(p8[i].second, init[i].second + first, 0, 1e-5)) << p8[i].first;

  messages::RoundHeader a = h;
  a.status = messages::RoundStatus::applied;
  a.average = true;
  a.contributors = {9, 11};
  std::vector<at::Tensor> mean;
  for (const auto& m : h.tensors) mean.push_back(at::full(m.shape, -0.05f));
  group->send(worker, round_atom::value, messages::make_round_frame(a, std::move(mean)));
  EXPECT_FALSE(inner(self, worker, 9));  // lands: nothing moves
  auto p9 = params_of(self, worker);
  for (size_t i = 0; i < p9.size(); ++i)
    EXPECT_TRUE(at::allclose(p9[i].second, init[i].second + first + 0.01, 0, 1e-5)) << p9[i].first;

  for (uint64_t t = 10; t <= 16; ++t) EXPECT_FALSE(inner(self, worker, t)) << t;
  auto [h1, f1] = next_contribution(group);
  EXPECT_EQ(h1.round_id, 1u);
  // Δ is taken from the eager anchor: eight inner steps of 0.01.
  for (const auto& t : f1.tensors) EXPECT_TRUE(at::allclose(t, at::full_like(t, -0.08), 0, 1e-5));
  const double tilde = (-0.08 + 2 * -0.05) / 3;
  b = mu * b + tilde;
  const double second = -eta * (tilde + mu * b);
  auto p16 = params_of(self, worker);
  for (size_t i = 0; i < p16.size(); ++i)
    EXPECT_TRUE(at::allclose(p16[i].second, init[i].second + first + second, 0, 1e-5))
        << p16[i].first;
  self->send_exit(worker, caf::exit_reason::user_shutdown);
}

// The bytes a 4-bit round puts on the wire, and counts, are the encoding's: per tensor 4 bytes
// per block of 128 plus half a byte per value; and the worker's answer arrives as an update.
TEST(DilocoReplica, RoundBytesEqualTheEncodingsCount) {
  for (auto q : {config::Quantize::int4, config::Quantize::fp4, config::Quantize::int8,
                 config::Quantize::fp16, config::Quantize::none}) {
    swarmrt::testing::TestSystem ts;
    auto ctx = std::make_shared<actors::SwarmContext>();
    ctx->config = streaming_config(2, 0, 0.0, q);
    caf::scoped_actor group{*ts.sys}, tracker{*ts.sys}, self{*ts.sys};
    auto worker =
        ts.sys->spawn(driver<actors::DilocoReplica>, actors::ContextPtr(ctx),
                      caf::actor_cast<caf::actor>(group), caf::actor_cast<caf::actor>(tracker));
    std::map<std::string, int64_t> numel;
    for (const auto& [name, t] : params_of(self, worker)) numel[name] = t.numel();
    for (uint64_t t = 1; t <= 3; ++t) EXPECT_FALSE(inner(self, worker, t));
    EXPECT_TRUE(inner(self, worker, 4));  // τ = 0: held until the answer
    auto [h, f] = next_contribution(group);
    uint64_t expected = 0, sent = 0;
    for (size_t k = 0; k < f.tensors.size(); ++k) {
      expected +=
          model::encoded_bytes(numel.at(h.tensor_names[k]), q, ctx->config.diloco.quant_block);
      sent += h.tensors[k].byte_size;
    }
    EXPECT_GT(expected, 0u);
    EXPECT_EQ(sent, expected) << config::name_of(q);
    EXPECT_EQ(ctx->bytes->get(actors::Traffic::pseudo_gradients), expected) << config::name_of(q);
    self->send_exit(worker, caf::exit_reason::user_shutdown);
  }
}

// A whole run with 2 fragments per stage, τ = 1, 4-bit rounds: every micro-batch once, each
// fragment's rounds applied once and in order, the loss falls, the stage's workers end on the
// same parameters (the last step's sync), and the rounds put several times fewer bytes on the
// wire than plain DiLoCo's.
TEST(StreamingDiloco, FragmentsOverlapAndFourBitRoundsTrain) {
  auto config = micro_run("diloco-swarm", 2, 2, 12);
  config.diloco.inner_steps = 4;
  const auto plain = run(config);
  config.diloco.fragments = 2;
  config.diloco.overlap_steps = 1;
  config.diloco.alpha = 0.5;
  config.diloco.quantize = config::Quantize::int4;
  config::validate(config, "test");
  const auto r = run(config);
  expect_two_fragments_in_order(r, config);
  const auto bytes = r.bytes.at("pseudo_gradients").get<double>();
  const auto plain_bytes = plain.bytes.at("pseudo_gradients").get<double>();
  // int4 with a scale per 128 values: 0.53 of a byte per value against 4, over 7 fragment
  // rounds of half the stage against 3 whole rounds: 0.53·3.5 / (4·3) = 0.15.
  EXPECT_LT(bytes, 0.2 * plain_bytes) << bytes << " vs " << plain_bytes;
}

// Sparse rounds in a whole run (2 stages of 2 workers, P = 2, τ = 1, top-k 5% in 2 bits, chunks
// of 256): each fragment's rounds applied once and in order, every micro-batch once, the
// stage's workers end equal, and the rounds send over 25x fewer bytes than plain DiLoCo's.
TEST(StreamingDiloco, SparseRoundsWithFragmentsAndOverlapTrain) {
  auto config = micro_run("diloco-swarm", 2, 2, 12);
  config.diloco.inner_steps = 4;
  const auto plain = run(config);
  config.diloco.fragments = 2;
  config.diloco.overlap_steps = 1;
  config.diloco.compress = config::Compress::topk;
  config.diloco.topk_density = 0.05;
  config.diloco.topk_chunk = 256;
  config::validate(config, "test");
  const auto r = run(config);
  expect_two_fragments_in_order(r, config);
  EXPECT_TRUE(std::isfinite(r.report.val_loss));
  const auto bytes = r.bytes.at("pseudo_gradients").get<double>();
  const auto plain_bytes = plain.bytes.at("pseudo_gradients").get<double>();
  // 5% of the values at 2 + 8 bits each plus 8 bytes per 256: 0.094 of a byte per value
  // against 4, over 7 half-stage rounds against 3 whole ones: 0.094·3.5 / (4·3) = 0.027, 37x;
  // the micro model's many small tensors each add a header and a range (29x, the same every run).
  EXPECT_LT(bytes, plain_bytes / 25) << bytes << " vs " << plain_bytes;
}

// All-gathered sparse rounds in a whole run (2 stages of 2 workers, P = 2, τ = 1, top-k 5% in
// 2 bits, outer lr 2): each worker is answered with the other's contribution as sent and sums
// the two as its group does, so each fragment's rounds apply once and in order and the stage's
// workers end on the same parameters with no θ sent; each answer carries one contribution, so
// the answers' bytes equal the contributions' (neither is encoded again).
TEST(StreamingDiloco, AllGatheredSparseRoundsKeepTheWorkersEqual) {
  auto config = micro_run("diloco-swarm", 2, 2, 12);
  config.diloco.inner_steps = 4;
  config.diloco.fragments = 2;
  config.diloco.overlap_steps = 1;
  config.diloco.compress = config::Compress::topk;
  config.diloco.topk_density = 0.05;
  config.diloco.topk_chunk = 256;
  config.diloco.outer_lr = 2;
  config.diloco.outer_momentum = 0;
  config.diloco.all_gather = true;
  config::validate(config, "test");
  const auto r = run(config);
  expect_two_fragments_in_order(r, config);
  EXPECT_TRUE(std::isfinite(r.report.val_loss));
  EXPECT_EQ(r.bytes.at("parameters").get<double>(), r.bytes.at("pseudo_gradients").get<double>());
}

// Sparse rounds resumed from a checkpoint continue as if the run had never stopped: each
// worker's error feedback and its group's are in the checkpoint (what the rounds so far left
// unsent), so the losses after step 8 match the uninterrupted run's to 1e-4.
TEST(StreamingDiloco, SparseRoundsResumeWithTheirErrorFeedback) {
  auto config = micro_run("diloco-swarm", 2, 1, 12);
  config.diloco.inner_steps = 2;
  config.diloco.compress = config::Compress::topk;
  config.diloco.topk_density = 0.05;
  config.diloco.topk_chunk = 256;
  config.checkpoint.every_steps = 4;
  config::validate(config, "test");
  swarmrt::testing::TempDir dir;
  const auto whole = run_in(dir.path(), config).report.losses;
  ASSERT_EQ(whole.size(), 12u);
  model::CheckpointDir ckpts((dir.path() / "checkpoints").string());
  auto files = ckpts.list();
  ASSERT_NE(files.front().find("step_00000012"), std::string::npos) << files.front();
  std::filesystem::remove(files.front());
  files = ckpts.list();
  size_t residuals = 0;
  for (const auto& [name, t] : model::read_checkpoint(files.front()).tensors)
    if (name.find("residual/") != std::string::npos) ++residuals;
  EXPECT_GT(residuals, 0u) << "no error feedback in " << files.front();
  const auto from8 = swarmrt::testing::resume_in(dir.path(), config).report.losses;
  ASSERT_EQ(from8.size(), 4u);
  for (size_t i = 0; i < from8.size(); ++i)
    EXPECT_NEAR(from8[i], whole[8 + i], 1e-4) << "step " << 9 + i;
}

// Eager in a whole run (2 stages of 2 workers, P = 2, τ = 1, int4): the groups answer with
// means, each fragment's rounds are applied once and in order, every micro-batch once, the
// loss falls, and the last step's θ(t) leaves each stage's workers on the same parameters
// although each stepped its own outer optimizer.
TEST(StreamingDiloco, EagerRoundsTrainAndEndOnTheGroupsTheta) {
  auto config = micro_run("diloco-swarm", 2, 2, 12);
  config.diloco.inner_steps = 4;
  config.diloco.fragments = 2;
  config.diloco.overlap_steps = 1;
  config.diloco.quantize = config::Quantize::int4;
  config.diloco.eager = true;
  config::validate(config, "test");
  const auto r = run(config);
  expect_two_fragments_in_order(r, config);
  EXPECT_TRUE(std::isfinite(r.report.val_loss));
}

// A stage-1 worker killed while a fragment's round is in flight (its contribution sent at the
// apply of step 2, landing at step 3's; or killed in step 3 before it lands): the group applies
// every fragment's rounds once each and in order, without the dead worker or with its
// successor, the step is counted once, and the stage's workers end on the same parameters;
// with the merge by α and with eager steps.
class StreamingWorkerKilled
    : public ::testing::TestWithParam<std::pair<int64_t, config::KillPhase>> {};

void killed_with_a_round_in_flight(int64_t step, config::KillPhase phase, bool eager);

TEST_P(StreamingWorkerKilled, EveryFragmentRoundAppliedOnce) {
  for (bool eager : {false, true}) {
    SCOPED_TRACE(eager ? "eager" : "merged with alpha");
    killed_with_a_round_in_flight(GetParam().first, GetParam().second, eager);
  }
}

void killed_with_a_round_in_flight(int64_t step, config::KillPhase phase, bool eager) {
  auto config = micro_run("diloco-swarm", 2, 2, 12);
  config.diloco.inner_steps = 4;
  config.diloco.fragments = 2;
  config.diloco.overlap_steps = 1;
  config.diloco.alpha = 0.5;
  config.diloco.quantize = config::Quantize::int4;
  config.diloco.eager = eager;
  config.chaos.kill = "stage1/worker1";
  config.chaos.kill_at_step = step;
  config.chaos.kill_at_phase = phase;
  config::validate(config, "test");
  const auto r = run(config);
  EXPECT_EQ(r.kills, 1u);
  EXPECT_GE(r.restarts, 1u);
  expect_two_fragments_in_order(r, config);
}

INSTANTIATE_TEST_SUITE_P(Phases, StreamingWorkerKilled,
                         ::testing::Values(std::make_pair(int64_t{2}, config::KillPhase::apply),
                                           std::make_pair(int64_t{3}, config::KillPhase::start),
                                           std::make_pair(int64_t{3}, config::KillPhase::reduce)));
