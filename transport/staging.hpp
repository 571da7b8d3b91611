// Between host memory and a worker's CUDA device without making the host wait for the device.
// A plain copy from pageable host memory, or to it, waits for everything the device has queued
// before it: a GPU worker that copied each hop that way idled its GPU on every micro-batch.
// Here the bytes go through pinned buffers and copies are queued; a DeviceFence says when the
// device has got there. On the CPU everything is done at once.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>
#include <memory>
#include <vector>

namespace c10 {
class Event;
}

namespace swarmrt::transport {

struct HostStaged;

// `t` on `device`. From host memory to a CUDA device it is staged in pinned memory and the
// copy is queued on the device's current stream; otherwise t.to(device).
at::Tensor to_device(const at::Tensor& t, const at::Device& device);

// A point in a device's queue: ready once the device has done what was queued on its current
// stream when the fence was made. A default fence, and any fence of the CPU, is ready.
class DeviceFence {
 public:
  DeviceFence() = default;
  static DeviceFence after_queued(const at::Device& device);
  bool ready() const;

 private:
  friend HostStaged stage_to_host(const std::vector<at::Tensor>& ts);
  std::shared_ptr<c10::Event> event_;
};

// Device tensors' bytes on their way to pinned host memory: `host` holds them once `done` is
// ready. The copies run on one side stream after what was queued when they were asked, so the
// device goes on computing meanwhile; `source` keeps the device memory alive until then.
struct HostStaged {
  std::vector<at::Tensor> host;
  std::vector<at::Tensor> source;
  DeviceFence done;
};
// `ts` to host memory: queued as above from a CUDA device, copied at once (done ready) from
// anywhere else.
HostStaged stage_to_host(const std::vector<at::Tensor>& ts);

}  // namespace swarmrt::transport
