// How torch's CPU work runs in this process: its threads and OpenBLAS's kernels.
#pragma once

#include <string>

namespace swarmrt::model {

// Gives `n` threads to the GEMMs: with OpenBLAS (whose pthread build keeps a pool that
// at::set_num_threads does not reach) to OpenBLAS, torch's intra-op pool keeping one; without
// it to torch's pool.
void set_compute_threads(int n);

// What a CPU offers that OpenBLAS's kernels use.
struct CpuFeatures {
  bool avx2 = false, fma = false;
  bool avx512f = false, avx512bw = false, avx512vl = false, avx512dq = false;
};
CpuFeatures this_cpu();

// The OpenBLAS kernels (an OPENBLAS_CORETYPE name) to ask for on a CPU with `f`, or "" where
// OpenBLAS's own oldest fallback is all it supports.
std::string blas_kernels_for(const CpuFeatures& f);

// OpenBLAS's name for the kernels this process's GEMMs run ("" without OpenBLAS). OpenBLAS
// 0.3.21 (Debian bookworm's) picks its kernels by the CPU's model number, and on a model it
// does not know (a Xeon of family 6, model 207, for one) falls back to Prescott's SSE3
// kernels: the tiny model's training took 2.5x the CPU time there. When this process was
// loaded without OPENBLAS_CORETYPE and OpenBLAS fell back so, the kernels of what the CPU
// offers (blas_kernels_for) replace them before main runs, and OPENBLAS_CORETYPE is set for the
// processes this one starts.
std::string blas_kernels();

// Whether OPENBLAS_CORETYPE was set when this process was loaded (then its choice stands).
bool blas_kernels_given();

}  // namespace swarmrt::model
