// Bytes sent by every actor of a process, by kind (architecture §6: count them all).
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <nlohmann/json.hpp>

namespace swarmrt::actors {

enum class Traffic : size_t {
  activations,
  gradients,
  pseudo_gradients,
  parameters,
  control,
  count
};

class ByteCounters {
 public:
  void add(Traffic kind, uint64_t bytes) {
    counts_[static_cast<size_t>(kind)].fetch_add(bytes, std::memory_order_relaxed);
  }
  uint64_t get(Traffic kind) const {
    return counts_[static_cast<size_t>(kind)].load(std::memory_order_relaxed);
  }
  nlohmann::json to_json() const {
    return {{"activations", get(Traffic::activations)},
            {"gradients", get(Traffic::gradients)},
            {"pseudo_gradients", get(Traffic::pseudo_gradients)},
            {"parameters", get(Traffic::parameters)},
            {"control", get(Traffic::control)}};
  }

 private:
  std::array<std::atomic<uint64_t>, static_cast<size_t>(Traffic::count)> counts_{};
};

}  // namespace swarmrt::actors
