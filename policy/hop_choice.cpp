#include "policy/hop_choice.hpp"

#include <algorithm>

namespace swarmrt::policy {
using config::HopEncoding;

std::vector<HopEncoding> hop_ladder(HopEncoding floor, bool half) {
  const HopEncoding four = floor == HopEncoding::int5_3 ? HopEncoding::int5_3 : HopEncoding::int4;
  std::vector<HopEncoding> ladder;
  for (auto e :
       {HopEncoding::none, HopEncoding::bf16, HopEncoding::int8, four, HopEncoding::int3}) {
    if (!(half && e == HopEncoding::bf16)) ladder.push_back(e);
    if (e == floor) break;
  }
  return ladder;
}

void LinkRate::add(uint64_t bytes, double seconds, double now_s) {
  if (bytes < kMinBytes || !(seconds > 0)) return;
  samples_.push_back({static_cast<double>(bytes) / seconds, now_s});
  if (samples_.size() > kKeep) samples_.pop_front();
}

double LinkRate::bytes_per_s(double now_s) const {
  std::vector<double> rates;
  for (const auto& s : samples_)
    if (now_s - s.at <= kMaxAgeS) rates.push_back(s.rate);
  if (rates.empty()) return 0;
  auto mid = rates.begin() + static_cast<std::ptrdiff_t>(rates.size() / 2);
  std::nth_element(rates.begin(), mid, rates.end());
  return *mid;
}

size_t HopChooser::choose(const std::vector<uint64_t>& wire_bytes, double bytes_per_s,
                          double compute_s) {
  if (wire_bytes.empty()) return 0;
  rung_ = std::min(rung_, wire_bytes.size() - 1);
  ++hops_on_rung_;
  ++hops_;
  // A move up that lasted twice its wait was right: the next one waits the first dwell again.
  if (moved_up_ && hops_on_rung_ >= 2 * dwell_) {
    dwell_ = kFirstDwell;
    moved_up_ = false;
  }
  if (!(bytes_per_s > 0) || !(compute_s > 0)) return rung_;
  const auto seconds = [&](size_t k) { return static_cast<double>(wire_bytes[k]) / bytes_per_s; };
  // The least compressed rung that hides, else the floor.
  size_t hides = 0;
  while (hides + 1 < wire_bytes.size() && seconds(hides) > kHideFraction * compute_s) ++hides;
  if (hides > rung_) {
    // The link falls behind: down at once. A move up that did not last backs off.
    if (moved_up_ && hops_on_rung_ < 2 * dwell_) dwell_ = std::min(2 * dwell_, kMaxDwell);
    moved_up_ = false;
  } else if (hides < rung_ && hops_on_rung_ >= dwell_ &&
             seconds(rung_ - 1) <= kUpFraction * compute_s) {
    // Room to spare: up one rung at a time, so that a wrong guess costs one rung.
    hides = rung_ - 1;
    moved_up_ = true;
  } else {
    return rung_;
  }
  if (hides != rung_) {
    rung_ = hides;
    hops_on_rung_ = 0;
    ++moves_;
  }
  return rung_;
}

}  // namespace swarmrt::policy
