#include "policy/hop_choice.hpp"

#include <algorithm>
#include <cmath>

namespace swarmrt::policy {
using config::HopEncoding;

std::vector<HopEncoding> hop_ladder(HopEncoding floor, bool half) {
  const HopEncoding four = floor == HopEncoding::int5_3 ? HopEncoding::int5_3 : HopEncoding::int4;
  std::vector<HopEncoding> ladder;
  for (auto e : {HopEncoding::none, HopEncoding::bf16, HopEncoding::int8, four, HopEncoding::int3,
                 HopEncoding::int4_2}) {
    if (!(half && e == HopEncoding::bf16)) ladder.push_back(e);
    if (e == floor) break;
  }
  return ladder;
}

std::vector<double> density_ladder(double floor) {
  std::vector<double> ladder;
  for (int r = kDensityRungs - 1; r >= 0; --r) {
    const double d = floor * static_cast<double>(1 << r);
    if (d <= 1) ladder.push_back(d);
  }
  if (ladder.empty()) ladder.push_back(floor);
  return ladder;
}

size_t capped_rung(const std::vector<double>& ladder, size_t rung, double cap) {
  if (cap <= 0 || ladder.empty()) return rung;
  // Rungs are powers of two apart: a relative slack absorbs the cap's float rounding.
  while (rung + 1 < ladder.size() && ladder[rung] > cap * (1 + 1e-9)) ++rung;
  return rung;
}

namespace {
double median(std::vector<double> v) {
  if (v.empty()) return -1;
  auto mid = v.begin() + static_cast<std::ptrdiff_t>(v.size() / 2);
  std::nth_element(v.begin(), mid, v.end());
  return *mid;
}
}  // namespace

void LinkRate::add(uint64_t bytes, double seconds, double now_s) {
  if (bytes < kMinBytes || !(seconds > 0)) return;
  const auto alike = [&](const Sample& s) {
    const double b = static_cast<double>(bytes);
    return std::abs(static_cast<double>(s.bytes) - b) <= kSameSize * b;
  };
  samples_.erase(std::remove_if(samples_.begin(), samples_.end(),
                                [&](const Sample& s) { return now_s - s.at > kMaxAgeS; }),
                 samples_.end());
  if (static_cast<size_t>(std::count_if(samples_.begin(), samples_.end(), alike)) >= kKeep)
    samples_.erase(std::find_if(samples_.begin(), samples_.end(), alike));
  samples_.push_back({bytes, seconds, now_s});
  if (samples_.size() > kKeep * kSizes) samples_.pop_front();
}

double LinkRate::bytes_per_s(double now_s) const {
  std::vector<double> rates;
  for (auto s = samples_.rbegin(); s != samples_.rend() && rates.size() < kKeep; ++s)
    if (now_s - s->at <= kMaxAgeS) rates.push_back(static_cast<double>(s->bytes) / s->seconds);
  return std::max(median(std::move(rates)), 0.0);
}

double LinkRate::seconds_for(uint64_t bytes, double now_s) const {
  std::vector<double> alike;
  const double b = static_cast<double>(bytes);
  for (const auto& s : samples_)
    if (now_s - s.at <= kMaxAgeS && std::abs(static_cast<double>(s.bytes) - b) <= kSameSize * b)
      alike.push_back(s.seconds);
  if (!alike.empty()) return median(std::move(alike));
  const double rate = bytes_per_s(now_s);
  return rate > 0 ? b / rate : -1;
}

size_t HopChooser::choose(const std::vector<double>& seconds, double compute_s) {
  if (seconds.empty()) return 0;
  rung_ = std::min(rung_, seconds.size() - 1);
  ++hops_on_rung_;
  ++hops_;
  // A move up that lasted twice its wait was right: the next one waits the first dwell again.
  if (moved_up_ && hops_on_rung_ >= 2 * dwell_) {
    dwell_ = first_dwell_;
    moved_up_ = false;
  }
  if (!(compute_s > 0) || seconds[rung_] < 0) return rung_;
  const auto fits = [&](size_t k, double fraction) {
    return seconds[k] >= 0 && seconds[k] <= fraction * compute_s;
  };
  // The least compressed rung known to hide, else the floor.
  size_t hides = 0;
  while (hides + 1 < seconds.size() && !fits(hides, kHideFraction)) ++hides;
  if (hides > rung_) {
    // The link falls behind: down at once. A move up that did not last backs off.
    if (moved_up_ && hops_on_rung_ < 2 * dwell_) dwell_ = std::min(2 * dwell_, kMaxDwell);
    moved_up_ = false;
  } else if (hides < rung_ && hops_on_rung_ >= dwell_ && fits(rung_ - 1, kUpFraction)) {
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
