#include "leader/fence.hpp"

#include <mutex>

namespace swarmrt::leader {
namespace {

struct Fence {
  std::mutex mu;
  std::function<std::string()> why_not;
  int64_t epoch = 0;
};

Fence& fence() {
  static Fence* f = new Fence;  // outlives every writer, static destruction included
  return *f;
}

}  // namespace

void set_write_fence(std::function<std::string()> why_not, int64_t epoch) {
  auto& f = fence();
  std::lock_guard<std::mutex> lock(f.mu);
  f.why_not = std::move(why_not);
  f.epoch = epoch;
}

std::string write_fenced() {
  auto& f = fence();
  std::lock_guard<std::mutex> lock(f.mu);
  return f.why_not ? f.why_not() : std::string();
}

int64_t write_epoch() {
  auto& f = fence();
  std::lock_guard<std::mutex> lock(f.mu);
  return f.epoch;
}

}  // namespace swarmrt::leader
