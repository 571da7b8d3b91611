#include "supervisors/roster.hpp"

namespace swarmrt::supervisors {

void Roster::put(const std::string& name, const std::string& kind, const caf::actor& handle) {
  std::lock_guard<std::mutex> lock(mu_);
  actors_[name] = {kind, handle};
}

void Roster::remove(const std::string& name) {
  std::lock_guard<std::mutex> lock(mu_);
  actors_.erase(name);
}

void Roster::remove(const std::string& name, const caf::actor& handle) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = actors_.find(name);
  if (it != actors_.end() && it->second.second == handle) actors_.erase(it);
}

std::optional<caf::actor> Roster::find(const std::string& name) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = actors_.find(name);
  if (it == actors_.end()) return std::nullopt;
  return it->second.second;
}

std::optional<std::pair<std::string, caf::actor>> Roster::pick(const std::string& kind,
                                                               std::mt19937_64& rng) const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<std::pair<std::string, caf::actor>> of_kind;
  for (const auto& [name, entry] : actors_)
    if (kind == "any" || entry.first == kind) of_kind.emplace_back(name, entry.second);
  if (of_kind.empty()) return std::nullopt;
  return of_kind[rng() % of_kind.size()];
}

std::vector<std::string> Roster::names() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<std::string> out;
  for (const auto& [name, entry] : actors_) out.push_back(name);
  return out;
}

}  // namespace swarmrt::supervisors
