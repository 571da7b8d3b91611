// A supervisor message by message, on CAF's deterministic test scheduler and its clock: the
// test kills the children and decides when time passes, so the backoff, the restart
// intensity and the escalation are seen exactly (policy/restart_policy.hpp decides; these
// tests check that the actor follows it).
#include <gtest/gtest.h>

#include "../actors/deterministic.hpp"

#include "actors/runtime/runtime.hpp"
#include "supervisors/supervisor.hpp"

using namespace swarmrt;
using namespace std::chrono_literals;

namespace {

caf::behavior idle_child(caf::event_based_actor*) {
  return {[](int) {}};
}

// Monitors `target` and keeps the reason it went down with.
caf::behavior watcher(caf::event_based_actor* self, caf::actor target,
                      std::shared_ptr<std::optional<caf::error>> reason) {
  self->monitor(target);
  self->set_down_handler([reason](const caf::down_msg& d) { *reason = d.reason; });
  return {[](int) {}};
}

struct SupervisorFixture : ::testing::Test, swarmrt::testing::DeterministicSystem {
  caf::actor sup, first;
  std::shared_ptr<int> starts = std::make_shared<int>(0);
  std::shared_ptr<std::vector<caf::actor>> announced = std::make_shared<std::vector<caf::actor>>();

  // One child ("stage0/worker0") under a supervisor with this policy.
  void start(int64_t max_restarts, double backoff_ms, double max_backoff_ms) {
    supervisors::ChildSpec child;
    child.name = "stage0/worker0";
    child.kind = "worker";
    child.stage = 0;
    auto n = starts;
    auto* system = sys.get();
    child.start = [n, system] {
      ++*n;
      return system->spawn(idle_child);
    };
    auto list = announced;
    child.on_restart = [list](const caf::actor& a) { list->push_back(a); };
    child.current = first = child.start();
    supervisors::SupervisorSetup setup;
    setup.name = "test supervisor";
    setup.policy.max_restarts = max_restarts;
    setup.policy.restart_window_s = 3600;  // every restart of a test falls inside it
    setup.policy.backoff_ms = backoff_ms;
    setup.policy.max_backoff_ms = max_backoff_ms;
    setup.children.push_back(child);
    sup = sys->spawn(supervisors::supervisor, setup);
    sched->run();
  }

  // The running child: the first, or the last one the supervisor announced.
  caf::actor current() const { return announced->empty() ? first : announced->back(); }

  // Kills the running child; the milliseconds of test time until its successor started
  // (-1: none within `limit_ms`).
  int kill_and_wait(int limit_ms = 5000, caf::exit_reason how = caf::exit_reason::kill) {
    const int before = *starts;
    caf::anon_send_exit(current(), how);
    sched->run();
    for (int ms = 0; ms <= limit_ms; ++ms) {
      if (*starts > before) return ms;
      sched->advance_time(1ms);
      sched->run();
    }
    return -1;
  }

  void TearDown() override {
    if (sup) caf::anon_send_exit(sup, caf::exit_reason::kill);
    sched->run();
    sched->trigger_timeouts();
    sched->run();
  }
};

}  // namespace

TEST_F(SupervisorFixture, RestartsAfterTheBackoffNotBeforeAndAnnouncesTheNewChild) {
  start(10, 20, 1000);
  ASSERT_EQ(*starts, 1);
  caf::anon_send_exit(first, caf::exit_reason::kill);
  sched->run();
  sched->advance_time(19ms);
  sched->run();
  EXPECT_EQ(*starts, 1) << "restarted before its backoff";
  EXPECT_TRUE(announced->empty());
  sched->advance_time(1ms);
  sched->run();
  EXPECT_EQ(*starts, 2);
  ASSERT_EQ(announced->size(), 1u);
  EXPECT_NE(announced->back(), first);
}

TEST_F(SupervisorFixture, BackoffDoublesWithEveryRecentRestartUpToItsCap) {
  start(10, 20, 50);
  EXPECT_EQ(kill_and_wait(), 20);
  EXPECT_EQ(kill_and_wait(), 40);
  EXPECT_EQ(kill_and_wait(), 50);  // 80, capped by max_backoff_ms
  EXPECT_EQ(kill_and_wait(), 50);
  EXPECT_EQ(announced->size(), 4u);
}

TEST_F(SupervisorFixture, EscalatesWhenTheRestartIntensityIsExceeded) {
  start(2, 1, 1);
  auto reason = std::make_shared<std::optional<caf::error>>();
  // Held: an actor no handle refers to is gone.
  auto watch = sys->spawn(watcher, sup, reason);
  sched->run();
  EXPECT_GE(kill_and_wait(), 0);
  EXPECT_GE(kill_and_wait(), 0);
  // The third death within the window is one more than max_restarts: no restart, and the
  // supervisor quits with an error its own watcher sees.
  EXPECT_EQ(kill_and_wait(100), -1);
  EXPECT_EQ(*starts, 3);
  ASSERT_TRUE(reason->has_value()) << "the supervisor did not escalate";
  EXPECT_TRUE(static_cast<bool>(**reason));
  EXPECT_NE(sys->render(**reason).find("giving up"), std::string::npos) << sys->render(**reason);
  caf::anon_send_exit(watch, caf::exit_reason::kill);
}

TEST_F(SupervisorFixture, AChildStoppedOnPurposeIsNotRestarted) {
  start(10, 1, 1);
  EXPECT_EQ(kill_and_wait(100, caf::exit_reason::user_shutdown), -1);
  EXPECT_EQ(*starts, 1);
  EXPECT_TRUE(announced->empty());
}
