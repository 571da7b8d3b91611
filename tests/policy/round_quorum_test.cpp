// The DiLoCo group's quorum rule alone (policy/round_quorum.hpp).
#include "policy/round_quorum.hpp"

#include <gtest/gtest.h>

using swarmrt::policy::RoundQuorum;

TEST(RoundQuorum, AppliesWhenEveryMemberContributed) {
  RoundQuorum q{2};
  EXPECT_FALSE(q.complete({1, 2, 3}, {1, 2}, {}));
  EXPECT_TRUE(q.complete({1, 2, 3}, {1, 2, 3}, {}));
}

TEST(RoundQuorum, AnExcusedMemberIsNotWaitedFor) {
  RoundQuorum q{1};
  EXPECT_TRUE(q.complete({1, 2, 3}, {1, 3}, {2}));
  // Excused alone is not a round: nothing to apply.
  EXPECT_FALSE(q.complete({1, 2}, {}, {1, 2}));
}

TEST(RoundQuorum, AMemberThatLeftIsNotWaitedForAndAStrangerDoesNotCount) {
  RoundQuorum q{1};
  // Worker 3 left while the round was collected: 1 and 2 are every member now.
  EXPECT_TRUE(q.complete({1, 2}, {1, 2, 3}, {}));
  // Worker 9's contribution (it left, another took its place) does not stand for worker 2's.
  EXPECT_FALSE(q.complete({1, 2}, {1, 9}, {}));
}

TEST(RoundQuorum, AfterTheTimeoutMinReplicasIsEnough) {
  RoundQuorum q{2};
  EXPECT_FALSE(q.enough_after_timeout(0));
  EXPECT_FALSE(q.enough_after_timeout(1));
  EXPECT_TRUE(q.enough_after_timeout(2));
  EXPECT_TRUE(q.enough_after_timeout(3));
  // min_replicas 0 still needs one contribution: an empty round applies nothing.
  EXPECT_FALSE(RoundQuorum{0}.enough_after_timeout(0));
  EXPECT_TRUE(RoundQuorum{0}.enough_after_timeout(1));
}
