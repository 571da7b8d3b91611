// A real stage worker fed malformed frames: it refuses each with a reason and keeps serving.
#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <cmath>

#include "../actor_test_util.hpp"
#include "actors/stage/stage_worker.hpp"
#include "actors/stage/worker_faults.hpp"
#include "model/hop_codec.hpp"

using namespace swarmrt;
using namespace swarmrt::atoms;
using messages::Direction;

namespace {
// Worker `id` of `stage`, driven by the test (no tracker to ask for a state), as the only
// member of its stage.
caf::actor spawn_worker(swarmrt::testing::TestSystem& ts, caf::scoped_actor& tracker,
                        std::shared_ptr<actors::SwarmContext> ctx, uint32_t id, uint32_t stage) {
  actors::WorkerSetup ws;
  ws.ctx = std::move(ctx);
  ws.id = id;
  ws.stage = stage;
  ws.tracker = caf::actor_cast<caf::actor>(tracker);
  ws.take_state = false;
  auto worker = ts.sys->spawn<caf::detached>(actors::stage_worker, ws);
  messages::Membership m;
  m.stages.resize(stage + 1);
  m.stages[stage] = {{id, stage, worker, {}}};
  tracker->send(worker, members_atom::value, m);
  return worker;
}
}  // namespace

TEST(StageWorker, RejectsMalformedFramesAndKeepsServing) {
  swarmrt::testing::TestSystem ts;
  auto ctx = std::make_shared<actors::SwarmContext>();
  ctx->config.model = {"tiny", 2, 2, 32, 16, 256};
  caf::scoped_actor tracker{*ts.sys};
  auto worker = spawn_worker(ts, tracker, ctx, 0, 0);

  messages::MicroBatchHeader h;
  h.direction = Direction::eval;
  h.samples = 2;
  auto ids = at::randint(0, 256, {2, 16}, at::kLong);
  auto good = messages::make_frame(h, {ids, ids});

  auto truncated = good;
  truncated.header.resize(truncated.header.size() - 8);
  auto unaligned = good;
  unaligned.header.resize(unaligned.header.size() - 3);
  auto wrong_shape = good;
  wrong_shape.tensors[0] = at::randint(0, 256, {2, 15}, at::kLong);       // header says [2, 16]
  auto wrong_dtype = messages::make_frame(h, {ids.to(at::kFloat), ids});  // stage 0 needs ids
  auto too_long = messages::make_frame(h, {at::zeros({2, 17}, at::kLong), ids});  // > block
  for (auto* f : {&truncated, &unaligned, &wrong_shape, &wrong_dtype, &too_long})
    tracker->send(worker, frame_atom::value, *f);
  tracker->send(worker, frame_atom::value, good);

  tracker->receive(
      [&](eval_loss_atom, uint64_t, uint32_t, double loss) {
        EXPECT_GT(loss, 4.0);  // an untrained byte model: about ln(256) = 5.5
        EXPECT_LT(loss, 7.0);
      },
      caf::after(std::chrono::seconds(20)) >> [&] { FAIL() << "the worker stopped serving"; });
  tracker->request(worker, caf::infinite, stats_atom::value)
      .receive([&](const messages::WorkerStats& st) { EXPECT_EQ(st.rejected, 5u); },
               [&](const caf::error& e) { FAIL() << ts.sys->render(e); });
  tracker->send_exit(worker, caf::exit_reason::user_shutdown);
}

namespace {
// A 2-stage pp run of the tiny test model, as its last stage's worker sees it.
std::shared_ptr<actors::SwarmContext> last_stage_context() {
  auto ctx = std::make_shared<actors::SwarmContext>();
  ctx->config.model = {"tiny", 2, 2, 32, 16, 256};
  ctx->config.swarm.mode = config::Mode::pp;
  ctx->config.swarm.stages = 2;
  return ctx;
}

// An evaluation hop's header for stage 1.
messages::MicroBatchHeader eval_header() {
  messages::MicroBatchHeader h;
  h.direction = Direction::eval;
  h.stage = 1;
  h.samples = 2;
  return h;
}

// Sends `frames` to stage-1 worker 1000 in order: every one but the last is refused (counted),
// the last is served (its evaluation loss comes back).
void expect_only_the_last_served(std::shared_ptr<actors::SwarmContext> ctx,
                                 const std::vector<messages::Frame>& frames) {
  swarmrt::testing::TestSystem ts;
  caf::scoped_actor tracker{*ts.sys};
  auto worker = spawn_worker(ts, tracker, std::move(ctx), 1000, 1);
  for (const auto& f : frames) tracker->send(worker, frame_atom::value, f);
  tracker->receive(
      [&](eval_loss_atom, uint64_t, uint32_t, double loss) { EXPECT_TRUE(std::isfinite(loss)); },
      caf::after(std::chrono::seconds(20)) >> [&] { FAIL() << "the worker stopped serving"; });
  tracker->request(worker, caf::infinite, stats_atom::value)
      .receive([&](const messages::WorkerStats& st) { EXPECT_EQ(st.rejected, frames.size() - 1); },
               [&](const caf::error& e) { FAIL() << ts.sys->render(e); });
  tracker->send_exit(worker, caf::exit_reason::user_shutdown);
}
}  // namespace

// A bf16 run's last stage: hidden states come in bf16. A hop in float32 (a peer computing in
// another precision) and a hop whose tensor disagrees with its header's dtype are refused;
// the right one is served.
TEST(StageWorker, RefusesHiddenStatesInADtypeOtherThanTheRunsPrecision) {
  auto ctx = last_stage_context();
  ctx->config.train.precision = config::Precision::bf16;
  const auto h = eval_header();
  auto ids = at::randint(0, 256, {2, 16}, at::kLong);
  auto hidden = at::randn({2, 16, 32});
  auto lying = messages::make_frame(h, {hidden.to(at::kBFloat16), ids});
  lying.tensors[0] = hidden.to(at::kHalf);  // same bytes, the header says bf16
  expect_only_the_last_served(ctx, {messages::make_frame(h, {hidden, ids}), lying,
                                    messages::make_frame(h, {hidden.to(at::kBFloat16), ids})});
}

// An int8-hop run's last stage: a hop in another encoding, one whose payload is not what int8
// writes, and one whose int8 payload is cut short are refused with their reasons; the right
// one is decoded and served.
TEST(StageWorker, RefusesHopsWhosePayloadDisagreesWithTheirEncoding) {
  auto ctx = last_stage_context();
  ctx->config.swarm.hop_encoding = config::HopEncoding::int8;
  auto h = eval_header();
  auto ids = at::randint(0, 256, {2, 16}, at::kLong);
  auto hidden = at::randn({2, 16, 32});
  auto wire =
      model::encode_hop(hidden, config::HopEncoding::int8, 128, model::HopDirection::forward, 0);
  auto unencoded = messages::make_frame(h, {hidden, ids});  // header: encoding none
  h.hop_encoding = static_cast<uint8_t>(config::HopEncoding::int8);
  expect_only_the_last_served(ctx,
                              {unencoded, messages::make_frame(h, {hidden, ids}),
                               messages::make_frame(h, {wire.narrow(0, 0, wire.numel() - 4), ids}),
                               messages::make_frame(h, {wire, ids})});
}

// entropy hops are inflated whole before the worker builds anything from them: a frame cut
// short, one with a byte changed (its checksum) and one for another shape are refused, counted
// and logged, and the worker serves the next.
TEST(StageWorker, RefusesEntropyHopsWhoseFrameIsCorrupt) {
  auto ctx = last_stage_context();
  ctx->config.swarm.hop_encoding = config::HopEncoding::entropy;
  auto h = eval_header();
  h.hop_encoding = static_cast<uint8_t>(config::HopEncoding::entropy);
  auto ids = at::randint(0, 256, {2, 16}, at::kLong);
  auto hidden = at::randn({2, 16, 32});
  auto wire =
      model::encode_hop(hidden, config::HopEncoding::entropy, 128, model::HopDirection::forward, 0);
  auto changed = wire.clone();
  changed[wire.numel() - 9].bitwise_xor_(0x5a);
  auto other = model::encode_hop(at::randn({2, 8, 32}), config::HopEncoding::entropy, 128,
                                 model::HopDirection::forward, 0);
  expect_only_the_last_served(
      ctx, {messages::make_frame(h, {wire.narrow(0, 0, wire.numel() - 3), ids}),
            messages::make_frame(h, {changed, ids}), messages::make_frame(h, {other, ids}),
            messages::make_frame(h, {wire, ids})});
}

// swarm.compression = auto down to int4: each hop names its link's encoding, and the worker
// decodes any of none, bf16, int8, int4 by it; int3 (past the floor) and int5/3 (not on an
// int4 ladder) are refused.
TEST(StageWorker, AutoCompressionServesItsLadderByTheHeaderAndRefusesTheRest) {
  auto ctx = last_stage_context();
  ctx->config.swarm.compression = config::Compression::automatic;
  ctx->config.swarm.hop_encoding = config::HopEncoding::int4;
  ctx->config.swarm.hop_block = 32;
  auto ids = at::randint(0, 256, {2, 16}, at::kLong);
  auto hidden = at::randn({2, 16, 32});
  auto frame = [&](config::HopEncoding e) {
    auto h = eval_header();
    h.hop_encoding = static_cast<uint8_t>(e);
    const auto wire = e == config::HopEncoding::none
                          ? hidden
                          : model::encode_hop(hidden, e, 32, model::HopDirection::forward, 0);
    return messages::make_frame(h, {wire, ids});
  };
  using E = config::HopEncoding;
  expect_only_the_last_served(ctx, {frame(E::int3), frame(E::int5_3), frame(E::none)});
  expect_only_the_last_served(ctx, {frame(E::int3), frame(E::int8)});
  expect_only_the_last_served(ctx, {frame(E::int5_3), frame(E::int4)});
  expect_only_the_last_served(ctx, {frame(E::int3), frame(E::bf16)});
}

// A hop of a step this worker has applied already is stale. It happens when a frozen upstream
// worker wakes after the tracker re-ran its micro-batches through a peer and closed the step:
// without this check the late hop's samples were counted (and its gradient taken) in the
// worker's next step.
TEST(StageWorker, DropsAHopOfAStepItHasAppliedAlready) {
  swarmrt::testing::TestSystem ts;
  caf::scoped_actor tracker{*ts.sys};
  auto worker = spawn_worker(ts, tracker, last_stage_context(), 1000, 1);
  auto hop = [](uint64_t step, uint32_t mb) {
    messages::MicroBatchHeader h;
    h.direction = Direction::forward;
    h.stage = 1;
    h.step = step;
    h.micro_batch = mb;
    h.samples = 2;
    h.route = {0};
    return messages::make_frame(h,
                                {at::randn({2, 16, 32}), at::randint(0, 256, {2, 16}, at::kLong)});
  };
  // The samples the worker says it backpropagated in `step` (its norm report).
  auto samples_of = [&](uint64_t step) {
    int64_t samples = -1;
    tracker->send(worker, reduce_atom::value, step);
    tracker->receive([&](norm_atom, const messages::NormReport& r) { samples = r.samples; },
                     caf::after(std::chrono::seconds(20)) >> [] { FAIL() << "no norm report"; });
    return samples;
  };
  auto apply = [&](uint64_t step) {
    tracker->send(worker, apply_atom::value, step, 1e-3, -1.0);
    tracker->receive([&](applied_atom, uint64_t s, uint32_t,
                         const messages::ProcessBytes&) { EXPECT_EQ(s, step); },
                     caf::after(std::chrono::seconds(20)) >> [] { FAIL() << "not applied"; });
  };
  tracker->send(worker, frame_atom::value, hop(1, 0));
  EXPECT_EQ(samples_of(1), 2);
  apply(1);
  tracker->send(worker, frame_atom::value, hop(1, 1));  // late: step 1 is applied
  tracker->send(worker, frame_atom::value, hop(2, 0));
  EXPECT_EQ(samples_of(2), 2) << "the late hop of step 1 was counted in step 2";
  tracker->request(worker, caf::infinite, stats_atom::value)
      .receive([&](const messages::WorkerStats& st) { EXPECT_EQ(st.stale, 1u); },
               [&](const caf::error& e) { FAIL() << ts.sys->render(e); });
  tracker->send_exit(worker, caf::exit_reason::user_shutdown);
}

// chaos.malicious on a worker's pseudo-gradient: nothing before malicious_from_step; from it,
// sign_flip negates and scales, scale scales, random sends seeded noise of malicious_scale
// times the honest Δ's size (the same draw for the same seed).
TEST(WorkerFaults, AMaliciousWorkerSendsWhatItsKindSaysFromItsStep) {
  const std::vector<at::Tensor> honest = {at::tensor({1.0f, -2.0f}), at::tensor({3.0f})};
  auto sent = [&](config::Malicious kind, uint64_t step, uint64_t seed = 5) {
    actors::WorkerFaults f;
    f.configure(0, seed, 1.0, 0);
    f.set_malice(kind, 100, 10.0);
    std::vector<at::Tensor> ts = honest;
    f.misbehave(step, ts);
    return ts;
  };
  auto before = sent(config::Malicious::sign_flip, 99);
  EXPECT_TRUE(before[0].equal(honest[0]) && before[1].equal(honest[1]));
  auto flipped = sent(config::Malicious::sign_flip, 100);
  EXPECT_TRUE(flipped[0].equal(honest[0] * -10) && flipped[1].equal(honest[1] * -10));
  auto scaled = sent(config::Malicious::scale, 250);
  EXPECT_TRUE(scaled[0].equal(honest[0] * 10) && scaled[1].equal(honest[1] * 10));
  auto noise = sent(config::Malicious::random, 100);
  EXPECT_FALSE(noise[0].equal(honest[0] * 10));
  EXPECT_TRUE(noise[0].sizes().equals({2}) && noise[1].sizes().equals({1}));
  EXPECT_TRUE(noise[0].equal(sent(config::Malicious::random, 100)[0]));  // seeded
  EXPECT_FALSE(noise[0].equal(sent(config::Malicious::random, 100, 6)[0]));
  EXPECT_TRUE(sent(config::Malicious::none, 500)[0].equal(honest[0]));
}

// Which workers misbehave: the first malicious_workers of each stage, none without a kind.
TEST(WorkerFaults, TheFirstMaliciousWorkersOfEachStageMisbehave) {
  config::ChaosConfig c;
  c.malicious_workers = 1;
  EXPECT_FALSE(c.is_malicious(0));
  c.malicious = config::Malicious::sign_flip;
  EXPECT_TRUE(c.is_malicious(0));
  EXPECT_TRUE(c.is_malicious(1000));
  EXPECT_FALSE(c.is_malicious(1));
  EXPECT_FALSE(c.is_malicious(1003));
  c.malicious_workers = 3;
  EXPECT_TRUE(c.is_malicious(2002));
  EXPECT_FALSE(c.is_malicious(2003));
}

// chaos.hop_noise: from its step on, a hop carries noise of the given size relative to the
// tensor's RMS, drawn from the worker's seed; before it, and at 0, the hop is as computed.
TEST(WorkerFaults, HopNoiseIsAsLargeAsAskedFromItsStep) {
  auto gen = at::detail::createCPUGenerator(3);
  const auto hidden = at::randn({4, 16, 32}, gen, at::kFloat) * 2.0;
  auto sent = [&](double relative, uint64_t step, uint64_t seed = 5) {
    actors::WorkerFaults f;
    f.configure(0, seed, 1.0, 0);
    f.set_hop_noise(relative, 50);
    auto t = hidden;
    f.noise_hop(step, t);
    return t;
  };
  EXPECT_TRUE(sent(0.5, 49).equal(hidden));
  EXPECT_TRUE(sent(0.0, 500).equal(hidden));
  const auto noisy = sent(0.5, 50);
  const double rms = hidden.pow(2).mean().sqrt().item<double>();
  const double off = (noisy - hidden).pow(2).mean().sqrt().item<double>();
  EXPECT_NEAR(off / rms, 0.5, 0.03);            // 2048 draws
  EXPECT_TRUE(noisy.equal(sent(0.5, 50)));      // seeded
  EXPECT_FALSE(noisy.equal(sent(0.5, 50, 6)));  // by the worker's seed
  // Only hop noise: the worker misbehaves, its pseudo-gradients stay honest.
  config::ChaosConfig c;
  c.hop_noise = 0.5;
  EXPECT_TRUE(c.is_malicious(0));
  EXPECT_FALSE(c.is_malicious(1));
}
