// SplitMix64's finalizer: a fixed, portable, well-mixed 64-bit function of its input. The data
// order (model/data.cpp) mixes (seed, shard, epoch) with it and the wiring (wiring.cpp) a
// sample's key, so both are the same on every machine and library version.
#pragma once

#include <cstdint>

namespace swarmrt::policy {

inline uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

}  // namespace swarmrt::policy
