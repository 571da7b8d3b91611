// Big messages across processes in slices. Replies (transport/relay.hpp): the collector
// puts a reply of many slices back together bit for bit, refuses one larger than the run's max
// message, out of order, from another sender or from an asked actor that went down, and an
// asked actor's error reaches the asker; over real TCP on 127.0.0.1, a stage worker's state
// and parameters asked with `ask` arrive equal to what a local request gets. One-way messages
// (transport/parcel.hpp): the inbox gives back the message whole, and refuses one over
// the max message, a slice out of order, and an unfinished parcel superseded by its sender.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <caf/io/all.hpp>

#include "actors/runtime/runtime.hpp"
#include "actors/stage/stage_worker.hpp"
#include "transport/bulk.hpp"
#include "transport/parcel.hpp"
#include "transport/relay.hpp"

using namespace swarmrt;
using namespace swarmrt::atoms;
using std::chrono::seconds;

namespace {

// Stands for the asked actor: sends the collector it is given a whole reply, or one slice.
caf::behavior teller(caf::event_based_actor* self) {
  return {
      [=](const caf::actor& collector, const messages::TensorList& reply) {
        transport::send_relay_slices(self, collector, reply);
      },
      [=](const caf::actor& collector, uint32_t index, uint32_t count, uint64_t total,
          const std::vector<uint8_t>& bytes) {
        self->send(collector, relay_slice_atom::value, index, count, total, bytes);
      },
      [=](params_atom) -> caf::result<messages::TensorList> {
        return caf::make_error(caf::sec::runtime_error, "no parameters in this test actor");
      },
      [=](relay_atom, const caf::actor& to, uint64_t ms, params_atom a) {
        transport::relay<messages::TensorList>(self, to, ms, a);
      },
  };
}

struct Collecting : ::testing::Test {
  caf::actor_system_config cfg;
  std::unique_ptr<caf::actor_system> sys;
  std::unique_ptr<caf::scoped_actor> self;
  caf::actor asked;
  void SetUp() override {
    actors::configure_actor_system(cfg);
    sys = std::make_unique<caf::actor_system>(cfg);
    self = std::make_unique<caf::scoped_actor>(*sys);
    asked = sys->spawn(teller);
  }
  void TearDown() override { (*self)->send_exit(asked, caf::exit_reason::user_shutdown); }
  caf::actor collector(uint64_t max_bytes) {
    return sys->spawn(transport::relay_collector<messages::TensorList>, asked,
                      std::chrono::milliseconds(10000), max_bytes);
  }
  // The collector's answer: the reply, or the error's text in `why`.
  std::optional<messages::TensorList> collect(const caf::actor& c, std::string* why) {
    std::optional<messages::TensorList> got;
    (*self)
        ->request(c, seconds(20), collect_atom::value)
        .receive([&](const messages::TensorList& l) { got = l; },
                 [&](const caf::error& e) { *why = sys->render(e); });
    return got;
  }
};

TEST_F(Collecting, PutsAReplyOfManySlicesBackTogether) {
  // 3.5 slices of float32 and a second tensor of int64.
  const int64_t n = static_cast<int64_t>(transport::kRelaySlice * 7 / 2 / 4);
  messages::TensorList reply{{"w", "ids"}, {at::randn({n}), at::arange(1000, at::kLong)}, {}};
  const auto before = transport::g_relay_slices.load();
  auto c = collector(uint64_t{1} << 30);
  (*self)->send(asked, c, reply);
  std::string why;
  auto got = collect(c, &why);
  ASSERT_TRUE(got) << why;
  EXPECT_EQ(transport::g_relay_slices.load() - before, 4u);
  ASSERT_EQ(got->names, reply.names);
  EXPECT_TRUE(at::equal(got->tensors[0], reply.tensors[0]));
  EXPECT_TRUE(at::equal(got->tensors[1], reply.tensors[1]));
}

TEST_F(Collecting, RefusesAReplyLargerThanTheMaxMessageBeforeTakingIt) {
  messages::TensorList reply{{"w"}, {at::randn({100000})}, {}};
  auto c = collector(1000);
  (*self)->send(asked, c, reply);
  std::string why;
  EXPECT_FALSE(collect(c, &why));
  EXPECT_NE(why.find("exceeds the limit of 1000 (transport.max_message_mib)"), std::string::npos)
      << why;
}

TEST_F(Collecting, RefusesSlicesOutOfOrder) {
  const uint64_t total = transport::kRelaySlice * 2;
  auto c = collector(uint64_t{1} << 30);
  (*self)->send(asked, c, uint32_t{1}, uint32_t{2}, total, std::vector<uint8_t>(10, 0));
  std::string why;
  EXPECT_FALSE(collect(c, &why));
  EXPECT_NE(why.find("reply slice 1 of 2 out of order"), std::string::npos) << why;
}

TEST_F(Collecting, TakesSlicesOnlyFromTheAskedActorAndFailsWhenItGoesDown) {
  auto c = collector(uint64_t{1} << 30);
  // A stranger's slice is not taken: were it, the reply (one slice of 4 bytes that decode as
  // nothing) would fail to decode rather than report the asked actor's end.
  (*self)->send(c, relay_slice_atom::value, uint32_t{0}, uint32_t{1}, uint64_t{4},
                std::vector<uint8_t>{1, 2, 3, 4});
  (*self)->send_exit(asked, caf::exit_reason::kill);
  std::string why;
  EXPECT_FALSE(collect(c, &why));
  EXPECT_NE(why.find("the asked actor went down"), std::string::npos) << why;
}

TEST_F(Collecting, TheAskedActorsErrorReachesTheAsker) {
  auto c = collector(uint64_t{1} << 30);
  (*self)->send(asked, relay_atom::value, c, uint64_t{5000}, params_atom::value);
  std::string why;
  EXPECT_FALSE(collect(c, &why));
  EXPECT_NE(why.find("no parameters in this test actor"), std::string::npos) << why;
}

// A message cut as send_parcel cuts it: (count, total, slices).
struct Cut {
  uint32_t count;
  uint64_t total;
  std::vector<std::vector<uint8_t>> slices;
};
Cut cut(caf::actor_system& sys, const caf::message& msg) {
  std::vector<char> buf;
  caf::binary_serializer sink{sys, buf};
  EXPECT_FALSE(sink(const_cast<caf::message&>(msg)));
  Cut c{0, buf.size(), {}};
  for (size_t from = 0; from < buf.size(); from += transport::kRelaySlice)
    c.slices.emplace_back(buf.begin() + from,
                          buf.begin() + std::min(buf.size(), from + transport::kRelaySlice));
  c.count = static_cast<uint32_t>(c.slices.size());
  return c;
}

TEST_F(Collecting, ParcelInboxGivesBackAMessageOfManySlicesWhole) {
  transport::set_max_message(uint64_t{1} << 30);
  const int64_t n = static_cast<int64_t>(transport::kRelaySlice * 5 / 2 / 4);
  messages::GradsReport report{7, 3, 12, {{}, {at::randn({n}), at::randn({3, 4})}, {}}};
  const auto c = cut(*sys, caf::make_message(grads_atom::value, report));
  ASSERT_EQ(c.count, 3u);
  transport::ParcelInbox inbox;
  const auto from = caf::actor_cast<caf::actor_addr>(asked);
  for (uint32_t i = 0; i + 1 < c.count; ++i)
    EXPECT_FALSE(inbox.add(*sys, from, 42, i, c.count, c.total, c.slices[i], "test"));
  auto msg = inbox.add(*sys, from, 42, c.count - 1, c.count, c.total, c.slices.back(), "test");
  ASSERT_TRUE(msg);
  ASSERT_TRUE((msg->match_elements<grads_atom, messages::GradsReport>()));
  const auto& got = msg->get_as<messages::GradsReport>(1);
  EXPECT_EQ(got.step, 7u);
  EXPECT_EQ(got.worker, 3u);
  EXPECT_EQ(got.samples, 12);
  ASSERT_EQ(got.grads.tensors.size(), 2u);
  EXPECT_TRUE(at::equal(got.grads.tensors[0], report.grads.tensors[0]));
  EXPECT_TRUE(at::equal(got.grads.tensors[1], report.grads.tensors[1]));
  EXPECT_EQ(inbox.refused(), 0u);
  transport::set_max_message(messages::kDefaultMaxMessage);
}

TEST_F(Collecting, ParcelInboxRefusesWhatBreaksTheRules) {
  messages::GradsReport report{
      1, 0, 1, {{}, {at::randn({static_cast<int64_t>(transport::kRelaySlice * 5 / 16)})}, {}}};
  const auto c = cut(*sys, caf::make_message(grads_atom::value, report));
  ASSERT_EQ(c.count, 2u);
  const auto from = caf::actor_cast<caf::actor_addr>(asked);
  transport::ParcelInbox inbox;
  transport::set_max_message(1000);  // over the max message: refused at its first slice
  EXPECT_FALSE(inbox.add(*sys, from, 1, 0, c.count, c.total, c.slices[0], "test"));
  EXPECT_EQ(inbox.refused(), 1u);
  transport::set_max_message(uint64_t{1} << 30);
  EXPECT_FALSE(inbox.add(*sys, from, 1, 1, c.count, c.total, c.slices[1], "test"));
  EXPECT_EQ(inbox.refused(), 2u);  // the rest of a refused parcel is refused too
  // A parcel begun and left unfinished is dropped when its sender begins another.
  EXPECT_FALSE(inbox.add(*sys, from, 2, 0, c.count, c.total, c.slices[0], "test"));
  EXPECT_FALSE(inbox.add(*sys, from, 3, 0, c.count, c.total, c.slices[0], "test"));
  EXPECT_FALSE(inbox.add(*sys, from, 2, 1, c.count, c.total, c.slices[1], "test"));
  EXPECT_EQ(inbox.refused(), 3u);
  EXPECT_TRUE(inbox.add(*sys, from, 3, 1, c.count, c.total, c.slices[1], "test"));
  // A count that does not fit the size.
  EXPECT_FALSE(inbox.add(*sys, from, 4, 0, c.count + 1, c.total, c.slices[0], "test"));
  EXPECT_EQ(inbox.refused(), 4u);
  transport::set_max_message(messages::kDefaultMaxMessage);
}

// Two actor systems over 127.0.0.1: a stage worker in `a`, asked from `b`.
TEST(Relay, AStageWorkersStateAndParametersCrossProcessesEqualToALocalAsk) {
  caf::actor_system_config ca, cb;
  for (auto* cfg : {&ca, &cb}) {
    actors::configure_actor_system(*cfg);
    cfg->load<caf::io::middleman>();
  }
  caf::actor_system a{ca}, b{cb};
  caf::scoped_actor local{a}, asker{b};
  auto ctx = std::make_shared<actors::SwarmContext>();
  ctx->config.model = {"tiny", 2, 2, 32, 16, 256};
  actors::WorkerSetup ws;
  ws.ctx = ctx;
  ws.tracker = caf::actor_cast<caf::actor>(local);
  ws.take_state = false;
  auto worker = a.spawn(actors::stage_worker, ws);
  auto port = a.middleman().publish(worker, 0, "127.0.0.1", true);
  ASSERT_TRUE(port) << a.render(port.error());
  auto remote = b.middleman().remote_actor("127.0.0.1", *port);
  ASSERT_TRUE(remote) << b.render(remote.error());

  messages::WorkerState here, there;
  local->request(worker, seconds(20), state_atom::value)
      .receive([&](const messages::WorkerState& st) { here = st; },
               [&](const caf::error& e) { FAIL() << a.render(e); });
  const auto slices = transport::g_relay_slices.load();
  transport::ask<messages::WorkerState>(asker.ptr(), *remote, seconds(20), state_atom::value)
      .receive([&](const messages::WorkerState& st) { there = st; },
               [&](const caf::error& e) { FAIL() << b.render(e); });
  EXPECT_GE(transport::g_relay_slices.load() - slices, 1u);  // it came through a collector
  EXPECT_TRUE(there.params.error.empty()) << there.params.error;
  ASSERT_EQ(there.params.names, here.params.names);
  for (size_t i = 0; i < here.params.tensors.size(); ++i)
    EXPECT_TRUE(at::equal(there.params.tensors[i], here.params.tensors[i])) << here.params.names[i];
  EXPECT_EQ(there.optimizer, here.optimizer);
  EXPECT_EQ(there.source, here.source);

  messages::TensorList params;
  transport::ask<messages::TensorList>(asker.ptr(), *remote, seconds(20), params_atom::value)
      .receive([&](const messages::TensorList& p) { params = p; },
               [&](const caf::error& e) { FAIL() << b.render(e); });
  ASSERT_EQ(params.names, here.params.names);
  for (size_t i = 0; i < params.tensors.size(); ++i)
    EXPECT_TRUE(at::equal(params.tensors[i], here.params.tensors[i])) << params.names[i];
  // A small reply that names actors (a state offer naming its donors) comes whole, so the
  // asker's process can reach the actors it names.
  auto offerer = a.spawn([worker](caf::event_based_actor* self) -> caf::behavior {
    auto offer = [worker] {
      messages::WorkerState st;
      st.step = 3;
      st.donors = {worker};
      return st;
    };
    return {
        [=](state_atom) { return offer(); },
        [=](relay_atom, const caf::actor& to, uint64_t, state_atom) {
          transport::send_relay_slices(self, to, offer());
        },
    };
  });
  auto offerer_port = a.middleman().publish(offerer, 0, "127.0.0.1", true);
  ASSERT_TRUE(offerer_port);
  auto remote_offerer = b.middleman().remote_actor("127.0.0.1", *offerer_port);
  ASSERT_TRUE(remote_offerer);
  messages::WorkerState offer;
  transport::ask<messages::WorkerState>(asker.ptr(), *remote_offerer, seconds(20),
                                        state_atom::value)
      .receive([&](const messages::WorkerState& st) { offer = st; },
               [&](const caf::error& e) { FAIL() << b.render(e); });
  ASSERT_EQ(offer.donors.size(), 1u);
  EXPECT_EQ(offer.step, 3);
  caf::actor named = offer.donors[0];
  asker->request(named, seconds(20), params_atom::value)
      .receive([&](const messages::TensorList& p) { EXPECT_EQ(p.names, here.params.names); },
               [&](const caf::error& e) { FAIL() << b.render(e); });
  local->send_exit(offerer, caf::exit_reason::user_shutdown);
  local->send_exit(worker, caf::exit_reason::user_shutdown);
}

}  // namespace
