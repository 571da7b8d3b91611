// Mixed precision (train.precision): forward and backward compute in bf16 or fp16 under
// autocast while the weights, AdamW's moments and DiLoCo's state stay float32, as in
// torch.autocast + GradScaler. Every mode uses these pieces, so a pipeline's stages compute
// exactly what the single-process trainer computes.
//
// The residual stream runs in the compute dtype from the embedding on (to_compute_dtype):
// what crosses a stage boundary is then already bf16/fp16, half the hop bytes of fp32, and a
// pipeline performs the same operations on the same dtypes as one process.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>
#include <cstdint>
#include <string>
#include <vector>

#include "config/config.hpp"

namespace swarmrt::model {

// float32, bfloat16 or float16.
at::ScalarType compute_dtype(config::Precision p);

// Autocast to `p`'s dtype on `device`'s kind (CPU or CUDA) for the guard's lifetime; fp32: no
// effect. Autocast state is per thread: a guard covers one forward inside one actor handler.
// Backward needs none: the casts autocast inserted are recorded in the graph.
class Autocast {
 public:
  Autocast(config::Precision p, c10::Device device);
  ~Autocast();
  Autocast(const Autocast&) = delete;
  Autocast& operator=(const Autocast&) = delete;

 private:
  bool on_ = false;
  bool cuda_ = false;
  bool was_enabled_ = false;
  at::ScalarType was_dtype_ = at::kFloat;
};

// `x` in the dtype autocast computes in on its device, or `x` itself when autocast is off
// there (fp32). The models apply it to the embedding output (see above).
at::Tensor to_compute_dtype(const at::Tensor& x);

// fp16's dynamic loss scaler (torch.cuda.amp.GradScaler's policy): the loss is multiplied by
// `scale` before backward so small gradients survive fp16; a step whose unscaled gradient is
// not finite is skipped and the scale halves; after `growth_interval` good steps in a row it
// doubles. bf16 and fp32 need none: scale stays 1.
class LossScaler {
 public:
  static constexpr double kInitScale = 65536.0;  // 2^16, GradScaler's default
  static constexpr double kGrowth = 2.0, kBackoff = 0.5;
  static constexpr int64_t kGrowthInterval = 2000;

  explicit LossScaler(config::Precision p = config::Precision::fp32)
      : scale_(p == config::Precision::fp16 ? kInitScale : 1.0) {}
  double scale() const { return scale_; }
  // After a step's gradient was checked: false when it overflowed (the step is skipped).
  bool update(bool finite);
  int64_t skipped() const { return skipped_; }

 private:
  double scale_;
  int64_t good_ = 0;
  int64_t skipped_ = 0;
};

// Divides every parameter's gradient by `scale` (when it is not 1); true when all of them are
// finite afterwards.
bool unscale_grads(const std::vector<at::Tensor>& params, double scale);

// An fp16 gradient overflow as chaos.overflow_at_step injects it: the seed of backward made
// infinite, so every gradient it reaches is too.
at::Tensor overflowed(const at::Tensor& loss);

// Empty when `p` can run on `device`; otherwise why not, naming the setting. Checked where a
// run or a node starts, before anything trains.
std::string check_precision(config::Precision p, const c10::Device& device);

// Why the CPU computes bf16 slowly, or empty when it has AVX-512 BF16 or AMX (read from
// /proc/cpuinfo): without them a bf16 GEMM converts every element and runs far below fp32.
std::string slow_bf16_reason();

}  // namespace swarmrt::model
