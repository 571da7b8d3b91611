// A real DiLoCo group actor, driven by scoped actors standing in as the stage's workers.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <ATen/CPUGeneratorImpl.h>
#include <algorithm>
#include <limits>

#include "../actor_test_util.hpp"
#include "actors/diloco/diloco_group.hpp"
#include "model/quantize.hpp"
#include "model/topk.hpp"
#include "round_util.hpp"

using namespace swarmrt;
using namespace swarmrt::atoms;
using messages::RoundHeader;
using messages::RoundStatus;
using swarmrt::testing::contribution;

namespace {

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

// Stage 0's DiLoCo group over θ = `theta`, with `workers` (ids 1, 2, ...) as its members: the
// first of them announces the membership.
caf::actor spawn_group(swarmrt::testing::TestSystem& ts,
                       const std::shared_ptr<actors::SwarmContext>& ctx, at::Tensor theta,
                       std::vector<caf::scoped_actor*> workers) {
  auto group = ts.sys->spawn(actors::diloco_group, std::shared_ptr<const actors::SwarmContext>(ctx),
                             uint32_t{0}, model::NamedTensors{{"w", std::move(theta)}},
                             std::make_shared<actors::GroupStore>(), caf::actor{});
  messages::Membership m;
  m.stages.emplace_back();
  for (uint32_t i = 0; i < workers.size(); ++i)
    m.stages[0].push_back({i + 1, 0, caf::actor_cast<caf::actor>(*workers[i]), {}});
  (*workers[0])->send(group, members_atom::value, m);
  return group;
}
}  // namespace

TEST(DilocoGroup, AppliesEachRoundOnceAndRejectsLateContributions) {
  swarmrt::testing::TestSystem ts;
  auto ctx = std::make_shared<actors::SwarmContext>();
  ctx->config.diloco.outer_lr = 0.7;
  ctx->config.diloco.outer_momentum = 0.9;
  caf::scoped_actor a{*ts.sys}, b{*ts.sys};
  auto group = spawn_group(ts, ctx, at::tensor({1.0f, 2.0f}), {&a, &b});

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
          [&](const messages::GroupStats& st) {
            EXPECT_EQ(st.last_applied, 0);  // round 0 applied exactly once
            EXPECT_EQ(st.rejected, 4u);
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

namespace {
// The communicator a group announces: its epoch (0 when none came).
uint64_t announced_epoch(caf::scoped_actor& self, size_t members) {
  uint64_t epoch = 0;
  self->receive(
      [&](group_comm_atom, const messages::GroupComm& c) {
        EXPECT_EQ(c.backend, "tcp");
        EXPECT_EQ(c.handles.size(), members);
        epoch = c.epoch;
      },
      caf::after(std::chrono::seconds(10)) >> [&] { ADD_FAILURE() << "no communicator"; });
  return epoch;
}

// The group's answer to a worker at a round: (round, epoch, go); round = -1 when none came.
std::tuple<int64_t, uint64_t, bool> answer(
    caf::scoped_actor& self, std::chrono::milliseconds wait = std::chrono::seconds(10)) {
  std::tuple<int64_t, uint64_t, bool> out{-1, 0, false};
  self->receive(
      [&](group_go_atom, uint64_t round, uint64_t epoch, bool go) {
        out = {static_cast<int64_t>(round), epoch, go};
      },
      caf::after(wait) >> [] {});
  return out;
}
}  // namespace

// The group lets its communicator's workers all-reduce a round only once every one of them
// has said it is at the round and can; otherwise all of them report their own, so no
// all-reduce ever waits on a rank that will not come.
TEST(DilocoGroup, AllReduceGoesAheadOnlyWhenEveryWorkerOfTheCommunicatorIsThere) {
  swarmrt::testing::TestSystem ts;
  auto ctx = std::make_shared<actors::SwarmContext>();
  ctx->config.transport.links = config::Links::comm;
  caf::scoped_actor a{*ts.sys}, b{*ts.sys}, c{*ts.sys};
  auto group = spawn_group(ts, ctx, at::tensor({1.0f, 2.0f}), {&a, &b, &c});
  const uint64_t e = announced_epoch(a, 3);
  ASSERT_GT(e, 0u);
  EXPECT_EQ(announced_epoch(b, 3), e);
  EXPECT_EQ(announced_epoch(c, 3), e);

  // Round 0: all three are there and can; the third one's word lets all of them go.
  a->send(group, group_ready_atom::value, uint64_t{0}, e, true);
  b->send(group, group_ready_atom::value, uint64_t{0}, e, true);
  EXPECT_EQ(std::get<0>(answer(a, std::chrono::milliseconds(300))), -1) << "went with 2 of 3";
  c->send(group, group_ready_atom::value, uint64_t{0}, e, true);
  for (auto* w : {&a, &b, &c}) EXPECT_EQ(answer(*w), std::make_tuple(int64_t{0}, e, true));

  // Round 1: one worker cannot all-reduce: every worker reports its own, also one that says
  // it is there afterwards.
  a->send(group, group_ready_atom::value, uint64_t{1}, e, true);
  c->send(group, group_ready_atom::value, uint64_t{1}, e, false);
  EXPECT_EQ(answer(a), std::make_tuple(int64_t{1}, e, false));
  EXPECT_EQ(answer(c), std::make_tuple(int64_t{1}, e, false));
  b->send(group, group_ready_atom::value, uint64_t{1}, e, true);
  EXPECT_EQ(answer(b), std::make_tuple(int64_t{1}, e, false));

  // Round 2: a worker is lost while the others wait: they report their own, and the group
  // announces a communicator of the two left.
  a->send(group, group_ready_atom::value, uint64_t{2}, e, true);
  b->send(group, group_ready_atom::value, uint64_t{2}, e, true);
  messages::Membership two;
  two.stages = {
      {{1, 0, caf::actor_cast<caf::actor>(a), {}}, {2, 0, caf::actor_cast<caf::actor>(b), {}}}};
  two.version = 1;  // newer than the first
  a->send(group, members_atom::value, two);
  EXPECT_EQ(answer(a), std::make_tuple(int64_t{2}, e, false));
  EXPECT_EQ(answer(b), std::make_tuple(int64_t{2}, e, false));
  const uint64_t e2 = announced_epoch(a, 2);
  EXPECT_GT(e2, e);
  EXPECT_EQ(announced_epoch(b, 2), e2);

  // Round 3: a worker that still speaks of the old communicator makes the round go alone for
  // the other too; then both on the new one go together.
  a->send(group, group_ready_atom::value, uint64_t{3}, e, true);
  EXPECT_EQ(answer(a), std::make_tuple(int64_t{3}, e, false));
  b->send(group, group_ready_atom::value, uint64_t{3}, e2, true);
  EXPECT_EQ(answer(b), std::make_tuple(int64_t{3}, e2, false));
  a->send(group, group_ready_atom::value, uint64_t{4}, e2, true);
  b->send(group, group_ready_atom::value, uint64_t{4}, e2, true);
  EXPECT_EQ(answer(a), std::make_tuple(int64_t{4}, e2, true));
  EXPECT_EQ(answer(b), std::make_tuple(int64_t{4}, e2, true));
  // A stranger is never part of it.
  c->send(group, group_ready_atom::value, uint64_t{5}, e2, true);
  EXPECT_EQ(answer(c), std::make_tuple(int64_t{5}, e2, false));
  a->send_exit(group, caf::exit_reason::user_shutdown);
}

// A contribution holding a NaN or an Inf is refused with the reason, and the round goes on
// without that worker as if it had failed in it: the others' mean is applied at once (no
// wait for the round timeout) and θ stays finite. Before, the group applied it: θ became NaN.
TEST(DilocoGroup, ANonFiniteContributionIsRefusedAndTheRoundGoesOn) {
  for (float poison :
       {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity()}) {
    swarmrt::testing::TestSystem ts;
    auto ctx = std::make_shared<actors::SwarmContext>();
    ctx->config.diloco.outer_lr = 0.7;
    ctx->config.diloco.outer_momentum = 0.9;
    ctx->config.diloco.round_timeout_s = 600;  // a wait for the quorum would fail the test
    caf::scoped_actor a{*ts.sys}, b{*ts.sys};
    auto group = spawn_group(ts, ctx, at::tensor({1.0f, 2.0f}), {&a, &b});
    a->send(group, round_atom::value, contribution(0, 1, at::tensor({poison, 0.0f})));
    auto [refused, rf] = next_round(a);
    EXPECT_EQ(refused.status, RoundStatus::rejected);
    EXPECT_NE(refused.reason.find("tensor 'w' holds NaN or Inf values"), std::string::npos)
        << refused.reason;
    // A wrong dtype is refused as well, naming the tensor.
    b->send(group, round_atom::value, contribution(0, 2, at::tensor({0.1f, 0.2f}).to(at::kHalf)));
    auto [typed, tf] = next_round(b);
    EXPECT_EQ(typed.status, RoundStatus::rejected);
    EXPECT_NE(typed.reason.find("tensor 'w' mismatches"), std::string::npos) << typed.reason;
    b->send(group, round_atom::value, contribution(0, 2, at::tensor({0.2f, 0.4f})));
    // Δ = (0.2, 0.4) from worker 2 alone: θ(1) = θ − 0.7 · 1.9 · Δ, for both workers.
    for (auto* self : {&a, &b}) {
      auto [h, f] = next_round(*self);
      EXPECT_EQ(h.status, RoundStatus::applied);
      EXPECT_EQ(h.round_id, 0u);
      EXPECT_TRUE(at::isfinite(f.tensors[0]).all().item<bool>());
      EXPECT_TRUE(
          at::allclose(f.tensors[0], at::tensor({1.0f - 1.33f * 0.2f, 2.0f - 1.33f * 0.4f})))
          << f.tensors[0];
    }
    a->send_exit(group, caf::exit_reason::user_shutdown);
  }
}

// Eager (P = 1, two workers): each worker steps its own outer optimizer with its Δ̃_i
// (model::eager_delta, from the means the group answered) and the group answers with the
// mean Δ̄; over four rounds of different Δ's the group's θ stays the mean of the workers' θ,
// so the last step's exact outer step starts from where the workers are. Stepping θ with Δ̄
// drifts from them (by half the first round's step, then by rounds of momentum).
TEST(DilocoGroup, EagerThetaStaysTheMeanOfTheWorkersOwnOuterSteps) {
  for (auto q : {config::Quantize::none, config::Quantize::int4}) {
    SCOPED_TRACE(config::name_of(q));
    swarmrt::testing::TestSystem ts;
    auto ctx = std::make_shared<actors::SwarmContext>();
    auto& d = ctx->config.diloco;
    d.outer_lr = 0.7;
    d.outer_momentum = 0.9;
    d.overlap_steps = 1;
    d.eager = true;
    d.quantize = q;
    d.quant_block = 4;
    ctx->config.swarm.workers_per_stage = 2;
    const auto theta0 = at::tensor({1.0f, 2.0f, -1.0f, 0.5f, 3.0f, -2.0f, 0.25f, 1.5f});
    caf::scoped_actor a{*ts.sys}, b{*ts.sys};
    auto group = spawn_group(ts, ctx, theta0.clone(), {&a, &b});

    struct Worker {
      caf::scoped_actor* self;
      uint32_t id;
      std::unique_ptr<model::OuterNesterov> outer;
      model::NamedTensors last_sent;  // the Δ the group decoded of the last round
    };
    std::vector<Worker> workers;
    workers.push_back({&a, 1, {}, {}});
    workers.push_back({&b, 2, {}, {}});
    for (auto& w : workers)
      w.outer = std::make_unique<model::OuterNesterov>(model::NamedTensors{{"w", theta0.clone()}},
                                                       0.7, 0.9);
    model::NamedTensors mean;  // the last round's mean, as decoded
    std::vector<uint32_t> mean_of;
    auto gen = at::make_generator<at::CPUGeneratorImpl>(11);
    for (uint64_t round = 0; round < 4; ++round) {
      for (auto& w : workers) {
        const auto delta = at::randn({8}, gen) * 0.1;
        const auto wire = q == config::Quantize::none ? delta : model::encode(delta, q, 4);
        const model::NamedTensors own{
            {"w", q == config::Quantize::none ? delta : model::decode(wire, q, 4, {8})}};
        const bool was_in = !mean.empty() && !w.last_sent.empty() &&
                            std::count(mean_of.begin(), mean_of.end(), w.id) > 0;
        const auto tilde = model::eager_delta(own, mean.empty() ? nullptr : &mean, mean_of.size(),
                                              was_in ? &w.last_sent : nullptr, 2);
        w.outer->step({&tilde});
        w.last_sent = own;
        (*w.self)->send(group, round_atom::value, contribution(round, w.id, wire));
      }
      for (auto& w : workers) {
        auto [h, f] = next_round(*w.self);
        ASSERT_EQ(h.status, RoundStatus::applied);
        EXPECT_TRUE(h.average);
        mean = {{"w", q == config::Quantize::none ? f.tensors[0]
                                                  : model::decode(f.tensors[0], q, 4, {8})}};
        mean_of = h.contributors;
      }
      const auto expected =
          (workers[0].outer->theta()[0].second + workers[1].outer->theta()[0].second) / 2;
      a->request(group, caf::infinite, params_atom::value)
          .receive(
              [&](const messages::TensorList& theta) {
                EXPECT_TRUE(at::allclose(theta.tensors[0], expected, 1e-5, 1e-6))
                    << "round " << round << ": " << theta.tensors[0] << " vs " << expected;
              },
              [&](const caf::error& e) { FAIL() << ts.sys->render(e); });
    }
    a->send_exit(group, caf::exit_reason::user_shutdown);
  }
}

namespace {
// Worker `worker`'s θ at the end of a synchronous warm-up of stage 0 (its step).
messages::Frame warmup_end(uint32_t worker, uint64_t step, at::Tensor theta) {
  RoundHeader h;
  h.stage = 0;
  h.contributor = worker;
  h.step = step;
  h.status = RoundStatus::contribution;
  h.warmup_end = true;
  h.tensor_names = {"w"};
  return messages::make_round_frame(h, {std::move(theta)});
}
}  // namespace

// diloco.warmup_sync_steps = 3: the group's rounds start from the first θ(3) a worker sends,
// with the outer momentum at zero; every sender hears that it was taken; θ of another shape or
// from another step is refused by name; a group restarted on the same store goes on from it.
TEST(DilocoGroup, RoundsStartFromTheWorkersThetaAtTheWarmUpsEnd) {
  swarmrt::testing::TestSystem ts;
  auto ctx = std::make_shared<actors::SwarmContext>();
  ctx->config.diloco.outer_lr = 0.7;
  ctx->config.diloco.outer_momentum = 0.9;
  ctx->config.diloco.warmup_sync_steps = 3;
  caf::scoped_actor a{*ts.sys}, b{*ts.sys};
  auto store = std::make_shared<actors::GroupStore>();
  auto group = ts.sys->spawn(actors::diloco_group, std::shared_ptr<const actors::SwarmContext>(ctx),
                             uint32_t{0}, model::NamedTensors{{"w", at::tensor({1.0f, 2.0f})}},
                             store, caf::actor{});
  messages::Membership m;
  m.stages.emplace_back();
  m.stages[0].push_back({1, 0, caf::actor_cast<caf::actor>(a), {}});
  m.stages[0].push_back({2, 0, caf::actor_cast<caf::actor>(b), {}});
  a->send(group, members_atom::value, m);

  a->send(group, round_atom::value, warmup_end(1, 3, at::tensor({1.0f, 2.0f, 3.0f})));
  auto [shape, f0] = next_round(a);
  EXPECT_EQ(shape.status, RoundStatus::rejected);
  EXPECT_NE(shape.reason.find("not float32 of θ's shape"), std::string::npos) << shape.reason;
  a->send(group, round_atom::value, warmup_end(1, 2, at::tensor({4.0f, 5.0f})));
  auto [early, f1] = next_round(a);
  EXPECT_EQ(early.status, RoundStatus::rejected);
  EXPECT_NE(early.reason.find("the warm-up ends at step 3, not 2"), std::string::npos)
      << early.reason;

  a->send(group, round_atom::value, warmup_end(1, 3, at::tensor({4.0f, 5.0f})));
  b->send(group, round_atom::value, warmup_end(2, 3, at::tensor({9.0f, 9.0f})));
  for (auto* self : {&a, &b}) {
    auto [h, f] = next_round(*self);
    EXPECT_EQ(h.status, RoundStatus::applied);
    EXPECT_TRUE(h.warmup_end);
    EXPECT_TRUE(f.tensors.empty());
  }
  // Round 0 from θ(3) = (4, 5) with no momentum yet: θ − 0.7 (Δ + 0.9 Δ), Δ = (0.1, 0.2).
  a->send(group, round_atom::value, contribution(0, 1, at::tensor({0.2f, 0.0f})));
  b->send(group, round_atom::value, contribution(0, 2, at::tensor({0.0f, 0.4f})));
  const auto want = at::tensor({4.0f - 1.33f * 0.1f, 5.0f - 1.33f * 0.2f});
  for (auto* self : {&a, &b}) {
    auto [h, f] = next_round(*self);
    EXPECT_EQ(h.status, RoundStatus::applied);
    EXPECT_EQ(h.round_id, 0u);
    EXPECT_TRUE(at::allclose(f.tensors[0], want)) << f.tensors[0];
  }
  a->send_exit(group, caf::exit_reason::user_shutdown);

  // A successor on the same store (a restart) holds θ(1), and takes no second warm-up θ.
  auto successor = ts.sys->spawn(
      actors::diloco_group, std::shared_ptr<const actors::SwarmContext>(ctx), uint32_t{0},
      model::NamedTensors{{"w", at::tensor({1.0f, 2.0f})}}, store, caf::actor{});
  a->send(successor, members_atom::value, m);
  a->send(successor, round_atom::value, warmup_end(1, 3, at::tensor({7.0f, 7.0f})));
  (void)next_round(a);  // θ(1), sent to a member new to the successor
  auto [again, f2] = next_round(a);
  EXPECT_TRUE(again.warmup_end);
  EXPECT_EQ(again.status, RoundStatus::applied);
  a->request(successor, caf::infinite, params_atom::value)
      .receive(
          [&](const messages::TensorList& theta) {
            EXPECT_TRUE(at::allclose(theta.tensors[0], want));
          },
          [&](const caf::error& e) { FAIL() << ts.sys->render(e); });
  a->send_exit(successor, caf::exit_reason::user_shutdown);
}

// diloco.outer_lr_schedule = cosine over a run of 10 steps (outer_lr 1, floor 0.2, no
// momentum): a round started after step 5 steps θ by 0.6·Δ̄, one after step 10 by 0.2·Δ̄; the
// group takes the rate from the round's step, as each eager worker does for its own step.
TEST(DilocoGroup, EachRoundStepsWithTheOuterRateOfItsStep) {
  swarmrt::testing::TestSystem ts;
  auto ctx = std::make_shared<actors::SwarmContext>();
  ctx->config.train.steps = 10;
  ctx->config.diloco.outer_lr = 1.0;
  ctx->config.diloco.outer_momentum = 0.0;
  ctx->config.diloco.outer_lr_schedule = config::Schedule::cosine;
  ctx->config.diloco.outer_min_lr = 0.2;
  caf::scoped_actor a{*ts.sys}, b{*ts.sys};
  auto group = spawn_group(ts, ctx, at::tensor({1.0f, 2.0f}), {&a, &b});
  a->send(group, round_atom::value, contribution(0, 1, at::tensor({1.0f, 0.0f}), 5));
  b->send(group, round_atom::value, contribution(0, 2, at::tensor({0.0f, 1.0f}), 5));
  auto want = at::tensor({1.0f - 0.6f * 0.5f, 2.0f - 0.6f * 0.5f});
  for (auto* self : {&a, &b}) {
    auto [h, f] = next_round(*self);
    EXPECT_EQ(h.status, RoundStatus::applied);
    EXPECT_TRUE(at::allclose(f.tensors[0], want)) << f.tensors[0];
  }
  a->send(group, round_atom::value, contribution(1, 1, at::tensor({1.0f, 1.0f}), 10));
  b->send(group, round_atom::value, contribution(1, 2, at::tensor({1.0f, 1.0f}), 10));
  want = want - 0.2f;
  for (auto* self : {&a, &b}) {
    auto [h, f] = next_round(*self);
    EXPECT_EQ(h.round_id, 1u);
    EXPECT_TRUE(at::allclose(f.tensors[0], want)) << f.tensors[0];
  }
  a->send_exit(group, caf::exit_reason::user_shutdown);
}

namespace {
// A worker's top-k contribution at `density` (a rung of auto's ladder) whose header says its link
// carries `carried` (0: auto does not choose).
messages::Frame sparse_contribution(const config::DilocoConfig& d, uint64_t round, uint32_t worker,
                                    double density, double carried) {
  auto dk = d;
  dk.topk_density = density;
  auto gen = at::make_generator<at::CPUGeneratorImpl>(40 + worker);
  auto delta = at::randn({4096}, gen);
  auto frame = contribution(round, worker, model::encode_round(delta, dk));
  auto h = messages::open_round_frame(frame);
  h.density = carried;
  return messages::make_round_frame(h, std::move(frame.tensors));
}
}  // namespace

// swarm.compression = auto under diloco.all_gather: each member's answer is the other's wire as it
// came, and says the least density the round's links carry, which caps every member's next
// contribution; each round's least is its own (a faster round raises it again).
TEST(DilocoGroup, AllGatheredAnswersCarryTheLeastDensityOfTheRoundsLinks) {
  swarmrt::testing::TestSystem ts;
  auto ctx = std::make_shared<actors::SwarmContext>();
  ctx->config.swarm.compression = config::Compression::automatic;
  auto& d = ctx->config.diloco;
  d.compress = config::Compress::topk;
  d.topk_density = 0.02;
  d.outer_lr = 1.0;
  d.outer_momentum = 0.0;
  d.all_gather = true;
  caf::scoped_actor a{*ts.sys}, b{*ts.sys};
  auto group = spawn_group(ts, ctx, at::zeros({4096}), {&a, &b});
  struct Round {
    double a_sent, a_carried, b_sent, b_carried, cap;
  };
  // Round 0: node b's link carries 4%; round 1: 8% (the cap rises with it); round 2: one header
  // tells none (a worker whose density auto does not choose), the other's stands.
  const std::vector<Round> rounds{{0.16, 0.16, 0.04, 0.04, 0.04},
                                  {0.04, 0.16, 0.08, 0.08, 0.08},
                                  {0.08, 0.0, 0.08, 0.16, 0.16}};
  for (uint64_t round = 0; round < rounds.size(); ++round) {
    const auto& r = rounds[round];
    const auto from_a = sparse_contribution(d, round, 1, r.a_sent, r.a_carried);
    const auto from_b = sparse_contribution(d, round, 2, r.b_sent, r.b_carried);
    a->send(group, round_atom::value, from_a);
    b->send(group, round_atom::value, from_b);
    for (auto [self, other] : {std::pair{&a, &from_b}, std::pair{&b, &from_a}}) {
      auto [h, f] = next_round(*self);
      EXPECT_EQ(h.status, RoundStatus::applied);
      EXPECT_EQ(h.round_id, round);
      EXPECT_TRUE(h.gathered);
      EXPECT_EQ(h.density, r.cap) << "round " << round;
      ASSERT_EQ(f.tensors.size(), 1u);
      EXPECT_TRUE(at::equal(f.tensors[0], other->tensors[0])) << "round " << round;
    }
  }
  a->send_exit(group, caf::exit_reason::user_shutdown);
}
