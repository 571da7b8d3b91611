#include "policy/chunk_schedule.hpp"

#include <gtest/gtest.h>

#include <set>

using swarmrt::policy::ChunkSchedule;

TEST(ChunkSchedule, EachDonorHasAtMostItsWindowAskedAndEveryChunkIsAskedOnce) {
  ChunkSchedule s(10, 3, 2);
  std::set<uint32_t> asked;
  for (size_t d = 0; d < 3; ++d) {
    while (auto c = s.next(d)) EXPECT_TRUE(asked.insert(*c).second) << "chunk " << *c;
    EXPECT_EQ(s.asked_of(d), 2u);
  }
  EXPECT_EQ(asked.size(), 6u);
  // A chunk arriving frees one place in its donor's window.
  ASSERT_TRUE(s.arrived(0, 0));
  auto c = s.next(0);
  ASSERT_TRUE(c.has_value());
  EXPECT_EQ(*c, 6u);
  EXPECT_FALSE(s.next(0).has_value());
}

TEST(ChunkSchedule, ArrivalsThatWereNotAskedOfTheirSenderOrAreInAlreadyAreRefused) {
  ChunkSchedule s(4, 2, 4);
  const auto a = *s.next(0);
  EXPECT_FALSE(s.arrived(1, a));  // asked of donor 0, not 1
  EXPECT_FALSE(s.arrived(0, 99));
  EXPECT_TRUE(s.arrived(0, a));
  EXPECT_FALSE(s.arrived(0, a));  // twice
  EXPECT_EQ(s.done_count(), 1u);
}

TEST(ChunkSchedule, ADroppedDonorsUnfinishedChunksGoToTheOthersFirstAndNothingArrivedTwice) {
  ChunkSchedule s(8, 2, 3);
  std::vector<uint32_t> of0, of1;
  while (auto c = s.next(0)) of0.push_back(*c);
  while (auto c = s.next(1)) of1.push_back(*c);
  ASSERT_EQ(of0, (std::vector<uint32_t>{0, 1, 2}));
  ASSERT_TRUE(s.arrived(0, 0));
  EXPECT_EQ(s.drop(0), 2u);  // chunks 1 and 2 were asked and not in
  EXPECT_EQ(s.drop(0), 0u);
  EXPECT_FALSE(s.next(0).has_value());
  EXPECT_FALSE(s.arrived(0, 1));  // a late chunk of a dropped donor is not taken
  EXPECT_EQ(s.live_donors(), 1u);
  for (auto c : of1) ASSERT_TRUE(s.arrived(1, c));
  std::vector<uint32_t> next;
  while (auto c = s.next(1)) next.push_back(*c);
  EXPECT_EQ(next, (std::vector<uint32_t>{1, 2, 6}));  // given back first, in order
  EXPECT_EQ(s.asked_again(), 2u);
  for (auto c : next) ASSERT_TRUE(s.arrived(1, c));
  while (auto c = s.next(1)) ASSERT_TRUE(s.arrived(1, *c));
  EXPECT_TRUE(s.complete());
  EXPECT_EQ(s.delivered_by(0), 1u);
  EXPECT_EQ(s.delivered_by(1), 7u);
}

TEST(ChunkSchedule, FastDonorsTakeMoreChunks) {
  // Donor 0 answers at once, donor 1 never: every chunk but donor 1's window goes to donor 0.
  ChunkSchedule s(20, 2, 2);
  while (s.next(1)) {
  }
  while (auto c = s.next(0)) ASSERT_TRUE(s.arrived(0, *c));
  EXPECT_EQ(s.delivered_by(0), 18u);
  EXPECT_FALSE(s.complete());
  s.drop(1);
  while (auto c = s.next(0)) ASSERT_TRUE(s.arrived(0, *c));
  EXPECT_TRUE(s.complete());
}
