// A run id's text form, as the coordinator prints it and nodes take it on --run-id.
#include "messages/run_id.hpp"

#include <gtest/gtest.h>

namespace swarmrt::messages {
namespace {

TEST(RunId, RoundTripsThroughItsText) {
  for (uint64_t id : {1ull, 0xbeebd2c828184e66ull, ~0ull}) {
    EXPECT_EQ(run_id_text(id).size(), 16u);
    EXPECT_EQ(parse_run_id(run_id_text(id)), id);
  }
  EXPECT_EQ(run_id_text(0x2a), "000000000000002a");
  EXPECT_EQ(parse_run_id("2A"), 0x2au);
}

TEST(RunId, RefusesWhatIsNotOne) {
  for (const char* bad :
       {"", "0", "0000000000000000", "xyz", "12 34", "-1", "0x12", "10000000000000000"})
    EXPECT_FALSE(parse_run_id(bad).has_value()) << bad;
}

}  // namespace
}  // namespace swarmrt::messages
