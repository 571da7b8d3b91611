// The NCCL transport is built wherever CUDA and NCCL are found, GPU or not. Where no GPU is
// visible a communicator must fail with a message naming CUDA, not crash; where one is, a
// one-rank communicator must come up and all-reduce, and a communicator whose other rank
// never joins must give up within its timeout and abort. Either way the real NCCL and CUDA
// libraries are called.
#include <ATen/ATen.h>
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>
#include <nccl.h>

#include "transport/comm.hpp"
#include "transport/nccl_transport.hpp"

using namespace swarmrt;

namespace {
bool have_gpu() {
  int devices = 0;
  return cudaGetDeviceCount(&devices) == cudaSuccess && devices > 0;
}
bool says(const std::exception& e, const char* what) {
  return std::string(e.what()).find(what) != std::string::npos;
}
}  // namespace

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

TEST(Nccl, OneRankAllReduceKeepsTheTensor) {
  transport::CommOptions options;
  options.device = 0;
  if (!have_gpu()) {
    try {
      transport::create_comm("nccl", 1, options);
      FAIL() << "a communicator came up without a GPU";
    } catch (const transport::CommError& e) {
      EXPECT_TRUE(says(e, "CUDA") || says(e, "ncclGetUniqueId")) << e.what();
    }
    return;
  }
  auto [comm, id] = transport::create_comm("nccl", 1, options);
  EXPECT_STREQ(comm->backend(), "nccl");
  EXPECT_EQ(id.size(), sizeof(ncclUniqueId));
  if (!at::hasCUDA()) return;  // a CPU LibTorch on a GPU machine: no CUDA tensors to reduce
  auto t = at::arange(6, at::TensorOptions().dtype(at::kFloat).device(at::kCUDA));
  const auto expected = t.cpu();
  comm->all_reduce_sum(t);
  EXPECT_TRUE(at::equal(t.cpu(), expected));
}

TEST(Nccl, ARankThatNeverJoinsEndsTheWaitAndAbortsTheCommunicator) {
  if (!have_gpu()) {
    // Without a GPU the communicator is refused before any wait, naming CUDA.
    const std::vector<uint8_t> bogus(sizeof(ncclUniqueId), 0);
    try {
      transport::NcclComm comm(bogus, 2, 0, 0, 1.0);
      FAIL() << "a communicator came up without a GPU";
    } catch (const transport::NcclError& e) {
      EXPECT_TRUE(says(e, "CUDA")) << e.what();
    }
    return;
  }
  // Rank 1 of 2 never joins: the first all-reduce waits one second, then aborts.
  // The wait ends before the tensor is touched, so a CPU LibTorch's tensor does as well.
  transport::NcclComm comm(transport::nccl_unique_id(), 2, 0, 0, 1.0);
  auto t = at::ones(
      {4}, at::TensorOptions().dtype(at::kFloat).device(at::hasCUDA() ? at::kCUDA : at::kCPU));
  try {
    comm.all_reduce_sum(t);
    FAIL() << "an all-reduce finished with a rank missing";
  } catch (const transport::NcclError& e) {
    EXPECT_TRUE(says(e, "joining")) << e.what();
    EXPECT_TRUE(says(e, "aborted")) << e.what();
  }
  try {
    comm.send(t, 1);
    FAIL() << "an aborted communicator took a send";
  } catch (const transport::NcclError& e) {
    EXPECT_TRUE(says(e, "aborted before")) << e.what();
  }
}
