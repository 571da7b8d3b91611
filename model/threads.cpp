#include "model/threads.hpp"

#include <ATen/Parallel.h>
#include <dlfcn.h>

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

}  // namespace swarmrt::model
