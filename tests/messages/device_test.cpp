// The device rule the node and the directory share.
#include "messages/device.hpp"

#include <gtest/gtest.h>

namespace swarmrt::messages {
namespace {

TEST(DeviceName, TheNamesANodeMayJoinWith) {
  EXPECT_EQ(device_name_problem("cpu"), "");
  // One GPU per worker in turn: what launch --from-env asks for on a task with GPUs. The
  // directory refused it while the node accepted it (seen on a GPU machine).
  EXPECT_EQ(device_name_problem("cuda"), "");
  EXPECT_EQ(device_name_problem("cuda:0"), "");
  EXPECT_EQ(device_name_problem("cuda:15"), "");
}

TEST(DeviceName, RefusesOthersNamingThem) {
  for (const char* bad :
       {"", "gpu", "tpu:0", "cuda:", "cuda:x", "cuda:-1", "cuda:1:2", "CUDA", "cuda:99999"}) {
    const auto why = device_name_problem(bad);
    EXPECT_NE(why.find(std::string("unknown device '") + bad + "'"), std::string::npos)
        << bad << ": " << why;
  }
}

}  // namespace
}  // namespace swarmrt::messages
