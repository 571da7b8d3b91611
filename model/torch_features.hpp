// What this LibTorch offers beyond Debian's 1.13, decided at compile time in this one place.
// CPU machines build against LibTorch 1.13 and GPU machines against their PyTorch's (2.x): code
// that needs a newer LibTorch tests these, and keeps 1.13's path beside it.
#pragma once

#include <torch/version.h>

// True when the LibTorch built against is at least major.minor.
#define SWARMRT_TORCH_AT_LEAST(major, minor) \
  (TORCH_VERSION_MAJOR > (major) ||          \
   (TORCH_VERSION_MAJOR == (major) && TORCH_VERSION_MINOR >= (minor)))

// at::scaled_dot_product_attention: flash and memory-efficient kernels on CUDA, a fused kernel
// on the CPU (2.0 on).
#define SWARMRT_HAS_SDPA SWARMRT_TORCH_AT_LEAST(2, 0)
// at::_fused_adamw_: one kernel for a whole list of parameters, on CUDA from 2.0, on the CPU
// from 2.4.
#define SWARMRT_HAS_FUSED_ADAMW_CUDA SWARMRT_TORCH_AT_LEAST(2, 0)
#define SWARMRT_HAS_FUSED_ADAMW_CPU SWARMRT_TORCH_AT_LEAST(2, 4)
// Autocast calls that take the device type (2.4 replaced the per-backend ones, and warns on
// every call of the old).
#define SWARMRT_HAS_DEVICE_AUTOCAST SWARMRT_TORCH_AT_LEAST(2, 4)
