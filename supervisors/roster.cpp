#include "supervisors/roster.hpp"

namespace swarmrt::supervisors {

std::string worker_name(uint32_t id) {
  return "stage" + std::to_string(id / 1000) + "/worker" + std::to_string(id % 1000);
}
std::string group_name(uint32_t stage) {
  return "stage" + std::to_string(stage) + "/diloco";
}
std::string averager_name(uint32_t stage) {
  return "stage" + std::to_string(stage) + "/averager";
}
std::string loader_name(uint32_t index) {
  return "loader/" + std::to_string(index);
}

bool Roster::killable_kind(const std::string& kind) {
  return kind == "worker" || kind == "group" || kind == "loader" || kind == "averager" ||
         kind == "tracker";
}

void Roster::put(const std::string& name, const std::string& kind, const caf::actor& handle,
                 int64_t stage) {
  std::lock_guard<std::mutex> lock(mu_);
  const auto lives = ++lives_[name];
  actors_[name] = RosterEntry{name, kind, stage, handle, lives - 1};
}

void Roster::remove(const std::string& name) {
  std::lock_guard<std::mutex> lock(mu_);
  actors_.erase(name);
}

void Roster::remove(const std::string& name, const caf::actor& handle) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = actors_.find(name);
  if (it != actors_.end() && it->second.handle == handle) actors_.erase(it);
}

std::optional<caf::actor> Roster::find(const std::string& name) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = actors_.find(name);
  if (it == actors_.end()) return std::nullopt;
  return it->second.handle;
}

std::optional<std::pair<std::string, caf::actor>> Roster::pick(const std::string& kind,
                                                               std::mt19937_64& rng) const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<std::pair<std::string, caf::actor>> of_kind;
  for (const auto& [name, entry] : actors_)
    if (killable_kind(entry.kind) && (kind == "any" || entry.kind == kind))
      of_kind.emplace_back(name, entry.handle);
  if (of_kind.empty()) return std::nullopt;
  return of_kind[rng() % of_kind.size()];
}

std::vector<std::string> Roster::names() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<std::string> out;
  for (const auto& [name, entry] : actors_) out.push_back(name);
  return out;
}

std::vector<RosterEntry> Roster::entries() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<RosterEntry> out;
  for (const auto& [name, entry] : actors_) out.push_back(entry);
  return out;
}

void Roster::set_node(const std::string& node) {
  std::lock_guard<std::mutex> lock(mu_);
  node_ = node;
}

std::string Roster::node() const {
  std::lock_guard<std::mutex> lock(mu_);
  return node_;
}

}  // namespace swarmrt::supervisors
