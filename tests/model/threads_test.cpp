// set_compute_threads: where the threads of `train.threads` go.
#include <ATen/Parallel.h>
#include <dlfcn.h>
#include <gtest/gtest.h>

#include "model/threads.hpp"

namespace swarmrt::model {
namespace {

TEST(Threads, TheGemmsGetTheThreadsAndTorchsPoolKeepsOneUnderOpenBlas) {
  using GetThreads = int (*)();
  auto openblas_threads =
      reinterpret_cast<GetThreads>(dlsym(RTLD_DEFAULT, "openblas_get_num_threads"));
  set_compute_threads(2);
  if (openblas_threads) {  // the scripts install OpenBLAS, so this is the branch CI takes
    EXPECT_EQ(openblas_threads(), 2);
    // Two pools of spinning workers on the same cores ran at a third of one core's speed.
    EXPECT_EQ(at::get_num_threads(), 1);
  } else {  // MKL or the reference BLAS: they run inside torch's own pool
    EXPECT_EQ(at::get_num_threads(), 2);
  }
  set_compute_threads(1);
  EXPECT_EQ(at::get_num_threads(), 1);
  if (openblas_threads) {
    EXPECT_EQ(openblas_threads(), 1);
  }
}

}  // namespace
}  // namespace swarmrt::model
