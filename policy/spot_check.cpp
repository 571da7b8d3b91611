#include "policy/spot_check.hpp"

#include <algorithm>

#include "policy/splitmix.hpp"

namespace swarmrt::policy {

bool spot_checked(uint64_t seed, uint64_t step, uint32_t micro_batch, uint32_t stage,
                  double fraction) {
  if (fraction <= 0) return false;
  if (fraction >= 1) return true;
  uint64_t z = splitmix64(seed);
  for (uint64_t v : {step, uint64_t{micro_batch}, uint64_t{stage}}) z = splitmix64(z ^ v);
  // The top 53 bits as a uniform double in [0, 1).
  const double u = static_cast<double>(z >> 11) * 0x1.0p-53;
  return u < fraction;
}

std::optional<uint32_t> pick_verifier(const std::vector<uint32_t>& stage_workers,
                                      const std::vector<uint32_t>& exclude, uint64_t key) {
  std::vector<uint32_t> left;
  for (uint32_t w : stage_workers)
    if (std::find(exclude.begin(), exclude.end(), w) == exclude.end()) left.push_back(w);
  if (left.empty()) return std::nullopt;
  std::sort(left.begin(), left.end());  // the same pick whatever order the membership lists
  return left[splitmix64(key) % left.size()];
}

CheckVerdict after_verifier(bool agrees, bool third_available) {
  if (agrees) return CheckVerdict::agreed;
  return third_available ? CheckVerdict::settle : CheckVerdict::unsettled;
}

CheckVerdict after_third(bool agrees_with_checked) {
  return agrees_with_checked ? CheckVerdict::verifier_wrong : CheckVerdict::checked_wrong;
}

const char* verdict_name(CheckVerdict v) {
  switch (v) {
    case CheckVerdict::agreed:
      return "agreed";
    case CheckVerdict::settle:
      return "settle";
    case CheckVerdict::unsettled:
      return "unsettled";
    case CheckVerdict::checked_wrong:
      return "checked_wrong";
    case CheckVerdict::verifier_wrong:
      return "verifier_wrong";
  }
  return "?";
}

}  // namespace swarmrt::policy
