// CRC-32 (zlib's) of any number of bytes: checkpoint files and state chunks check theirs with it.
#pragma once

#include <zlib.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>

namespace swarmrt::model {

inline uint32_t crc32_of(const char* data, size_t n) {
  uLong crc = crc32(0L, Z_NULL, 0);
  while (n > 0) {  // zlib takes a uInt length
    const auto chunk = static_cast<uInt>(std::min<size_t>(n, size_t{1} << 30));
    crc = crc32(crc, reinterpret_cast<const Bytef*>(data), chunk);
    data += chunk;
    n -= chunk;
  }
  return static_cast<uint32_t>(crc);
}

}  // namespace swarmrt::model
