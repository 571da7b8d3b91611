#include <gtest/gtest.h>

#include "policy/wiring.hpp"

using swarmrt::policy::Wiring;
using swarmrt::policy::WiringPolicy;

namespace {
// Runs `tasks` tasks through the wiring, worker i taking seconds[i] per sample, completing
// each task before the next is chosen; returns the tasks each worker got.
std::vector<int> simulate(Wiring& w, const std::vector<double>& seconds, int tasks) {
  std::vector<int> got(seconds.size());
  for (int t = 0; t < tasks; ++t) {
    auto id = w.choose(2.0);
    EXPECT_TRUE(id.has_value());
    ++got[*id];
    w.completed(*id, 2.0, 2.0 * seconds[*id]);
  }
  return got;
}
}  // namespace

TEST(Wiring, ThroughputGivesTheSlowWorkerAThird) {
  Wiring w(WiringPolicy::throughput, 42, 4);
  w.set_members({0, 1});
  auto got = simulate(w, {0.01, 0.02}, 3000);  // worker 1 is 2x slower
  const double slow_share = got[1] / 3000.0;
  EXPECT_NEAR(slow_share, 1.0 / 3.0, 0.02);
  EXPECT_NEAR(*w.throughput(0) / *w.throughput(1), 2.0, 1e-6);
}

TEST(Wiring, UniformSplitsEvenly) {
  Wiring w(WiringPolicy::uniform, 42, 4);
  w.set_members({0, 1});
  auto got = simulate(w, {0.01, 0.02}, 3000);
  EXPECT_NEAR(got[1] / 3000.0, 0.5, 0.04);  // binomial sd is ~0.009
}

TEST(Wiring, BackpressureCapsInflight) {
  Wiring w(WiringPolicy::throughput, 1, 2);
  w.set_members({5, 6});
  for (int i = 0; i < 4; ++i) EXPECT_TRUE(w.choose(1).has_value());
  EXPECT_EQ(w.inflight(5), 2);
  EXPECT_EQ(w.inflight(6), 2);
  EXPECT_FALSE(w.choose(1).has_value());  // all full: the sender must queue
  w.release(6);
  EXPECT_EQ(w.choose(1), std::optional<uint32_t>(6));
}

TEST(Wiring, AJoinerBesideASlowWorkerIsChargedTheMeasuredMeanNotAFixedCost) {
  // One worker of a stage measured at 10 samples/s; a worker 4x faster joins (the balancer
  // moved it there). Tasks of 4 samples. Charged a fixed 1 s per sample, the joiner took one
  // task and then none of the next 9 (the slow worker's key grows 0.4 s a task); charged the
  // mean, it takes its share from the start and, once measured, most of the tasks.
  Wiring w(WiringPolicy::throughput, 7, 1000);
  w.set_members({0});
  for (int i = 0; i < 20; ++i) {
    ASSERT_EQ(w.choose(4.0), std::optional<uint32_t>(0));
    w.completed(0, 4.0, 0.4);
  }
  w.set_members({0, 1});
  int to_new = 0;
  for (int i = 0; i < 10; ++i) {
    const auto id = *w.choose(4.0);
    to_new += id == 1;
    w.completed(id, 4.0, id == 1 ? 0.1 : 0.4);
  }
  EXPECT_GE(to_new, 6);
}

TEST(Wiring, JoinerEntersAtTheMinimumKeyAndExcludedGetNothing) {
  Wiring w(WiringPolicy::throughput, 3, 1000);
  w.set_members({0, 1});
  simulate(w, {0.01, 0.01}, 200);
  w.set_members({0, 1, 2});
  // The joiner is unmeasured: it must not receive every task (it starts level, not at 0).
  int to_new = 0;
  for (int i = 0; i < 30; ++i) {
    auto id = *w.choose(1.0);
    to_new += id == 2;
    w.completed(id, 1.0, 0.01);
  }
  EXPECT_GT(to_new, 0);
  EXPECT_LT(to_new, 30);
  w.exclude(1);
  for (int i = 0; i < 50; ++i) EXPECT_NE(*w.choose(1.0), 1u);
}
