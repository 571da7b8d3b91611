// How the coordinator's inspector gathers a command's parts from every process and records the
// commands that change the swarm (actors/console/gather.hpp).
#include "actors/console/gather.hpp"

#include <spdlog/spdlog.h>

#include "config/config.hpp"
#include "messages/metrics.hpp"
#include "supervisors/roster.hpp"

namespace swarmrt::actors::console {
using namespace swarmrt::atoms;
using json = nlohmann::json;
using messages::ConsoleRequest;

namespace {

struct Gathering {
  size_t pending = 0;
  std::vector<Part> parts;
  std::function<void(std::vector<Part>&)> done;
};

}  // namespace

std::string label(const NodeBook::Node& n) {
  return "node" + std::to_string(n.index);
}

// Sends `part` to the coordinator's own inspector and to every live node's (or to `only`, a
// process label, when set); calls `done` once each has answered or timed out.
void fan_out(Self* self, const ConsoleRequest& part, double timeout_s,
             std::function<void(std::vector<Part>&)> done, const std::string& only) {
  auto& s = self->state;
  std::vector<std::pair<std::string, caf::actor>> targets;
  if (only.empty() || only == "coordinator")
    targets.emplace_back("coordinator", caf::actor_cast<caf::actor>(self));
  for (const auto& n : s.setup.nodes->nodes())
    if (n.alive && n.inspector && (only.empty() || only == label(n)))
      targets.emplace_back(label(n), n.inspector);
  auto g = std::make_shared<Gathering>();
  g->pending = targets.size();
  g->parts.resize(targets.size());
  g->done = std::move(done);
  if (targets.empty()) {
    g->done(g->parts);
    return;
  }
  for (size_t i = 0; i < targets.size(); ++i) {
    g->parts[i].process = targets[i].first;
    self->request(targets[i].second, config::as_duration(timeout_s), inspect_atom::value, part)
        .then(
            [=](const std::string& answer) {
              g->parts[i].answer = json::parse(answer);
              if (--g->pending == 0) g->done(g->parts);
            },
            [=](const caf::error& e) {
              g->parts[i].error = self->system().render(e);
              if (--g->pending == 0) g->done(g->parts);
            });
  }
}

// The processes' "actors" parts as one list.
json all_actors(const std::vector<Part>& parts) {
  json rows = json::array();
  for (const auto& p : parts)
    if (p.answer.is_object() && p.answer.contains("actors"))
      for (const auto& row : p.answer["actors"]) rows.push_back(row);
  return rows;
}

// Processes that did not answer, for the `unreachable` field of an answer.
json unreachable(const std::vector<Part>& parts) {
  json out = json::array();
  for (const auto& p : parts)
    if (!p.error.empty()) out.push_back({{"node", p.process}, {"error", p.error}});
  return out;
}

// The console's process (CAF node id), for the event log.
std::string console_node(Self* self) {
  const auto& sender = self->current_sender();
  return sender ? caf::to_string(sender->node()) : "unknown";
}

void record(Self* self, const ConsoleRequest& r, const std::string& from) {
  // What the command changes shows in the next `actors`, even one gathered meanwhile.
  self->state.actors_fresh = false;
  ++self->state.actors_changes;
  std::string words;
  for (const auto& w : r.args) words += (words.empty() ? "" : " ") + w;
  spdlog::warn("console '{}' from {}: {}", r.console, from, words);
  messages::send_metrics(
      self, self->state.setup.metrics,
      {{"event", "console"}, {"command", words}, {"console", r.console}, {"from", from}});
}

// Calls `done` with the swarm's actor rows and unreachable processes, from the shared
// list when it is fresh enough, else once the gathering under way (or a new one) answers.
void shared_actors(Self* self, const std::string& console, double timeout_s,
                   std::function<void(const json&, const json&)> done) {
  auto& s = self->state;
  const auto now = std::chrono::steady_clock::now();
  if (s.actors_fresh && now - s.actors_at <= inspector_state::kActorsMaxAge)
    return done(s.actors_rows, s.actors_unreachable);
  s.actors_waiting.push_back(std::move(done));
  if (s.actors_gathering) return;
  s.actors_gathering = true;
  const uint64_t changes = s.actors_changes;
  fan_out(self, {{"actors"}, console, false}, timeout_s, [=](std::vector<Part>& parts) {
    auto& s = self->state;
    s.actors_rows = all_actors(parts);
    s.actors_unreachable = unreachable(parts);
    s.actors_at = now;  // as old as the question: answers gathered after it started
    s.actors_fresh = s.actors_changes == changes;
    s.actors_gathering = false;
    auto waiting = std::move(s.actors_waiting);
    s.actors_waiting.clear();
    for (auto& w : waiting) w(s.actors_rows, s.actors_unreachable);
  });
}

// A `done` for fan_out to one process: its answer, or why it gave none.
std::function<void(std::vector<Part>&)> deliver_one(Promise promise) {
  return [promise](std::vector<Part>& one) mutable {
    if (one.empty() || !one[0].error.empty())
      promise.deliver(failure(one.empty() ? "the node is gone" : one[0].error));
    else
      promise.deliver(one[0].answer.dump());
  };
}

// Runs `part` where `actor_name` lives (found through every process's actor list) and answers
// with that process's answer.
void on_actor_process(Self* self, const std::string& actor_name, ConsoleRequest part,
                      Promise promise, double timeout_s) {
  ConsoleRequest list{{"actors"}, part.console, false};
  fan_out(self, list, timeout_s, [=](std::vector<Part>& parts) mutable {
    for (const auto& p : parts) {
      if (!p.answer.is_object() || !p.answer.contains("actors")) continue;
      for (const auto& row : p.answer["actors"])
        if (matches(actor_name, row["name"].get<std::string>())) {
          fan_out(self, part, timeout_s, deliver_one(promise), p.process);
          return;
        }
    }
    promise.deliver(failure("no actor '" + actor_name + "' (see `actors`)"));
  });
}

std::optional<NodeBook::Node> find_node(Self* self, const std::string& name) {
  for (const auto& n : self->state.setup.nodes->nodes())
    if (n.name == name || label(n) == name || std::to_string(n.index) == name) return n;
  return std::nullopt;
}

Process find_process(Self* self, const std::string& name) {
  if (name == "coordinator") return {"coordinator", caf::to_string(self->node()), ""};
  auto n = find_node(self, name);
  if (!n) return {"", "", "no node '" + name + "' (see `nodes`)"};
  if (!n->alive || !n->inspector) return {"", "", "node '" + name + "' is gone"};
  return {label(*n), caf::to_string(n->inspector.node()), ""};
}

nlohmann::json coordinator_rows(Self* self) {
  return self->state.setup.coordinators ? self->state.setup.coordinators()
                                        : nlohmann::json::array();
}

}  // namespace swarmrt::actors::console
