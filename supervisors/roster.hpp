// The supervised actors of one process by name ("worker:1001", "group:0", "loader:1") and kind,
// kept current by their supervisors across restarts. Fault injection finds its victims here.
#pragma once

#include <caf/actor.hpp>
#include <map>
#include <mutex>
#include <optional>
#include <random>
#include <string>
#include <vector>

namespace swarmrt::supervisors {

class Roster {
 public:
  void put(const std::string& name, const std::string& kind, const caf::actor& handle);
  void remove(const std::string& name);
  // Removes `name` only while it still names `handle` (not a restarted successor).
  void remove(const std::string& name, const caf::actor& handle);
  std::optional<caf::actor> find(const std::string& name) const;
  // A uniformly drawn actor of `kind` as (name, handle); nullopt when there is none.
  std::optional<std::pair<std::string, caf::actor>> pick(const std::string& kind,
                                                         std::mt19937_64& rng) const;
  std::vector<std::string> names() const;

 private:
  mutable std::mutex mu_;
  std::map<std::string, std::pair<std::string, caf::actor>> actors_;  // name -> (kind, handle)
};

}  // namespace swarmrt::supervisors
