#include "model/threads.hpp"

#include <ATen/Parallel.h>
#include <dlfcn.h>
#include <strings.h>

#include <cstdlib>

namespace swarmrt::model {

void set_compute_threads(int n) {
  // Looked up at run time: the symbol exists only when torch was linked against OpenBLAS.
  using SetThreads = void (*)(int);
  auto openblas_set_num_threads =
      reinterpret_cast<SetThreads>(dlsym(RTLD_DEFAULT, "openblas_set_num_threads"));
  if (!openblas_set_num_threads) {
    at::set_num_threads(n);  // MKL and the reference BLAS run inside torch's own pool
    return;
  }
  // With OpenBLAS the n threads go to the GEMMs and torch's intra-op pool keeps one: its
  // OpenMP workers spin between parallel regions on the cores OpenBLAS's own threads need.
  // Tiny model, 2 cores, tokens/s: torch 1 + BLAS 2 = 20.9k; torch 2 + BLAS 1 = 16.0k;
  // torch 2 + BLAS 2 = 6.4k (slower than one core, 14.3k). bench/train_throughput.sh.
  at::set_num_threads(1);
  openblas_set_num_threads(n);
}

CpuFeatures this_cpu() {
  __builtin_cpu_init();
  CpuFeatures f;
  f.avx2 = __builtin_cpu_supports("avx2");
  f.fma = __builtin_cpu_supports("fma");
  f.avx512f = __builtin_cpu_supports("avx512f");
  f.avx512bw = __builtin_cpu_supports("avx512bw");
  f.avx512vl = __builtin_cpu_supports("avx512vl");
  f.avx512dq = __builtin_cpu_supports("avx512dq");
  return f;
}

std::string blas_kernels_for(const CpuFeatures& f) {
  // OpenBLAS's SkylakeX kernels need AVX-512 F, BW, VL and DQ, Haswell's AVX2 and FMA. Not
  // Cooperlake's, on a CPU with AVX-512 bf16 too: 0.3.21 does not take that name from
  // OPENBLAS_CORETYPE ("Core not found"), and the bf16 GEMMs do not run in OpenBLAS here
  // (training the tiny model in bf16 took the same time under either).
  if (f.avx512f && f.avx512bw && f.avx512vl && f.avx512dq) return "SkylakeX";
  if (f.avx2 && f.fma) return "Haswell";
  return "";
}

std::string blas_kernels() {
  using CoreName = char* (*)();
  auto core = reinterpret_cast<CoreName>(dlsym(RTLD_DEFAULT, "openblas_get_corename"));
  return core ? std::string(core()) : std::string();
}

namespace {

const bool kernels_given = std::getenv("OPENBLAS_CORETYPE") != nullptr;

// Runs as the executable is initialized: every library's constructors, OpenBLAS's choice of
// kernels included, have run, and no thread of this process computes yet, so swapping
// OpenBLAS's table of kernels cannot pull it from under a GEMM. A later swap (in
// set_compute_threads, say) could: workers already compute when a second one starts.
bool replace_fallback_kernels() {
  if (kernels_given || strcasecmp(blas_kernels().c_str(), "Prescott") != 0) return false;
  const std::string wanted = blas_kernels_for(this_cpu());
  using Hook = void (*)();
  auto quit = reinterpret_cast<Hook>(dlsym(RTLD_DEFAULT, "gotoblas_dynamic_quit"));
  auto init = reinterpret_cast<Hook>(dlsym(RTLD_DEFAULT, "gotoblas_dynamic_init"));
  if (wanted.empty() || !quit || !init) return false;  // not a DYNAMIC_ARCH OpenBLAS
  // OpenBLAS's dynamic init reads OPENBLAS_CORETYPE; set, it also reaches child processes.
  setenv("OPENBLAS_CORETYPE", wanted.c_str(), 0);
  quit();
  init();
  return true;
}

[[maybe_unused]] const bool kernels_replaced = replace_fallback_kernels();

}  // namespace

bool blas_kernels_given() {
  return kernels_given;
}

}  // namespace swarmrt::model
