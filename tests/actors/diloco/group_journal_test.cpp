// The DiLoCo group's journal (actors/diloco/group_journal.hpp): a real group actor writes each
// applied round to it before any worker hears the answer, and what a takeover reads back of
// it continues the rounds exactly where the lost group left them.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "../../temp_dir.hpp"
#include "../actor_test_util.hpp"
#include "actors/diloco/diloco_group.hpp"
#include "actors/diloco/group_journal.hpp"
#include "round_util.hpp"

using namespace swarmrt;
using namespace swarmrt::atoms;
using swarmrt::testing::contribution;
namespace fs = std::filesystem;

namespace {

messages::RoundHeader next_answer(caf::scoped_actor& self, messages::Frame* frame = nullptr) {
  messages::RoundHeader h;
  self->receive(
      [&](round_atom, const messages::Frame& f) {
        h = messages::open_round_frame(f);
        if (frame) *frame = f;
      },
      caf::after(std::chrono::seconds(10)) >> [&] { ADD_FAILURE() << "no round frame"; });
  return h;
}

std::shared_ptr<actors::SwarmContext> context() {
  auto ctx = std::make_shared<actors::SwarmContext>();
  ctx->config.diloco.outer_lr = 0.7;
  ctx->config.diloco.outer_momentum = 0.9;
  return ctx;
}

caf::actor spawn_group(swarmrt::testing::TestSystem& ts,
                       const std::shared_ptr<actors::SwarmContext>& ctx,
                       const actors::GroupStorePtr& store, caf::scoped_actor& worker) {
  auto group =
      ts.sys->spawn(actors::diloco_group, actors::ContextPtr(ctx), uint32_t{0},
                    model::NamedTensors{{"w", at::tensor({1.0f, 2.0f})}}, store, caf::actor{});
  messages::Membership m;
  m.stages.emplace_back();
  m.stages[0].push_back({1, 0, caf::actor_cast<caf::actor>(worker), {}});
  worker->send(group, members_atom::value, m);
  return group;
}

std::string entry(const swarmrt::testing::TempDir& dir, uint64_t step) {
  char name[64];
  std::snprintf(name, sizeof(name), "group-0-step-%08llu.ckpt",
                static_cast<unsigned long long>(step));
  return dir / name;
}

}  // namespace

TEST(GroupJournal, EachRoundIsOnDiskBeforeItIsAnsweredAndTheTwoNewestStepsStay) {
  swarmrt::testing::TestSystem ts;
  swarmrt::testing::TempDir dir;
  auto ctx = context();
  auto store = std::make_shared<actors::GroupStore>();
  store->journal = dir.str();
  caf::scoped_actor w{*ts.sys};
  auto group = spawn_group(ts, ctx, store, w);
  std::vector<at::Tensor> answered;
  for (uint64_t round = 0; round < 3; ++round) {
    const uint64_t step = 5 * (round + 1);
    w->send(group, round_atom::value,
            contribution(round, 1, at::tensor({0.1f, -0.2f}) * (round + 1.0), step));
    messages::Frame f;
    const auto h = next_answer(w, &f);
    ASSERT_EQ(h.status, messages::RoundStatus::applied) << h.reason;
    // The answer is out only after its round's entry is in place.
    EXPECT_TRUE(fs::exists(entry(dir, step))) << "no entry of step " << step;
    answered.push_back(f.tensors[0].clone());
  }
  EXPECT_FALSE(fs::exists(entry(dir, 5))) << "the oldest step's entry stays";
  EXPECT_TRUE(fs::exists(entry(dir, 10)));
  EXPECT_GT(store->journal_bytes, 0u);

  // A takeover after step 12 takes the round of step 10 (round 1), with θ(1) as answered and
  // the outer momentum the group had then; after step 15 the round of step 15.
  const actors::GroupJournal journal(dir.str());
  actors::GroupStore at12, at15;
  EXPECT_EQ(journal.restore(0, 12, at12), std::optional<uint64_t>(10));
  EXPECT_EQ(at12.last_applied, 1);
  ASSERT_EQ(at12.theta.size(), 1u);
  EXPECT_TRUE(at::equal(at12.theta[0].second, answered[1]));
  ASSERT_EQ(at12.momentum.size(), 1u);
  EXPECT_GT(at12.momentum[0].second.abs().sum().item<float>(), 0.0f);
  EXPECT_EQ(journal.restore(0, 15, at15), std::optional<uint64_t>(15));
  EXPECT_EQ(at15.last_applied, 2);
  EXPECT_EQ(at15.applied_rounds, (std::vector<uint64_t>{0, 1, 2}));
  // Nothing at or before step 9 is left: no takeover continues from there.
  actors::GroupStore at9;
  EXPECT_EQ(journal.restore(0, 9, at9), std::nullopt);
}

TEST(GroupJournal, AGroupResetToATakenEntryContinuesItsRoundsExactly) {
  swarmrt::testing::TestSystem ts;
  swarmrt::testing::TempDir dir;
  auto ctx = context();
  // The lost leader's group: rounds 0 and 1, journaled.
  auto lost = std::make_shared<actors::GroupStore>();
  lost->journal = dir.str();
  caf::scoped_actor w{*ts.sys};
  auto old_group = spawn_group(ts, ctx, lost, w);
  for (uint64_t round = 0; round < 2; ++round) {
    w->send(old_group, round_atom::value,
            contribution(round, 1, at::tensor({0.3f, 0.1f}), 4 * (round + 1)));
    ASSERT_EQ(next_answer(w).status, messages::RoundStatus::applied);
  }
  // Its round 2, as it would have answered it.
  w->send(old_group, round_atom::value, contribution(2, 1, at::tensor({-0.2f, 0.5f}), 12));
  messages::Frame want;
  ASSERT_EQ(next_answer(w, &want).status, messages::RoundStatus::applied);
  caf::anon_send_exit(old_group, caf::exit_reason::kill);

  // The new leader's group starts from θ(0) (its first round is 0) and is reset to the entry
  // of step 8 (round 1) once it has set up and taken its members, as in a takeover.
  auto fresh = std::make_shared<actors::GroupStore>();
  caf::scoped_actor w2{*ts.sys};
  auto group = spawn_group(ts, ctx, fresh, w2);
  auto round_of = [&] {
    messages::WorkerState st;
    w2->request(group, std::chrono::seconds(10), state_atom::value)
        .receive([&](const messages::WorkerState& s) { st = s; },
                 [&](const caf::error& e) { ADD_FAILURE() << ts.sys->render(e); });
    return st.round;
  };
  EXPECT_EQ(round_of(), 0);
  ASSERT_EQ(actors::GroupJournal(dir.str()).restore(0, 11, *fresh), std::optional<uint64_t>(8));
  w2->send(group, reset_atom::value);
  EXPECT_EQ(round_of(), 2);
  // Round 2 again, with the same pseudo-gradient: the same θ(2), bit for bit (the outer
  // momentum came back with θ).
  w2->send(group, round_atom::value, contribution(2, 1, at::tensor({-0.2f, 0.5f}), 12));
  messages::Frame got;
  const auto h = next_answer(w2, &got);
  ASSERT_EQ(h.status, messages::RoundStatus::applied) << h.reason;
  EXPECT_EQ(h.round_id, 2u);
  EXPECT_TRUE(at::equal(got.tensors[0], want.tensors[0]))
      << got.tensors[0] << " vs " << want.tensors[0];
}

TEST(GroupJournal, ATornEntryIsRefusedAndNoOlderOneIsTakenInstead) {
  swarmrt::testing::TempDir dir;
  const actors::GroupJournal journal(dir.str());
  actors::GroupStore store;
  store.theta = {{"w", at::tensor({1.0f})}};
  store.momentum = {{"w", at::tensor({0.5f})}};
  store.last_applied = 0;
  journal.write(0, 10, store);
  store.last_applied = 1;
  journal.write(0, 20, store);
  // The newest entry torn (a crash mid-write would leave the temporary file instead, but a
  // disk may still lose its tail).
  fs::resize_file(entry(dir, 20), fs::file_size(entry(dir, 20)) - 7);
  std::string refused;
  actors::GroupStore out;
  EXPECT_EQ(journal.restore(0, 25, out,
                            [&](const std::string& path, const std::string& why) {
                              refused = path + ": " + why;
                            }),
            std::nullopt);
  EXPECT_NE(refused.find("group-0-step-00000020.ckpt"), std::string::npos) << refused;
  EXPECT_EQ(journal.restore(0, 15, out), std::optional<uint64_t>(10));
  // Entries after a step go (a run continuing from there writes its own); forget drops all.
  journal.drop_after(10);
  EXPECT_FALSE(fs::exists(entry(dir, 20)));
  EXPECT_TRUE(fs::exists(entry(dir, 10)));
  journal.forget(0);
  EXPECT_FALSE(fs::exists(entry(dir, 10)));
}
