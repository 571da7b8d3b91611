// The step tracker message by message, on CAF's deterministic test scheduler: the test plays
// the stage workers (puppet actors that log what they are sent) and decides exactly when each
// of their answers arrives and when one of them dies, so a fault lands in a chosen phase of
// the step every time. The loaders are the real ones.
#include <gtest/gtest.h>

#include "../deterministic.hpp"

#include "actors/loader/data_loader.hpp"
#include "actors/runtime/runtime.hpp"
#include "actors/tracker/step_tracker.hpp"
#include "config/config.hpp"
#include "messages/frame.hpp"

using namespace swarmrt;
using namespace swarmrt::atoms;

namespace {

using Log = std::shared_ptr<std::vector<caf::message>>;

// A stand-in for a stage worker: logs every message; answers the tracker's requests as a
// worker that holds nothing would.
caf::behavior puppet(caf::event_based_actor* self, Log log) {
  self->set_default_handler([log](caf::scheduled_actor*, caf::message_view& x) {
    log->push_back(x.copy_content_to_message());
    return caf::result<caf::message>{caf::message{}};
  });
  return {
      [=](cancel_atom, uint64_t step, uint32_t mb, uint32_t attempt) {
        log->push_back(caf::make_message(cancel_atom::value, step, mb, attempt));
        return false;
      },
  };
}

template <class... Ts>
size_t count(const Log& log) {
  size_t n = 0;
  for (const auto& m : *log) n += m.match_elements<Ts...>() ? 1 : 0;
  return n;
}

struct TrackerFixture : ::testing::Test, swarmrt::testing::DeterministicSystem {
  std::shared_ptr<actors::SwarmContext> ctx = std::make_shared<actors::SwarmContext>();
  std::shared_ptr<const model::Corpus> corpus;
  caf::actor tracker, loader;
  Log log0 = std::make_shared<std::vector<caf::message>>();
  Log log1 = std::make_shared<std::vector<caf::message>>();
  caf::actor w0, w1;  // stage 0 and stage 1
  static constexpr uint32_t id0 = 1000, id1 = 1001;

  void SetUp() override {
    ctx->config = config::parse_config(
        "[model]\npreset = \"tiny\"\nn_layer = 2\nblock_size = 8\n"
        "[train]\nsteps = 3\nmicro_batch = 1\nmicro_batches = 2\neval_every = 0\n"
        "eval_batches = 1\n"
        "[data]\npath = \"unused\"\n"
        "[swarm]\nmode = \"pp\"\nstages = 2\nworkers_per_stage = 1\n",
        "tracker_test");
    corpus = std::make_shared<const model::Corpus>(
        model::Corpus::from_text(std::string(4096, 'a') + std::string(4096, 'b'), 0.25));
    actors::LoaderSetup ls;
    ls.corpus = corpus;
    ls.block_size = ctx->config.model.block_size;
    ls.micro_batch = ctx->config.train.micro_batch;
    ls.micro_batches = ctx->config.train.micro_batches;
    loader = caf::actor_cast<caf::actor>(sys->spawn(actors::data_loader, ls));
    tracker = sys->spawn(actors::step_tracker, make_setup());
    w0 = sys->spawn(puppet, log0);
    w1 = sys->spawn(puppet, log1);
    caf::anon_send(tracker, members_atom::value, membership());
    caf::anon_send(tracker, run_atom::value);
    sched->run();
  }

  // Every tracker of the fixture shares one store, as the tracker supervisor's successive
  // trackers do: a new one continues where its predecessor was lost.
  actors::TrackerStorePtr store = std::make_shared<actors::TrackerStore>();

  actors::TrackerSetup make_setup() {
    actors::TrackerSetup setup;
    setup.ctx = ctx;
    setup.loaders = {caf::actor_cast<actors::loader_actor>(loader)};
    setup.averagers = {caf::actor(), caf::actor()};
    setup.groups = {caf::actor(), caf::actor()};
    setup.corpus = corpus;
    setup.progress = false;
    setup.store = store;
    return setup;
  }

  messages::Membership membership() const {
    messages::Membership m;
    m.version = 1;
    m.stages = {{{id0, 0, w0, "", "cpu"}}, {{id1, 1, w1, "", "cpu"}}};
    return m;
  }

  void TearDown() override {
    for (const auto& a : {tracker, loader, w0, w1}) caf::anon_send_exit(a, caf::exit_reason::kill);
    sched->run();
  }

  // Both micro-batches of `step` come back: stage 1 reports the loss, stage 0 the completion.
  void complete_step(uint64_t step) {
    for (uint32_t mb = 0; mb < 2; ++mb) {
      caf::anon_send(tracker, loss_atom::value,
                     messages::LossReport{step, mb, 0, 2.5, std::vector<uint32_t>{id0, id1}});
      caf::anon_send(tracker, done_atom::value, messages::DoneReport{step, mb, 0, id0});
    }
    sched->run();
  }

  // The micro-batch frames a stage-0 worker (by default the first) was sent for `step`.
  size_t frames_for(uint64_t step, const Log& log = nullptr) {
    size_t n = 0;
    for (const auto& m : *(log ? log : log0))
      if (m.match_elements<frame_atom, messages::Frame>())
        n += messages::open_frame(m.get_as<messages::Frame>(1)).step == step ? 1 : 0;
    return n;
  }
};

TEST_F(TrackerFixture, AStepGoesThroughReduceAndApplyOneMessageAtATime) {
  EXPECT_EQ(frames_for(1), 2u);  // both micro-batches of step 1 went to stage 0
  complete_step(1);
  EXPECT_EQ((count<reduce_atom, uint64_t>(log0)), 1u);
  EXPECT_EQ((count<reduce_atom, uint64_t>(log1)), 1u);
  caf::anon_send(tracker, norm_atom::value, messages::NormReport{1, 0, id0, 1.0, 2});
  sched->run();
  EXPECT_EQ((count<apply_atom, uint64_t, double, double>(log0)), 0u);  // still waits for stage 1
  caf::anon_send(tracker, norm_atom::value, messages::NormReport{1, 1, id1, 3.0, 2});
  sched->run();
  EXPECT_EQ((count<apply_atom, uint64_t, double, double>(log0)), 1u);
  EXPECT_EQ((count<apply_atom, uint64_t, double, double>(log1)), 1u);
  // A norm that arrives again once the step is applying is stale: no second apply.
  caf::anon_send(tracker, norm_atom::value, messages::NormReport{1, 0, id0, 1.0, 2});
  sched->run();
  EXPECT_EQ((count<apply_atom, uint64_t, double, double>(log0)), 1u);
  EXPECT_EQ(frames_for(2), 0u);
  caf::anon_send(tracker, applied_atom::value, uint64_t{1}, id0, messages::ProcessBytes{});
  caf::anon_send(tracker, applied_atom::value, uint64_t{1}, id1, messages::ProcessBytes{});
  sched->run();
  EXPECT_EQ(frames_for(2), 2u);  // step 2 opened only once every worker applied step 1
}

TEST_F(TrackerFixture, AWorkerLostWhileTheStepReducesIsNoLongerWaitedFor) {
  complete_step(1);
  caf::anon_send(tracker, norm_atom::value, messages::NormReport{1, 0, id0, 1.0, 2});
  sched->run();
  ASSERT_EQ((count<apply_atom, uint64_t, double, double>(log0)), 0u);
  caf::anon_send_exit(w1, caf::exit_reason::kill);  // stage 1's only worker, before its norm
  sched->run();
  // The survivor is re-wired at once (stage 1 now empty) and the step is applied without
  // the lost worker's norm.
  bool rewired = false;
  for (const auto& m : *log0)
    if (m.match_elements<members_atom, messages::Membership>()) {
      const auto& ms = m.get_as<messages::Membership>(1);
      rewired |= ms.stages.size() == 2 && ms.stages[1].empty() && ms.stages[0].size() == 1;
    }
  EXPECT_TRUE(rewired);
  EXPECT_EQ((count<apply_atom, uint64_t, double, double>(log0)), 1u);
  caf::anon_send(tracker, applied_atom::value, uint64_t{1}, id0, messages::ProcessBytes{});
  sched->run();
  // Step 2 opens, but the pipeline is paused until stage 1 has a worker again: its
  // micro-batches go to stage 0 and no further.
  EXPECT_EQ(frames_for(2), 2u);
  EXPECT_EQ((count<reduce_atom, uint64_t>(log0)), 1u);
}

TEST_F(TrackerFixture, AWorkerLostMidStepHasTheMicroBatchesThroughItReRun) {
  // Micro-batch 0 completed through both workers; micro-batch 1 is still on its way.
  caf::anon_send(tracker, loss_atom::value,
                 messages::LossReport{1, 0, 0, 2.5, std::vector<uint32_t>{id0, id1}});
  caf::anon_send(tracker, done_atom::value, messages::DoneReport{1, 0, 0, id0});
  sched->run();
  caf::anon_send_exit(w1, caf::exit_reason::kill);
  sched->run();
  // Micro-batch 0's gradient at stage 1 died with the worker, micro-batch 1's path is not
  // known: both are cancelled at the survivor (attempt 1) and sent again, pinned.
  EXPECT_EQ((count<cancel_atom, uint64_t, uint32_t, uint32_t>(log0)), 2u);
  size_t reruns = 0;
  for (const auto& m : *log0)
    if (m.match_elements<frame_atom, messages::Frame>())
      reruns += messages::open_frame(m.get_as<messages::Frame>(1)).attempt == 1 ? 1 : 0;
  EXPECT_EQ(reruns, 2u);
  EXPECT_EQ((count<reduce_atom, uint64_t>(log0)), 0u);  // the step is not closed
}

// A tracker lost while the workers apply a step: its successor sends the same apply again
// (a worker that took it ignores it), so a worker that had not taken it yet must be told the
// same learning rate and the same global clip coefficient, or its replica's step would differ.
TEST_F(TrackerFixture, ATrackerLostWhileApplyingHasItsSuccessorSendTheSameApply) {
  complete_step(1);
  // Norms large enough that the step is clipped (train.grad_clip = 1).
  caf::anon_send(tracker, norm_atom::value, messages::NormReport{1, 0, id0, 100.0, 2});
  caf::anon_send(tracker, norm_atom::value, messages::NormReport{1, 1, id1, 300.0, 2});
  sched->run();
  auto applies = [&] {
    std::vector<std::pair<double, double>> out;  // (lr, coef)
    for (const auto& m : *log1)
      if (m.match_elements<apply_atom, uint64_t, double, double>())
        out.emplace_back(m.get_as<double>(2), m.get_as<double>(3));
    return out;
  };
  ASSERT_EQ(applies().size(), 1u);
  const auto first = applies()[0];
  ASSERT_GT(first.second, 0.0);
  ASSERT_LT(first.second, 1.0);
  caf::anon_send_exit(tracker, caf::exit_reason::kill);
  sched->run();
  tracker = sys->spawn(actors::step_tracker, make_setup());
  caf::anon_send(tracker, members_atom::value, membership());
  caf::anon_send(tracker, run_atom::value);
  sched->run();
  ASSERT_EQ(applies().size(), 2u);
  EXPECT_EQ(applies()[1].first, first.first);
  EXPECT_EQ(applies()[1].second, first.second);
  // Both workers report the step applied: the successor opens step 2.
  caf::anon_send(tracker, applied_atom::value, uint64_t{1}, id0, messages::ProcessBytes{});
  caf::anon_send(tracker, applied_atom::value, uint64_t{1}, id1, messages::ProcessBytes{});
  sched->run();
  EXPECT_EQ(frames_for(2), 2u);
}

// Both workers of a one-worker-per-stage pipeline lost while the step reduces, then restarted
// by their supervisors one right after the other. Nothing is left to reduce or apply the step:
// it closes without them (it waited for an apply no one would send, for good), and the two
// restarts handled back to back both join (built from one snapshot, the second dropped the
// first: stage 0 stayed empty and the pipeline paused for good).
TEST_F(TrackerFixture, EveryWorkerLostWhileTheStepReducesIsReplacedByItsRestartedSuccessor) {
  complete_step(1);
  caf::anon_send_exit(w1, caf::exit_reason::kill);
  caf::anon_send_exit(w0, caf::exit_reason::kill);
  sched->run();
  Log next0 = std::make_shared<std::vector<caf::message>>();
  Log next1 = std::make_shared<std::vector<caf::message>>();
  auto v0 = sys->spawn(puppet, next0);
  auto v1 = sys->spawn(puppet, next1);
  caf::anon_send(tracker, restarted_atom::value, messages::Member{id0, 0, v0, "", "cpu"});
  caf::anon_send(tracker, restarted_atom::value, messages::Member{id1, 1, v1, "", "cpu"});
  sched->run();
  // Both successors are in the membership stage 0's new worker is told about...
  std::optional<messages::Membership> last;
  for (const auto& m : *next0)
    if (m.match_elements<members_atom, messages::Membership>())
      last = m.get_as<messages::Membership>(1);
  ASSERT_TRUE(last);
  ASSERT_EQ(last->stages.size(), 2u);
  ASSERT_EQ(last->stages[0].size(), 1u);
  ASSERT_EQ(last->stages[1].size(), 1u);
  EXPECT_EQ(last->stages[0][0].handle, v0);
  EXPECT_EQ(last->stages[1][0].handle, v1);
  // ...and step 2's micro-batches go to it.
  EXPECT_EQ(frames_for(2, next0), 2u);
  for (const auto& a : {v0, v1}) caf::anon_send_exit(a, caf::exit_reason::kill);
  sched->run();
}

// A stage's only worker restarted mid-step, and its node's restart announced before the old
// actor's down arrives (two nodes, two connections: either may come first). The restart waits
// for the next step, as every membership change mid-step does; then the down empties the stage
// and pauses the pipeline. The waiting membership must be taken then: no other one may come,
// and the pipeline stayed paused for good (`swarmrt ctl checkpoint` timed out in net.console).
TEST_F(TrackerFixture, ARestartAnnouncedBeforeItsPredecessorsDownResumesThePipeline) {
  Log next1 = std::make_shared<std::vector<caf::message>>();
  auto v1 = sys->spawn(puppet, next1);
  caf::anon_send(tracker, restarted_atom::value, messages::Member{id1, 1, v1, "", "cpu"});
  sched->run();
  caf::anon_send_exit(w1, caf::exit_reason::kill);
  sched->run();
  caf::scoped_actor self{*sys};
  self->send(tracker, ask_members_atom::value);
  sched->run();
  std::optional<messages::Membership> members;
  self->receive([&](const messages::Membership& m) { members = m; }, [&](const caf::error&) {},
                caf::after(std::chrono::seconds(0)) >> [&] {});
  ASSERT_TRUE(members);
  ASSERT_EQ(members->stages.size(), 2u);
  ASSERT_EQ(members->stages[1].size(), 1u);
  EXPECT_EQ(members->stages[1][0].handle, v1);
  EXPECT_EQ((count<members_atom, messages::Membership>(next1)), 1u);  // told it is a member
  caf::anon_send_exit(v1, caf::exit_reason::kill);
  sched->run();
}
}  // namespace

TEST_F(TrackerFixture, AWorkerThatJoinsBetweenStepsTakesAPeersStateEvenIfAdoptedFirst) {
  // A worker of a new id (a balancer's move) joins stage 1 during step 1; the tracker adopts it
  // as step 2 opens, and only then does its request for a starting state arrive (its thread
  // was slow to start). It is a member by then, but not one the run started with: it must get
  // a live peer's state (the tracker asks w1), never the initialization (its peers trained),
  // and at once.
  Log logv = std::make_shared<std::vector<caf::message>>();
  auto v = sys->spawn(puppet, logv);
  constexpr uint32_t idv = 1002;
  caf::anon_send(tracker, restarted_atom::value, messages::Member{idv, 1, v, "", "cpu"});
  sched->run();
  complete_step(1);
  for (auto [stage, id] : {std::pair<uint32_t, uint32_t>{0, id0}, {1, id1}})
    caf::anon_send(tracker, norm_atom::value, messages::NormReport{1, stage, id, 1.0, 2});
  sched->run();
  caf::anon_send(tracker, applied_atom::value, uint64_t{1}, id0, messages::ProcessBytes{});
  caf::anon_send(tracker, applied_atom::value, uint64_t{1}, id1, messages::ProcessBytes{});
  sched->run();
  ASSERT_EQ(frames_for(2), 2u);  // step 2 is open, with v a member
  bool member = false;
  for (const auto& m : *logv) member |= m.match_elements<members_atom, messages::Membership>();
  ASSERT_TRUE(member);
  std::optional<std::string> source;
  caf::scoped_actor self{*sys};
  self->send(tracker, start_state_atom::value, messages::StateRequest{1, idv, v});
  sched->run();
  // Served at once: v is part of step 2 and takes no work before it has a state, so waiting
  // for the step's end would hold the step open; until step 2 applies, w1 still holds the
  // state of step 1.
  EXPECT_EQ((count<snapshot_atom>(log1)), 1u);  // the live peer was asked for a snapshot
  self->receive([&](const messages::WorkerState& st) { source = st.source; },
                [&](const caf::error&) { source = "error"; },
                caf::after(std::chrono::seconds(0)) >> [&] {});
  // Not the initialization (the puppet peer answers nothing a state can be made of).
  EXPECT_NE(source.value_or(""), "its initialization");
  caf::anon_send_exit(v, caf::exit_reason::kill);
}
