#include "transport/staging.hpp"

#include <ATen/ATen.h>
#include <c10/core/Event.h>
#include <c10/core/StreamGuard.h>
#include <c10/core/impl/VirtualGuardImpl.h>

#include <algorithm>

namespace swarmrt::transport {

at::Tensor to_device(const at::Tensor& t, const at::Device& device) {
  if (!device.is_cuda() || !t.device().is_cpu()) return t.to(device);
  const auto pinned = t.is_pinned() ? t : t.pin_memory();
  return pinned.to(device, /*non_blocking=*/true);
}

DeviceFence DeviceFence::after_queued(const at::Device& device) {
  DeviceFence f;
  if (!device.is_cuda()) return f;
  // The device-generic interfaces (c10::impl::VirtualGuardImpl, c10::Event): CUDA's
  // implementation is found at run time, and a CPU LibTorch compiles them too.
  c10::impl::VirtualGuardImpl impl(device.type());
  f.event_ = std::make_shared<c10::Event>(device.type());
  f.event_->record(impl.getStream(device));
  return f;
}

bool DeviceFence::ready() const {
  return !event_ || event_->query();
}

HostStaged stage_to_host(const std::vector<at::Tensor>& ts) {
  HostStaged s;
  const auto cuda =
      std::find_if(ts.begin(), ts.end(), [](const at::Tensor& t) { return t.is_cuda(); });
  if (cuda == ts.end()) {
    for (const auto& t : ts) s.host.push_back(t.to(at::kCPU));
    return s;
  }
  const auto device = cuda->device();
  c10::impl::VirtualGuardImpl impl(device.type());
  for (const auto& t : ts) s.source.push_back(t.is_cuda() ? t.contiguous() : t);
  // The side stream starts after what the compute stream has queued so far (the producers).
  const auto side = impl.getStreamFromGlobalPool(device);
  c10::Event produced(device.type());
  produced.record(impl.getStream(device));
  produced.block(side);
  {
    c10::StreamGuard on_side(side);
    for (const auto& t : s.source) {
      if (!t.is_cuda()) {
        s.host.push_back(t.to(at::kCPU));
        continue;
      }
      auto host =
          at::empty(t.sizes(), at::TensorOptions().dtype(t.scalar_type()).pinned_memory(true));
      host.copy_(t, /*non_blocking=*/true);
      s.host.push_back(host);
    }
  }
  s.done.event_ = std::make_shared<c10::Event>(device.type());
  s.done.event_->record(side);
  return s;
}

}  // namespace swarmrt::transport
