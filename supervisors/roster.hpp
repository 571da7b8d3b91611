// The names registry of one process: every actor of the swarm that lives here, by a stable,
// readable name ("stage1/worker3", "stage0/diloco", "loader/0", "tracker", "supervisor/stage1"),
// with its kind and stage. Supervisors keep it current across restarts: a name leaves when its
// actor dies and comes back, with a new handle and one more restart, when it is restarted.
// Fault injection finds its victims here and the inspector lists it (CAF's own registry keeps
// neither kinds nor restarts, and keeps a dead actor's name).
#pragma once

#include <caf/actor.hpp>
#include <map>
#include <mutex>
#include <optional>
#include <random>
#include <string>
#include <vector>

namespace swarmrt::supervisors {

// Names of the actors of a swarm, one place (chaos.kill and the console take them).
std::string worker_name(uint32_t id);       // stage k, replica r (id k*1000+r) -> "stagek/workerr"
std::string group_name(uint32_t stage);     // "stagek/diloco"
std::string averager_name(uint32_t stage);  // "stagek/averager"
std::string loader_name(uint32_t index);    // "loader/i"

struct RosterEntry {
  std::string name;
  std::string kind;    // worker, group, loader, averager, tracker, supervisor, ...
  int64_t stage = -1;  // -1: the actor serves no one stage
  caf::actor handle;
  uint64_t restarts = 0;  // times this name came back after its actor died
};

class Roster {
 public:
  // Killable kinds: the chaos control actor picks its random victims among these only.
  static bool killable_kind(const std::string& kind);

  void put(const std::string& name, const std::string& kind, const caf::actor& handle,
           int64_t stage = -1);
  void remove(const std::string& name);
  // Removes `name` only while it still names `handle` (not a restarted successor).
  void remove(const std::string& name, const caf::actor& handle);
  std::optional<caf::actor> find(const std::string& name) const;
  // A uniformly drawn actor of `kind` ("any": of any killable kind) as (name, handle); nullopt
  // when there is none.
  std::optional<std::pair<std::string, caf::actor>> pick(const std::string& kind,
                                                         std::mt19937_64& rng) const;
  std::vector<std::string> names() const;
  std::vector<RosterEntry> entries() const;

  // The node this process is ("" on the coordinator, "node2" on the node of index 2): the
  // console shows names as name@node.
  void set_node(const std::string& node);
  std::string node() const;

 private:
  mutable std::mutex mu_;
  std::string node_;
  std::map<std::string, RosterEntry> actors_;
  std::map<std::string, uint64_t> lives_;  // name -> how many actors have had it
};

}  // namespace swarmrt::supervisors
