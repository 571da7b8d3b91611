// swarm.compression = auto's decisions alone, from injected measurements: the ladder, a link's
// rate (median, forgetting), and the chooser (down at once, up with a margin after a dwell,
// backing off a move up that does not last).
#include <gtest/gtest.h>

#include "policy/hop_choice.hpp"

namespace swarmrt::policy {
using config::HopEncoding;

TEST(HopLadder, LeastCompressedFirstDownToTheFloor) {
  using V = std::vector<HopEncoding>;
  EXPECT_EQ(hop_ladder(HopEncoding::int8, false),
            (V{HopEncoding::none, HopEncoding::bf16, HopEncoding::int8}));
  EXPECT_EQ(hop_ladder(HopEncoding::int3, false),
            (V{HopEncoding::none, HopEncoding::bf16, HopEncoding::int8, HopEncoding::int4,
               HopEncoding::int3}));
  EXPECT_EQ(hop_ladder(HopEncoding::int4_2, false),
            (V{HopEncoding::none, HopEncoding::bf16, HopEncoding::int8, HopEncoding::int4,
               HopEncoding::int3, HopEncoding::int4_2}));
  EXPECT_EQ(hop_ladder(HopEncoding::int5_3, false),
            (V{HopEncoding::none, HopEncoding::bf16, HopEncoding::int8, HopEncoding::int5_3}));
  // In bf16, bf16 hops are none's bytes: not a rung.
  EXPECT_EQ(hop_ladder(HopEncoding::int4, true),
            (V{HopEncoding::none, HopEncoding::int8, HopEncoding::int4}));
  EXPECT_EQ(hop_ladder(HopEncoding::none, false), (V{HopEncoding::none}));
}

// Sparse DiLoCo rounds: 8, 4, 2, 1 x the floor, densest first, none above every value.
TEST(DensityLadder, DensestFirstDownToTheFloor) {
  using V = std::vector<double>;
  EXPECT_EQ(density_ladder(0.01), (V{0.08, 0.04, 0.02, 0.01}));
  EXPECT_EQ(density_ladder(0.25), (V{1.0, 0.5, 0.25}));
  EXPECT_EQ(density_ladder(0.6), (V{0.6}));
  EXPECT_EQ(density_ladder(1), (V{1}));
}

TEST(DensityLadder, AllGatherCapTakesTheSparserOfTheOwnChoiceAndTheRoundsLeast) {
  const std::vector<double> ladder{0.16, 0.08, 0.04, 0.02};
  EXPECT_EQ(capped_rung(ladder, 0, 0), 0u);                   // no cap yet
  EXPECT_EQ(capped_rung(ladder, 0, 0.04), 2u);                // a slower peer wants 4%
  EXPECT_EQ(capped_rung(ladder, 0, 0.05), 2u);                // between rungs: the denser that fits
  EXPECT_EQ(capped_rung(ladder, 3, 0.16), 3u);                // its own link is the slow one
  EXPECT_EQ(capped_rung(ladder, 1, 0.08), 1u);                // equal
  EXPECT_EQ(capped_rung(ladder, 0, 0.001), 3u);               // below the floor: the floor
  EXPECT_EQ(capped_rung(ladder, 0, 0.16 * (1 - 1e-12)), 0u);  // a rung's own value, rounded
}

// A chooser of rounds' densities moves up after kRoundDwell rounds, not a hop chooser's 16.
TEST(HopChooser, RoundsDwellTwoRoundsBeforeMovingUp) {
  HopChooser c(HopChooser::kRoundDwell);
  const std::vector<double> fast{0.01, 0.005, 0.002, 0.001};
  EXPECT_EQ(c.choose(fast, 1.0), 3u);  // the floor first
  EXPECT_EQ(c.choose(fast, 1.0), 2u);  // two rounds on the floor, room to spare: up one
  EXPECT_EQ(c.choose(fast, 1.0), 2u);
  EXPECT_EQ(c.choose(fast, 1.0), 1u);
  EXPECT_EQ(c.choose(fast, 1.0), 1u);
  EXPECT_EQ(c.choose(fast, 1.0), 0u);
  // The link slows: the densest that hides, at once.
  EXPECT_EQ(c.choose({4.0, 2.0, 0.8, 0.4}, 1.0), 2u);
  HopChooser hops;
  for (int i = 1; i < HopChooser::kFirstDwell; ++i) ASSERT_EQ(hops.choose(fast, 1.0), 3u);
}

TEST(LinkRate, MedianOfRecentHopsForgettingOldOnes) {
  LinkRate link;
  EXPECT_EQ(link.bytes_per_s(0), 0);
  EXPECT_LT(link.seconds_for(1 << 20, 0), 0);
  link.add(1000, 0.001, 0);  // too small to say anything of bandwidth
  link.add(1 << 20, 0, 0);   // no time
  EXPECT_EQ(link.measured(), 0u);
  // 1 MiB hops at 10 MiB/s, one outlier: the median ignores it.
  for (int i = 0; i < 4; ++i) link.add(1 << 20, 0.1, i);
  link.add(1 << 20, 0.001, 4);
  EXPECT_NEAR(link.bytes_per_s(4), 10.0 * (1 << 20), 1);
  EXPECT_NEAR(link.seconds_for(1 << 20, 4), 0.1, 1e-12);
  EXPECT_NEAR(link.seconds_for(1 << 19, 4), 0.05, 1e-9);  // no hop of its size: by the rate
  // The link slows to 1 MiB/s: after enough hops the median follows.
  for (int i = 0; i < 16; ++i) link.add(1 << 20, 1.0, 5 + i);
  EXPECT_NEAR(link.bytes_per_s(21), 1.0 * (1 << 20), 1);
  EXPECT_EQ(link.measured(), LinkRate::kKeep);
  // Nothing measured for longer than kMaxAgeS: unknown again.
  EXPECT_EQ(link.bytes_per_s(21 + LinkRate::kMaxAgeS), 0);
  EXPECT_LT(link.seconds_for(1 << 20, 21 + LinkRate::kMaxAgeS), 0);
}

// A token-bucket shaper (tc tbf: 128 kB of burst at 50 Mbit/s) lets a 66 kB hop through at line
// rate and holds a 262 kB one back: each size is predicted by hops of its own size, not by a
// rate the other size measured.
TEST(LinkRate, EachSizeByHopsOfItsSize) {
  LinkRate link;
  for (int i = 0; i < 4; ++i) {
    link.add(66'000, 0.0005, i);  // inside the burst
    link.add(262'000, 0.021, i);  // 134 kB past it at 6.25 MB/s
  }
  EXPECT_NEAR(link.seconds_for(66'000, 4), 0.0005, 1e-12);
  EXPECT_NEAR(link.seconds_for(262'000, 4), 0.021, 1e-12);
  EXPECT_NEAR(link.seconds_for(250'000, 4), 0.021, 1e-12);  // within 15%: alike
}

// A rung that fell behind (262 kB hops queued past the shaper's burst) stays known while the
// rung below it flows: more than kKeep of those hops do not push it out, only its age does.
TEST(LinkRate, ARungThatFellBehindIsRememberedWhileAnotherFlows) {
  LinkRate link;
  for (int i = 0; i < 8; ++i) link.add(262'000, 0.040, 0.01 * i);
  for (int i = 0; i < 100; ++i) link.add(66'000, 0.0005, 1 + 0.01 * i);
  EXPECT_NEAR(link.seconds_for(262'000, 2), 0.040, 1e-12);
  EXPECT_NEAR(link.seconds_for(66'000, 2), 0.0005, 1e-12);
  EXPECT_EQ(link.measured(), 8 + LinkRate::kKeep);
  EXPECT_NEAR(link.bytes_per_s(2), 66'000 / 0.0005, 1e-3);  // the last kKeep
  // Once its hops are older than kMaxAgeS it is predicted by the rate again.
  link.add(66'000, 0.0005, 0.5 + LinkRate::kMaxAgeS);
  EXPECT_NEAR(link.seconds_for(262'000, 0.5 + LinkRate::kMaxAgeS), 262'000 / (66'000 / 0.0005),
              1e-9);
}

// A hop of 4 MB in none, 1 MB in int8, 0.5 MB in int4; 0.1 s of compute per micro-batch.
const std::vector<uint64_t> kBytes = {4'000'000, 1'000'000, 500'000};
// Each rung's seconds on a link of `rate` bytes/s.
std::vector<double> at_rate(double rate) {
  std::vector<double> s;
  for (auto b : kBytes) s.push_back(static_cast<double>(b) / rate);
  return s;
}

// A link starts at the floor: until its hops are measured and the compute is known, nothing
// says a less compressed rung would hide.
TEST(HopChooser, ALinkStartsAtTheFloorAndStaysWhileTimesOrComputeAreUnknown) {
  HopChooser c;
  EXPECT_EQ(c.choose({-1, -1, -1}, 0.1), 2u);
  EXPECT_EQ(c.choose(at_rate(1e6), 0), 2u);
  for (int i = 0; i < 4 * HopChooser::kFirstDwell; ++i) ASSERT_EQ(c.choose({-1, -1, -1}, 0.1), 2u);
  EXPECT_EQ(c.moves(), 0);
  EXPECT_EQ(c.hops(), 2 + 4 * HopChooser::kFirstDwell);
}

// On a fast link it climbs a rung a dwell to the least compressed.
TEST(HopChooser, OnAFastLinkItClimbsFromTheFloorARungADwell) {
  HopChooser c;
  int hops = 0;
  while (c.choose(at_rate(100e6), 0.1) != 0) ++hops;
  EXPECT_EQ(hops + 1, 2 * HopChooser::kFirstDwell);
  EXPECT_EQ(c.moves(), 2);
}

TEST(HopChooser, ALinkThatFallsBehindMovesDownAtOnceToTheRungThatHides) {
  HopChooser c;
  while (c.choose(at_rate(100e6), 0.1) != 0) {
  }                                             // 0.04 s: none hides
  EXPECT_EQ(c.choose(at_rate(12e6), 0.1), 1u);  // none 0.33 s, int8 0.083 s
  EXPECT_EQ(c.choose(at_rate(1e6), 0.1), 2u);   // nothing hides: the floor
  EXPECT_EQ(c.moves(), 4);                      // two up, two down
}

TEST(HopChooser, MovesUpOneRungWithAMarginAfterItsDwell) {
  HopChooser c;
  ASSERT_EQ(c.choose(at_rate(1e6), 0.1), 2u);  // the floor's first hop
  // The link is fast (int8 0.01 s, none 0.04 s): up one rung after the dwell, not before.
  for (int i = 2; i < HopChooser::kFirstDwell; ++i) ASSERT_EQ(c.choose(at_rate(100e6), 0.1), 2u);
  EXPECT_EQ(c.choose(at_rate(100e6), 0.1), 1u);
  for (int i = 1; i < HopChooser::kFirstDwell; ++i) ASSERT_EQ(c.choose(at_rate(100e6), 0.1), 1u);
  EXPECT_EQ(c.choose(at_rate(100e6), 0.1), 0u);
  // none would hide (0.08 s of 0.1) but without the margin: no move up, however long.
  HopChooser d;
  while (d.choose(at_rate(50e6), 0.1) == 2) {
  }  // int8 0.02 s: up from the floor
  for (int i = 0; i < 4 * HopChooser::kFirstDwell; ++i) ASSERT_EQ(d.choose(at_rate(50e6), 0.1), 1u);
}

TEST(HopChooser, AMoveUpThatDoesNotLastDoublesTheWait) {
  HopChooser c;
  while (c.choose(at_rate(50e6), 0.1) == 2) {
  }  // to int8; none (0.08 s) lacks the margin
  // The link looks fast, so it moves up ...
  int hops = 0;
  while (c.choose(at_rate(100e6), 0.1) != 0) ++hops;
  EXPECT_EQ(hops + 1, HopChooser::kFirstDwell);
  // ... and none's hops show the real rate at once: back down, and the next try waits twice
  // as long.
  EXPECT_EQ(c.choose(at_rate(12e6), 0.1), 1u);
  hops = 0;
  while (c.choose(at_rate(100e6), 0.1) != 0) ++hops;
  EXPECT_EQ(hops + 1, 2 * HopChooser::kFirstDwell);
  // A link that keeps up keeps its rung, and once the move has lasted twice its wait, the next
  // move up waits the first dwell again.
  for (int i = 0; i < 4 * HopChooser::kFirstDwell; ++i)
    ASSERT_EQ(c.choose(at_rate(100e6), 0.1), 0u);
  ASSERT_EQ(c.choose(at_rate(12e6), 0.1), 1u);
  hops = 0;
  while (c.choose(at_rate(100e6), 0.1) != 0) ++hops;
  EXPECT_EQ(hops + 1, HopChooser::kFirstDwell);
}

// Behind a shaper's burst, by each rung's own measured hops: none (21 ms) does not hide under
// 16 ms of compute, bf16 (0.5 ms) does: bf16, and no flapping.
TEST(HopChooser, ByEachRungsOwnTimesItSettles) {
  HopChooser c;
  const std::vector<double> seconds = {0.021, 0.0005, 0.0003};
  while (c.choose(seconds, 0.016) == 2) {
  }
  for (int i = 0; i < 8 * HopChooser::kMaxDwell; ++i) ASSERT_EQ(c.choose(seconds, 0.016), 1u);
  EXPECT_EQ(c.moves(), 1);
}

}  // namespace swarmrt::policy
