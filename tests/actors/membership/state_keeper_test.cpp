// The states a node keeps when its coordinator is lost (actors/membership/state_keeper.hpp):
// one per stage and step, named in the next join, and handed out over 127.0.0.1 to the
// coordinator the node joined only: another process of the cluster gets no state and cannot
// drop them.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <caf/io/all.hpp>
#include <chrono>
#include <thread>

#include "actors/membership/state_keeper.hpp"
#include "actors/runtime/runtime.hpp"
#include "transport/relay.hpp"

using namespace swarmrt;
using namespace swarmrt::atoms;
using std::chrono::seconds;

namespace {

messages::WorkerState state_at(int64_t step, float value) {
  messages::WorkerState st;
  st.params.names = {"w"};
  st.params.tensors = {torch::full({3, 2}, value)};
  st.optimizer = "adamw-" + std::to_string(step);
  st.step = step;
  return st;
}

TEST(KeptStates, KeepsOneStatePerStageAndStepAndNamesThemInAJoin) {
  actors::KeptStates kept;
  kept.keep(0, state_at(12, 1));
  kept.keep(0, state_at(12, 2));  // the stage's other worker: the same step, not kept twice
  kept.keep(1, state_at(12, 3));
  kept.keep(1, state_at(13, 4));  // it had applied step 13 already
  messages::JoinRequest join;
  caf::actor_system_config cfg;
  caf::actor_system sys{cfg};
  caf::scoped_actor self{sys};
  const auto keeper = caf::actor_cast<caf::actor>(self);  // any handle: only named here
  kept.name_in(join, keeper);
  EXPECT_EQ(join.keeper, keeper);
  EXPECT_EQ(join.held_stages, (std::vector<uint32_t>{0, 1, 1}));
  EXPECT_EQ(join.held_steps, (std::vector<int64_t>{12, 12, 13}));
  ASSERT_TRUE(kept.find(0, 12));
  EXPECT_EQ(kept.find(0, 12)->params.tensors[0][0][0].item<float>(), 1.0f);  // the first one kept
  EXPECT_EQ(kept.find(1, 13)->optimizer, "adamw-13");
  EXPECT_FALSE(kept.find(0, 13));
  EXPECT_EQ(kept.clear(), 3u);
  kept.name_in(join, keeper);
  EXPECT_FALSE(join.keeper);  // nothing kept: the join names no keeper
  EXPECT_TRUE(join.held_stages.empty() && join.held_steps.empty());
}

TEST(KeptStates, AKeptStateIsItsOwnCopy) {
  actors::KeptStates kept;
  auto st = state_at(7, 1);
  kept.keep(0, st);
  st.params.tensors[0].fill_(9);  // the worker it came from goes on changing its parameters
  EXPECT_EQ(kept.find(0, 7)->params.tensors[0].sum().item<float>(), 6.0f);
}

TEST(KeptStates, DilocoKeepsEveryWorkersStateAndHandsThemOutInTurn) {
  actors::KeptStates kept;
  auto a = state_at(12, 1), b = state_at(12, 2);
  a.anchor = b.anchor = a.params;  // both replicas' anchor θ(t), their own parameters
  kept.keep(0, a, /*each_worker=*/true);
  kept.keep(0, b, /*each_worker=*/true);
  kept.keep(1, state_at(12, 3), /*each_worker=*/true);
  messages::JoinRequest join;
  caf::actor_system_config cfg;
  caf::actor_system sys{cfg};
  caf::scoped_actor self{sys};
  kept.name_in(join, caf::actor_cast<caf::actor>(self));
  // Stage 0 named twice: the coordinator asks this node twice for it.
  EXPECT_EQ(join.held_stages, (std::vector<uint32_t>{0, 0, 1}));
  std::vector<float> handed;
  for (int i = 0; i < 3; ++i)
    handed.push_back(kept.next(0, 12)->params.tensors[0].sum().item<float>());
  EXPECT_EQ(handed, (std::vector<float>{6.0f, 12.0f, 6.0f}));
  EXPECT_EQ(kept.next(1, 12)->params.tensors[0].sum().item<float>(), 18.0f);
  EXPECT_FALSE(kept.next(1, 13));
  a.anchor.tensors[0].fill_(9);  // the anchor is the kept state's own copy too
  EXPECT_EQ(kept.find(0, 12)->anchor.tensors[0].sum().item<float>(), 6.0f);
}

// Three processes in one: a node keeping stage 0's state at step 12, the coordinator it joins
// and another process of the cluster.
TEST(StateKeeper, HandsOutAndDropsForTheCoordinatorItJoinedOnly) {
  caf::actor_system_config cn, cc, cs;
  for (auto* cfg : {&cn, &cc, &cs}) {
    actors::configure_actor_system(*cfg);
    cfg->load<caf::io::middleman>();
  }
  caf::actor_system node{cn}, coordinator{cc}, stranger{cs};
  auto kept = std::make_shared<actors::KeptStates>();
  kept->keep(0, state_at(12, 5));
  auto keeper = node.spawn(actors::state_keeper, kept);
  kept->serve(coordinator.node());
  auto port = node.middleman().publish(keeper, 0, "127.0.0.1", true);
  ASSERT_TRUE(port) << node.render(port.error());
  auto from_coordinator = coordinator.middleman().remote_actor("127.0.0.1", *port);
  auto from_stranger = stranger.middleman().remote_actor("127.0.0.1", *port);
  ASSERT_TRUE(from_coordinator && from_stranger);
  caf::scoped_actor c{coordinator}, x{stranger};

  // In slices, as the tracker asks for it.
  messages::WorkerState got;
  transport::ask<messages::WorkerState>(c.ptr(), *from_coordinator, seconds(20),
                                        held_state_atom::value, uint32_t{0}, int64_t{12})
      .receive([&](const messages::WorkerState& st) { got = st; },
               [&](const caf::error& e) { FAIL() << coordinator.render(e); });
  ASSERT_EQ(got.params.tensors.size(), 1u);
  EXPECT_TRUE(at::equal(got.params.tensors[0], torch::full({3, 2}, 5.0f)));
  EXPECT_EQ(got.step, 12);
  EXPECT_EQ(got.optimizer, "adamw-12");
  // A stage or step it does not keep: an error that says so.
  std::string why;
  transport::ask<messages::WorkerState>(c.ptr(), *from_coordinator, seconds(20),
                                        held_state_atom::value, uint32_t{1}, int64_t{12})
      .receive([&](const messages::WorkerState&) { why = "answered"; },
               [&](const caf::error& e) { why = coordinator.render(e); });
  EXPECT_NE(why.find("keeps no state of stage 1 at step 12"), std::string::npos) << why;

  // Another process: no drop, and no state, plainly or in slices. (Its drop is read before
  // its request, which is answered: when the answer comes, the drop was refused.)
  x->send(*from_stranger, drop_held_atom::value);
  bool answered = false, refused = false;
  x->request(*from_stranger, seconds(5), held_state_atom::value, uint32_t{0}, int64_t{12})
      .receive([&](const messages::WorkerState&) { answered = true; },
               [&](const caf::error&) { refused = true; });
  EXPECT_TRUE(refused);
  EXPECT_TRUE(kept->find(0, 12));
  transport::ask<messages::WorkerState>(x.ptr(), *from_stranger, seconds(3), held_state_atom::value,
                                        uint32_t{0}, int64_t{12})
      .receive([&](const messages::WorkerState&) { answered = true; }, [](const caf::error&) {});
  EXPECT_FALSE(answered);
  c->send(*from_coordinator, drop_held_atom::value);
  for (int i = 0; i < 200 && kept->find(0, 12); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(25));
  EXPECT_FALSE(kept->find(0, 12));
  caf::anon_send_exit(keeper, caf::exit_reason::user_shutdown);
}

}  // namespace
