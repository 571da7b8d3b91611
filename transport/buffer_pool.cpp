#include "transport/buffer_pool.hpp"

#include <ATen/ATen.h>
#include <algorithm>
#include <map>
#include <mutex>

namespace swarmrt::transport {
namespace {

constexpr size_t kPoolLimit = size_t{512} << 20;

struct Pool {
  std::mutex mutex;
  std::multimap<size_t, uint8_t*> free;
  size_t pooled = 0;
};
Pool& pool() {
  static Pool* p = new Pool;  // never destroyed: buffers may come back during exit
  return *p;
}

void release(uint8_t* data, size_t capacity) {
  auto& p = pool();
  std::lock_guard<std::mutex> lock(p.mutex);
  if (p.pooled + capacity <= kPoolLimit) {
    p.free.emplace(capacity, data);
    p.pooled += capacity;
  } else {
    delete[] data;
  }
}

}  // namespace

std::shared_ptr<uint8_t> acquire_buffer(size_t size) {
  auto& p = pool();
  uint8_t* data = nullptr;
  size_t capacity = size;
  {
    std::lock_guard<std::mutex> lock(p.mutex);
    auto it = p.free.lower_bound(size);
    if (it != p.free.end() && it->first <= 2 * size + 4096) {
      capacity = it->first;
      data = it->second;
      p.pooled -= capacity;
      p.free.erase(it);
    }
  }
  if (!data) data = new uint8_t[std::max<size_t>(capacity, 1)];
  return std::shared_ptr<uint8_t>(data, [capacity](uint8_t* d) { release(d, capacity); });
}

at::Tensor pooled_empty(const std::vector<int64_t>& shape, at::ScalarType dtype) {
  int64_t numel = 1;
  for (auto d : shape) numel *= d;
  const size_t bytes = static_cast<size_t>(numel) * c10::elementSize(dtype);
  auto buffer = acquire_buffer(bytes);
  auto* data = buffer.get();
  // new[] memory is aligned for every dtype a tensor here holds (at most 8-byte elements).
  return at::from_blob(
      data, shape, [buffer = std::move(buffer)](void*) mutable { buffer.reset(); },
      at::TensorOptions().dtype(dtype));
}

}  // namespace swarmrt::transport
