#include "policy/wiring.hpp"

#include "policy/splitmix.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>

namespace swarmrt::policy {
namespace {
// What a sample is taken to cost on a worker while none of the candidates is measured.
constexpr double kUnmeasuredSecondsPerSample = 1.0;
}  // namespace

Wiring::Wiring(WiringPolicy policy, uint64_t seed, int max_inflight)
    : policy_(policy), rng_(seed), seed_(seed), max_inflight_(max_inflight) {}

double Wiring::min_key() const {
  double m = std::numeric_limits<double>::infinity();
  for (auto id : ids_) m = std::min(m, stats_.at(id).key);
  return std::isinf(m) ? 0.0 : m;
}

double Wiring::expected_seconds(uint32_t id, double samples) const {
  if (const auto tput = throughput(id)) return samples / *tput;
  // An unmeasured worker is taken to be as fast as the measured ones on average: charged a
  // fixed 1 s per sample, a worker that joined a stage beside one slow worker (a balancer's
  // move) got one micro-batch from each sender and then none until the slow worker's key had
  // caught up, about 10 micro-batches (3 steps at its pace) later.
  double sum = 0;
  int n = 0;
  for (auto other : ids_)
    if (const auto t = throughput(other)) sum += *t, ++n;
  return n ? samples * n / sum : samples * kUnmeasuredSecondsPerSample;
}

void Wiring::set_members(const std::vector<uint32_t>& ids) {
  const double entry = min_key();
  std::vector<uint32_t> fresh;
  for (auto id : ids)
    if (!stats_.count(id)) fresh.push_back(id);
  ids_ = ids;
  std::uniform_real_distribution<double> u(0.0, 1.0);
  for (auto id : fresh) {
    Stats s;
    s.key = entry;
    s.tie = u(rng_);
    stats_[id] = s;
  }
}

std::optional<uint32_t> Wiring::choose(double samples, std::optional<uint32_t> pinned,
                                       std::optional<uint64_t> key) {
  if (pinned && std::find(ids_.begin(), ids_.end(), *pinned) != ids_.end()) {
    auto& s = stats_[*pinned];
    if (s.inflight >= max_inflight_) return std::nullopt;
    s.key += expected_seconds(*pinned, samples);
    ++s.inflight;
    return pinned;
  }
  std::vector<uint32_t> open;
  for (auto id : ids_)
    if (stats_[id].inflight < max_inflight_) open.push_back(id);
  if (open.empty()) return std::nullopt;
  uint32_t pick;
  if (policy_ == WiringPolicy::uniform && key) {
    // By id, not by the order the membership listed them (that follows who joined first).
    std::sort(open.begin(), open.end());
    pick = open[splitmix64(seed_ ^ splitmix64(*key)) % open.size()];
  } else if (policy_ == WiringPolicy::uniform) {
    pick = open[std::uniform_int_distribution<size_t>(0, open.size() - 1)(rng_)];
  } else {
    pick = *std::min_element(open.begin(), open.end(), [&](uint32_t a, uint32_t b) {
      const auto &sa = stats_[a], &sb = stats_[b];
      return sa.key != sb.key ? sa.key < sb.key : sa.tie < sb.tie;
    });
    auto& s = stats_[pick];
    s.key += expected_seconds(pick, samples);
    s.tie = std::uniform_real_distribution<double>(0.0, 1.0)(rng_);
  }
  ++stats_[pick].inflight;
  return pick;
}

void Wiring::completed(uint32_t id, double samples, Clock::time_point sent, Clock::time_point now) {
  auto it = stats_.find(id);
  if (it == stats_.end()) return;
  const auto start = std::max(sent, it->second.last_done);
  it->second.last_done = now;
  const double seconds = std::chrono::duration<double>(now - start).count();
  completed(id, samples, measure_ ? measure_(id, samples, seconds) : seconds);
}

void Wiring::completed(uint32_t id, double samples, double seconds) {
  auto it = stats_.find(id);
  if (it == stats_.end()) return;
  auto& s = it->second;
  if (s.inflight > 0) --s.inflight;
  s.rate.add(samples, seconds);
}

void Wiring::release(uint32_t id) {
  auto it = stats_.find(id);
  if (it != stats_.end() && it->second.inflight > 0) --it->second.inflight;
}

void Wiring::exclude(uint32_t id) {
  ids_.erase(std::remove(ids_.begin(), ids_.end(), id), ids_.end());
  stats_.erase(id);
}

int Wiring::inflight(uint32_t id) const {
  auto it = stats_.find(id);
  return it == stats_.end() ? 0 : it->second.inflight;
}

std::optional<double> Wiring::throughput(uint32_t id) const {
  auto it = stats_.find(id);
  if (it == stats_.end()) return std::nullopt;
  return it->second.rate.value();
}

}  // namespace swarmrt::policy
