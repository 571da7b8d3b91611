// Micro-batch frames on a frame link, delivered by the link's reader thread with no CAF message
// beside them (transport/bulk.hpp): between two actor systems over real TCP on 127.0.0.1. A
// frame reaches the actor its envelope names, waits for one that has not started taking
// frames yet, is dropped for one that has ended without closing the link; a stage worker
// answers a forward hop that names no sender to the last worker of its route, once its
// membership says who that is.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <caf/io/all.hpp>
#include <chrono>

#include "../actors/actor_test_util.hpp"
#include "actors/runtime/runtime.hpp"
#include "actors/stage/stage_worker.hpp"
#include "messages/frame.hpp"
#include "transport/bulk.hpp"
#include "transport/transport.hpp"

using namespace swarmrt;
using namespace swarmrt::atoms;
using messages::Direction;

namespace {

using swarmrt::testing::NetSystem;

messages::Frame numbered_frame(uint32_t index) {
  messages::MicroBatchHeader h;
  h.direction = Direction::eval;
  h.micro_batch = index;
  h.samples = 1;
  auto t = at::full({1, 4}, static_cast<int64_t>(index), at::kLong);
  return messages::make_frame(h, {t, t});
}

// Tells `observer` (done_atom, micro-batch, whether a sender came with it) for every frame it
// takes, and counts CAF announcements (bulk_atom), which micro-batch frames must not need. It
// takes frames from the link once told (ready_atom), or at once.
struct receiver_state {
  uint64_t announcements = 0;
};
caf::behavior receiver(caf::stateful_actor<receiver_state>* self, caf::actor observer, bool ready) {
  if (ready) transport::take_frames_directly(self);
  auto took = [=](const transport::BulkDelivery& d) {
    const auto h = messages::open_frame(d.frame);
    self->send(observer, done_atom::value, h.micro_batch, static_cast<bool>(d.sender));
  };
  return {
      [=](ready_atom) { transport::take_frames_directly(self); },
      [=](transport::bulk_atom, uint64_t id) {
        ++self->state.announcements;
        if (auto d = transport::claim_bulk(self, id)) took(*d);
      },
      [=](transport::bulk_ready_atom, uint64_t id) {
        if (auto d = transport::take_bulk(id)) took(*d);
      },
      [=](stats_atom) { return self->state.announcements; },
  };
}

// System `a` hosts the receivers and the frame link's listening end; `b` sends.
struct Link {
  NetSystem a, b;
  caf::scoped_actor observer{*a.sys};
  caf::scoped_actor sender{*b.sys};

  // `r` as b sees it, with frames to its node on the frame link.
  caf::actor reach(const caf::actor& r) {
    auto port = a.sys->middleman().publish(r, 0, "127.0.0.1", true);
    EXPECT_TRUE(port);
    const auto endpoint = transport::start_bulk_server("127.0.0.1");
    EXPECT_FALSE(endpoint.empty());
    auto remote = b.sys->middleman().remote_actor("127.0.0.1", *port);
    EXPECT_TRUE(remote) << b.sys->render(remote.error());
    transport::register_endpoint(remote->node(), endpoint);
    EXPECT_STREQ(transport::for_peer(sender.ptr(), *remote).name(), "bulk");
    return *remote;
  }
  void send(const caf::actor& to, uint32_t index) {
    transport::send_frame(sender.ptr(), to, messages::FrameKind::microbatch, numbered_frame(index));
  }
  // The micro-batch of the next frame a receiver took, or -1 after `wait`.
  int64_t next(std::chrono::milliseconds wait = std::chrono::seconds(20),
               bool* with_sender = nullptr) {
    int64_t got = -1;
    observer->receive(
        [&](done_atom, uint32_t mb, bool sender_came) {
          got = mb;
          if (with_sender) *with_sender = sender_came;
        },
        caf::after(wait) >> [] {});
    return got;
  }
};

}  // namespace

TEST(FrameLink, MicroBatchFramesComeWithoutACafMessage) {
  Link l;
  auto r = l.a.sys->spawn(receiver, caf::actor_cast<caf::actor>(l.observer), true);
  auto remote = l.reach(r);
  for (uint32_t i = 0; i < 5; ++i) l.send(remote, i);
  for (int64_t i = 0; i < 5; ++i) {
    bool with_sender = true;
    EXPECT_EQ(l.next(std::chrono::seconds(20), &with_sender), i) << "in the order sent";
    EXPECT_FALSE(with_sender) << "a micro-batch frame names no sender: its route does";
  }
  uint64_t announcements = 99;
  l.observer->request(r, caf::infinite, stats_atom::value)
      .receive([&](uint64_t n) { announcements = n; }, [](const caf::error&) {});
  EXPECT_EQ(announcements, 0u) << "no CAF message went beside the frames";
  l.observer->send_exit(r, caf::exit_reason::user_shutdown);
}

TEST(FrameLink, AFrameWaitsForAReceiverThatHasNotStartedTakingFrames) {
  Link l;
  auto r = l.a.sys->spawn(receiver, caf::actor_cast<caf::actor>(l.observer), false);
  auto remote = l.reach(r);
  l.send(remote, 7);
  EXPECT_EQ(l.next(std::chrono::milliseconds(500)), -1) << "taken before its receiver said so";
  l.observer->send(r, ready_atom::value);
  EXPECT_EQ(l.next(), 7) << "the frame waited in the inbox for it";
  l.observer->send_exit(r, caf::exit_reason::user_shutdown);
}

TEST(FrameLink, AFrameForAnEndedActorIsDroppedAndTheLinkGoesOn) {
  Link l;
  auto gone = l.a.sys->spawn(receiver, caf::actor_cast<caf::actor>(l.observer), true);
  auto live = l.a.sys->spawn(receiver, caf::actor_cast<caf::actor>(l.observer), true);
  auto remote_gone = l.reach(gone);
  auto remote_live = l.reach(live);
  l.observer->monitor(gone);
  l.observer->send_exit(gone, caf::exit_reason::kill);
  l.observer->receive([](const caf::down_msg&) {});
  const auto dropped = transport::dropped_frames();
  l.send(remote_gone, 1);
  l.send(remote_live, 2);
  EXPECT_EQ(l.next(), 2) << "the link kept serving after a frame it could not deliver";
  EXPECT_EQ(transport::dropped_frames(), dropped + 1);
  l.observer->send_exit(live, caf::exit_reason::user_shutdown);
}

// The last stage of two, in system a; its forward hop comes from b over the frame link and
// names worker 7 (b's `upstream`) as the last of its route. Until a membership names worker
// 7 the hop waits; then the worker computes it and sends the input gradient back to 7.
TEST(FrameLink, AForwardHopGoesBackToTheLastWorkerOfItsRoute) {
  Link l;
  caf::scoped_actor upstream{*l.b.sys};
  auto ctx = std::make_shared<actors::SwarmContext>();
  ctx->config.model = {"tiny", 2, 2, 32, 16, 256};
  ctx->config.swarm.stages = 2;
  ctx->config.train.micro_batch = 2;
  ctx->config.train.micro_batches = 1;
  actors::WorkerSetup ws;
  ws.ctx = ctx;
  ws.id = 1;
  ws.stage = 1;
  ws.tracker = caf::actor_cast<caf::actor>(l.observer);
  ws.take_state = false;
  auto worker = l.a.sys->spawn(actors::stage_worker, ws);
  auto remote = l.reach(worker);

  messages::MicroBatchHeader h;
  h.step = 1;
  h.stage = 1;
  h.direction = Direction::forward;
  h.route = {7};
  h.samples = 2;
  auto hidden = at::randn({2, 16, 32});
  auto targets = at::randint(0, 256, {2, 16}, at::kLong);
  transport::send_frame(l.sender.ptr(), remote, messages::FrameKind::microbatch,
                        messages::make_frame(h, {hidden, targets}));

  // b's upstream has no frame link of its own (the membership names none), so the gradient
  // comes in CAF chunks.
  transport::ChunkReceiver chunks;
  auto gradient_back = [&](std::chrono::milliseconds wait) {
    bool came = false;
    upstream->receive(
        [&](chunk_atom, const std::vector<uint8_t>& chunk) {
          auto done = chunks.add(chunk, "upstream");
          ASSERT_TRUE(done) << chunks.last_reason();
          came = true;
          const auto back = messages::open_frame(done->frame);
          EXPECT_EQ(back.direction, Direction::backward);
          EXPECT_EQ(back.stage, 0u);
          EXPECT_TRUE(done->frame.tensors.at(0).sizes().equals(hidden.sizes()));
        },
        caf::after(wait) >> [] {});
    return came;
  };
  EXPECT_FALSE(gradient_back(std::chrono::milliseconds(500)))
      << "answered a hop whose sender it did not know";

  messages::Membership m;
  m.stages = {{{7, 0, caf::actor_cast<caf::actor>(upstream), {}}}, {{1, 1, worker, {}}}};
  l.observer->send(worker, members_atom::value, m);
  EXPECT_TRUE(gradient_back(std::chrono::seconds(20)))
      << "the input gradient went back to the last worker of the route";
  // And the loss came to the tracker with the worker's reports, as one message.
  bool loss = false;
  for (int i = 0; i < 3 && !loss; ++i)
    l.observer->receive(
        [&](hop_atom, const messages::HopReports& batch) {
          for (const auto& r : batch.losses) {
            loss = true;
            EXPECT_EQ(r.step, 1u);
            EXPECT_EQ(r.route, (std::vector<uint32_t>{7, 1}));
          }
        },
        [](caf::message&) {}, caf::after(std::chrono::seconds(10)) >> [] {});
  EXPECT_TRUE(loss);
  l.observer->send_exit(worker, caf::exit_reason::user_shutdown);
}
