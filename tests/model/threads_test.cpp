// set_compute_threads: where the threads of `train.threads` go; and which OpenBLAS kernels the
// GEMMs run.
#include <ATen/Parallel.h>
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <strings.h>

#include <cstdlib>

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

TEST(BlasKernels, TheWidestKernelsTheCpuSupports) {
  CpuFeatures f;
  EXPECT_EQ(blas_kernels_for(f), "");  // SSE only: OpenBLAS's own choice stands
  f.avx2 = true;
  EXPECT_EQ(blas_kernels_for(f), "");  // AVX2 without FMA
  f.fma = true;
  EXPECT_EQ(blas_kernels_for(f), "Haswell");
  f.avx512f = f.avx512bw = f.avx512vl = true;
  EXPECT_EQ(blas_kernels_for(f), "Haswell");  // no AVX-512 DQ: SkylakeX's kernels need it
  f.avx512dq = true;
  EXPECT_EQ(blas_kernels_for(f), "SkylakeX");
}

// Debian's OpenBLAS falls back to Prescott's SSE3 kernels on CPU models it does not know (the
// suite's VM: 2.5x the CPU time for the tiny model's training); this process must not run them
// where the CPU has AVX2 and FMA, unless OPENBLAS_CORETYPE asked for them.
TEST(BlasKernels, GemmsDoNotRunTheSse3FallbackOnACpuWithAvx2) {
  const std::string kernels = blas_kernels();
  if (kernels.empty()) GTEST_SKIP() << "torch does not use OpenBLAS here: MKL or another BLAS";
  if (blas_kernels_given()) {
    const char* asked = std::getenv("OPENBLAS_CORETYPE");
    ASSERT_NE(asked, nullptr);
    EXPECT_EQ(strcasecmp(kernels.c_str(), asked), 0) << kernels << " against " << asked;
    return;
  }
  const std::string wanted = blas_kernels_for(this_cpu());
  if (wanted.empty()) GTEST_SKIP() << "this CPU has no AVX2 with FMA: Prescott's kernels fit it";
  EXPECT_NE(strcasecmp(kernels.c_str(), "Prescott"), 0) << "OpenBLAS runs " << kernels;
  // Where this process replaced the fallback it set OPENBLAS_CORETYPE for the processes it
  // starts, naming the kernels it runs.
  if (const char* set = std::getenv("OPENBLAS_CORETYPE")) {
    EXPECT_EQ(strcasecmp(kernels.c_str(), set), 0) << kernels << " against " << set;
  }
}

}  // namespace
}  // namespace swarmrt::model
