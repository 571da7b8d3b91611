// The NCCL transport is built wherever CUDA and NCCL are found, GPU or not. Where no GPU is
// visible a communicator must fail with a message naming CUDA, not crash; where one is, a
// one-rank communicator must come up. Either way the real NCCL and CUDA libraries are called.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>
#include <nccl.h>

#include "transport/comm.hpp"
#include "transport/nccl_transport.hpp"

using namespace swarmrt;

TEST(Nccl, UniqueIdTravelsAsBytes) {
  std::vector<uint8_t> id;
  try {
    id = transport::nccl_unique_id();
  } catch (const transport::NcclError& e) {
    // NCCL may refuse even this without a driver; the reason must say so.
    EXPECT_NE(std::string(e.what()).find("ncclGetUniqueId"), std::string::npos) << e.what();
    return;
  }
  EXPECT_EQ(id.size(), sizeof(ncclUniqueId));
}

TEST(Nccl, CommunicatorNeedsADeviceAndSaysSo) {
  int devices = 0;
  const bool have_gpu = cudaGetDeviceCount(&devices) == cudaSuccess && devices > 0;
  const std::vector<uint8_t> bogus(sizeof(ncclUniqueId), 0);
  if (!have_gpu) {
    try {
      transport::NcclComm comm(bogus, 1, 0, 0);
      FAIL() << "a communicator came up without a GPU";
    } catch (const transport::NcclError& e) {
      EXPECT_NE(std::string(e.what()).find("CUDA"), std::string::npos) << e.what();
    }
    return;
  }
  transport::NcclComm comm(transport::nccl_unique_id(), 1, 0, 0);
  EXPECT_EQ(comm.rank(), 0);
}

TEST(Nccl, MalformedUniqueIdIsRefused) {
  EXPECT_THROW(transport::NcclComm(std::vector<uint8_t>(3, 0), 2, 0, 0), transport::NcclError);
}
