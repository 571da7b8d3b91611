// The synchronous baseline of `swarmrt simulate` (policy/goodput.hpp) and the time a peer's
// state takes from its donors (policy/simulator.hpp: transfer_seconds), against cases
// computed by hand.
#include <gtest/gtest.h>

#include <stdexcept>

#include "policy/goodput.hpp"
#include "policy/simulator.hpp"

namespace swarmrt::policy {
namespace {

const SyncBaseline kBaseline{600, 100};  // a checkpoint every 600 s of progress, 100 s restarts

TEST(SyncGoodput, WithoutFailuresEverySecondCounts) {
  EXPECT_EQ(sync_goodput({}, 3600, kBaseline), 1.0);
  EXPECT_EQ(sync_goodput({3600, 5000}, 3600, kBaseline), 1.0);  // at or after the end
}

TEST(SyncGoodput, AFailureLosesTheWorkSinceTheCheckpointAndTheRestart) {
  // Up to 1000 s: 1000 s of progress, back to the checkpoint at 600; down until 1100, then
  // 2500 s more: 3100 of 3600.
  EXPECT_DOUBLE_EQ(sync_goodput({1000}, 3600, kBaseline), 3100.0 / 3600);
  // A second failure during the restart starts it again: up at 1150, 600 + 2450.
  EXPECT_DOUBLE_EQ(sync_goodput({1050, 1000}, 3600, kBaseline), 3050.0 / 3600);
  // Two failures apart: 1000 -> 600 kept, up at 1100; at 2000, 600 + 900 = 1500 -> 1200 kept,
  // up at 2100; then 1500 s more.
  EXPECT_DOUBLE_EQ(sync_goodput({1000, 2000}, 3600, kBaseline), 2700.0 / 3600);
}

TEST(SyncGoodput, FailuresFasterThanARestartLeaveNothing) {
  std::vector<double> every_minute;
  for (double t = 60; t < 3600; t += 60) every_minute.push_back(t);
  EXPECT_EQ(sync_goodput(every_minute, 3600, kBaseline), 0.0);
}

TEST(SyncGoodput, RefusesANonsenseBaseline) {
  EXPECT_THROW(sync_goodput({}, 0, kBaseline), std::invalid_argument);
  EXPECT_THROW(sync_goodput({}, 3600, SyncBaseline{0, 100}), std::invalid_argument);
  EXPECT_THROW(sync_goodput({}, 3600, SyncBaseline{600, -1}), std::invalid_argument);
}

TEST(TransferSeconds, DonorsShareTheLoadUpToTheReceiversLink) {
  // 1 GB over 100 MB/s links.
  EXPECT_DOUBLE_EQ(transfer_seconds(1e9, 1e8, 1, 1.0, 5), 10);   // one donor, its whole link
  EXPECT_DOUBLE_EQ(transfer_seconds(1e9, 1e8, 1, 0.25, 5), 40);  // one donor sparing a quarter
  EXPECT_DOUBLE_EQ(transfer_seconds(1e9, 1e8, 4, 0.25, 5), 10);  // four of them: the link
  EXPECT_DOUBLE_EQ(transfer_seconds(1e9, 1e8, 8, 0.25, 5), 10);  // no faster than the link
  EXPECT_DOUBLE_EQ(transfer_seconds(1e9, 1e8, 4, 0.25, 2), 20);  // only two holders
  EXPECT_DOUBLE_EQ(transfer_seconds(1e9, 1e8, 4, 0.25, 0), 40);  // none: one source
  EXPECT_EQ(transfer_seconds(1e9, 0, 4, 0.25, 5), 0);            // unlimited links
}

}  // namespace
}  // namespace swarmrt::policy
