// The swarm's byte totals: this process's counters plus what the other processes reported.
#include <gtest/gtest.h>

#include "actors/common/context.hpp"

using namespace swarmrt::actors;

TEST(SwarmBytes, OwnCountersPlusEveryOtherProcesssLastReport) {
  SwarmContext ctx;
  ctx.bytes->add(Traffic::activations, 100);
  ctx.bytes->add(Traffic::parameters, 7);
  EXPECT_EQ(ctx.swarm_bytes()["activations"], 100u);  // alone: its own
  ctx.remote_bytes->report("node1", {1000, 2000, 30, 0, 5});
  ctx.remote_bytes->report("node2", {10, 20, 3, 0, 1});
  auto total = ctx.swarm_bytes();
  EXPECT_EQ(total["activations"], 1110u);
  EXPECT_EQ(total["gradients"], 2020u);
  EXPECT_EQ(total["pseudo_gradients"], 33u);
  EXPECT_EQ(total["parameters"], 7u);
  EXPECT_EQ(total["control"], 6u);
  // Two workers of node1 report snapshots taken at different times, the older one last: the
  // counters only grow, so the larger count of each kind stands.
  ctx.remote_bytes->report("node1", {1500, 2100, 30, 0, 6});
  ctx.remote_bytes->report("node1", {1200, 2050, 40, 0, 5});
  total = ctx.swarm_bytes();
  EXPECT_EQ(total["activations"], 1610u);
  EXPECT_EQ(total["gradients"], 2120u);
  EXPECT_EQ(total["pseudo_gradients"], 43u);
  // node2 stopped reporting (it died): what it reported still counts.
  EXPECT_EQ(ctx.swarm_bytes()["control"], 7u);
}

TEST(SwarmBytes, ShortOrEmptyReportsAreZeroesNotErrors) {
  SwarmContext ctx;
  ctx.remote_bytes->report("node1", {});
  ctx.remote_bytes->report("node2", {9});
  const auto total = ctx.swarm_bytes();
  EXPECT_EQ(total["activations"], 9u);
  EXPECT_EQ(total["control"], 0u);
  EXPECT_EQ(total.size(), 5u);
}
