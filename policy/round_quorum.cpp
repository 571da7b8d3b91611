#include "policy/round_quorum.hpp"

namespace swarmrt::policy {

bool RoundQuorum::complete(const std::set<uint32_t>& members, const std::set<uint32_t>& contributed,
                           const std::set<uint32_t>& excused) const {
  if (contributed.empty()) return false;
  for (auto id : members)
    if (!contributed.count(id) && !excused.count(id)) return false;
  return true;
}

bool RoundQuorum::enough_after_timeout(std::size_t contributions) const {
  return contributions > 0 && static_cast<int64_t>(contributions) >= min_replicas;
}

}  // namespace swarmrt::policy
