#include "model/threads.hpp"

#include <ATen/Parallel.h>
#include <dlfcn.h>

namespace swarmrt::model {

void set_compute_threads(int n) {
  at::set_num_threads(n);
  // Looked up at run time: the symbol exists only when torch was linked against OpenBLAS.
  using SetThreads = void (*)(int);
  if (auto fn = reinterpret_cast<SetThreads>(dlsym(RTLD_DEFAULT, "openblas_set_num_threads")))
    fn(n);
}

}  // namespace swarmrt::model
