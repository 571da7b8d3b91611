// A real stage worker fed malformed frames: it refuses each with a reason and keeps serving.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include "../actor_test_util.hpp"
#include "actors/stage/stage_worker.hpp"

using namespace swarmrt;
using namespace swarmrt::atoms;
using messages::Direction;

TEST(StageWorker, RejectsMalformedFramesAndKeepsServing) {
  swarmrt::testing::TestSystem ts;
  auto ctx = std::make_shared<actors::SwarmContext>();
  ctx->config.model = {"tiny", 2, 2, 32, 16, 256};
  caf::scoped_actor tracker{*ts.sys};
  actors::WorkerSetup ws;
  ws.ctx = ctx;
  ws.id = 0;
  ws.stage = 0;
  ws.tracker = caf::actor_cast<caf::actor>(tracker);
  ws.take_state = false;  // driven by the test, no tracker to ask
  auto worker = ts.sys->spawn<caf::detached>(actors::stage_worker, ws);
  messages::Membership m;
  m.stages = {{{0, 0, worker, {}}}};
  tracker->send(worker, members_atom::value, m);

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
