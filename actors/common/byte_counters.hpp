// Bytes sent by every actor of a process, by kind (architecture §6: count them all), and the
// swarm's totals: this process's counters plus what every other process last reported.
#pragma once

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdint>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

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
  // Every kind's count, in Traffic's order.
  std::vector<uint64_t> snapshot() const {
    std::vector<uint64_t> out;
    for (const auto& c : counts_) out.push_back(c.load(std::memory_order_relaxed));
    return out;
  }
  nlohmann::json to_json() const { return as_json(snapshot()); }

  // Counts in Traffic's order as {"activations": ..., ...}; missing kinds are 0.
  static nlohmann::json as_json(const std::vector<uint64_t>& counts) {
    static const char* const kNames[] = {"activations", "gradients", "pseudo_gradients",
                                         "parameters", "control"};
    nlohmann::json j = nlohmann::json::object();
    for (size_t i = 0; i < static_cast<size_t>(Traffic::count); ++i)
      j[kNames[i]] = i < counts.size() ? counts[i] : 0;
    return j;
  }

 private:
  std::array<std::atomic<uint64_t>, static_cast<size_t>(Traffic::count)> counts_{};
};

// What the other processes of the swarm have sent, as each last reported it (a node's workers
// report their process's counters with every step they take). A process that died keeps what
// it reported. Counters only grow, so reports that arrive out of order (two workers of one
// node) are merged by taking the larger count of each kind.
class RemoteBytes {
 public:
  void report(const std::string& process, const std::vector<uint64_t>& counts) {
    std::lock_guard<std::mutex> lock(mu_);
    auto& mine = by_process_[process];
    mine.resize(std::max(mine.size(), counts.size()));
    for (size_t i = 0; i < counts.size(); ++i) mine[i] = std::max(mine[i], counts[i]);
  }
  // `own` (this process's counters) plus every other process's last report.
  nlohmann::json total_with(const ByteCounters& own) const {
    auto sum = own.snapshot();
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& [process, counts] : by_process_)
      for (size_t i = 0; i < counts.size() && i < sum.size(); ++i) sum[i] += counts[i];
    return ByteCounters::as_json(sum);
  }

 private:
  mutable std::mutex mu_;
  std::map<std::string, std::vector<uint64_t>> by_process_;
};

}  // namespace swarmrt::actors
