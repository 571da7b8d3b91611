// Receive buffers that are reused. A fresh multi-megabyte buffer costs a page fault per 4 KiB
// on first touch, which on a VM costs more than copying the bytes in; a freed buffer waits in
// the pool (up to 512 MiB in all) for the next message of a similar size. The frame link reads
// whole messages into them, the TCP communicator each tensor.
#pragma once

#include <ATen/core/Tensor.h>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

namespace swarmrt::transport {

// At least `size` bytes, from the pool when one of up to twice that size is free; the buffer
// goes back to the pool when the last owner lets go of it.
std::shared_ptr<uint8_t> acquire_buffer(size_t size);

// An uninitialized CPU tensor of `shape` and `dtype` whose storage is a pooled buffer.
at::Tensor pooled_empty(const std::vector<int64_t>& shape, at::ScalarType dtype);

}  // namespace swarmrt::transport
