// When a DiLoCo group applies an outer round (of one fragment): at once when every current
// member has contributed or been excused (its contribution was refused as non-finite), and at
// least one contributed; after diloco.round_timeout_s with the contributions it has, when they
// are at least diloco.min_replicas. A member that left while the round was collected is no
// longer waited for; a contribution of a worker no longer a member does not count toward "all".
#pragma once

#include <cstddef>
#include <cstdint>
#include <set>

namespace swarmrt::policy {

struct RoundQuorum {
  int64_t min_replicas = 1;  // diloco.min_replicas

  // Every member is in (contributed or excused) and someone contributed.
  bool complete(const std::set<uint32_t>& members, const std::set<uint32_t>& contributed,
                const std::set<uint32_t>& excused) const;

  // The round timer fired with `contributions` in: apply them (true) or keep waiting.
  bool enough_after_timeout(std::size_t contributions) const;
};

}  // namespace swarmrt::policy
