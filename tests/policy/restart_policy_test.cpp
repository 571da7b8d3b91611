#include <gtest/gtest.h>

#include "policy/restart_policy.hpp"

using swarmrt::policy::RestartPolicy;
using Clock = RestartPolicy::Clock;
using std::chrono::milliseconds;
using std::chrono::seconds;

namespace {
swarmrt::config::SupervisionConfig config(int64_t max_restarts, double window_s) {
  swarmrt::config::SupervisionConfig c;
  c.max_restarts = max_restarts;
  c.restart_window_s = window_s;
  c.backoff_ms = 20;
  c.max_backoff_ms = 100;
  return c;
}

// Any moment will do: the policy only compares times.
const Clock::time_point t0 = Clock::time_point{} + seconds(100);
}  // namespace

TEST(RestartPolicy, BackoffDoublesInsideTheWindowUpToItsCap) {
  RestartPolicy p(config(10, 10));
  EXPECT_EQ(p.next(t0), milliseconds(20));
  EXPECT_EQ(p.next(t0 + milliseconds(1)), milliseconds(40));
  EXPECT_EQ(p.next(t0 + milliseconds(2)), milliseconds(80));
  EXPECT_EQ(p.next(t0 + milliseconds(3)), milliseconds(100));  // capped by max_backoff_ms
  EXPECT_EQ(p.recent(t0 + milliseconds(3)), 4u);
}

TEST(RestartPolicy, TheRestartBeyondTheIntensityIsRefusedAndNotRecorded) {
  RestartPolicy p(config(2, 10));
  ASSERT_TRUE(p.next(t0));
  ASSERT_TRUE(p.next(t0 + seconds(1)));
  EXPECT_FALSE(p.next(t0 + seconds(2)));
  EXPECT_EQ(p.recent(t0 + seconds(2)), 2u);
}

TEST(RestartPolicy, RestartsOlderThanTheWindowNoLongerCount) {
  RestartPolicy p(config(2, 10));
  ASSERT_TRUE(p.next(t0));
  ASSERT_TRUE(p.next(t0 + seconds(1)));
  // 11 s after the first restart it has left the window: one more is allowed, and the
  // backoff starts over from the restarts still inside it.
  EXPECT_EQ(p.next(t0 + seconds(11)), milliseconds(40));
  EXPECT_EQ(p.recent(t0 + seconds(12)), 1u);
}
