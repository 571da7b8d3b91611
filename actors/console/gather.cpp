// The whole-swarm commands of `swarmrt ctl`, run by the coordinator's inspector: each asks every
// process for its part (inspect_atom; the coordinator's own part too, through the same message),
// merges the answers, and records every command that changes the swarm as a `console` event.
// Every answer is JSON: {"ok": true, ...} or {"ok": false, "error": ..., "usage": ...}.
#include <spdlog/spdlog.h>

#include <nlohmann/json.hpp>

#include "actors/console/internal.hpp"
#include "messages/metrics.hpp"
#include "model/config.hpp"
#include "supervisors/roster.hpp"

namespace swarmrt::actors::console {
using namespace swarmrt::atoms;
using json = nlohmann::json;
using messages::ConsoleRequest;

namespace {

// One process's answer to its part: the process ("coordinator", "node2") and its JSON, or
// why it gave none.
struct Part {
  std::string process;
  json answer;  // null when it did not answer
  std::string error;
};

struct Gathering {
  size_t pending = 0;
  std::vector<Part> parts;
  std::function<void(std::vector<Part>&)> done;
};

std::string label(const NodeBook::Node& n) {
  return "node" + std::to_string(n.index);
}

// Sends `part` to the coordinator's own inspector and to every live node's (or to `only`, a
// process label, when set); calls `done` once each has answered or timed out.
void fan_out(Self* self, const ConsoleRequest& part, double timeout_s,
             std::function<void(std::vector<Part>&)> done, const std::string& only = "") {
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
    self->request(targets[i].second, model::as_duration(timeout_s), inspect_atom::value, part)
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

using Promise = caf::typed_response_promise<std::string>;

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

// A process a command names: "coordinator" or a node (label, name or index), with its CAF
// node id as a string (what transport::partition_from takes); the error when there is none.
struct Process {
  std::string label, node_id, error;
};
Process find_process(Self* self, const std::string& name) {
  if (name == "coordinator") return {"coordinator", caf::to_string(self->node()), ""};
  auto n = find_node(self, name);
  if (!n) return {"", "", "no node '" + name + "' (see `nodes`)"};
  if (!n->alive || !n->inspector) return {"", "", "node '" + name + "' is gone"};
  return {label(*n), caf::to_string(n->inspector.node()), ""};
}

}  // namespace

caf::result<std::string> run_console_command(Self* self, const ConsoleRequest& r) {
  auto& s = self->state;
  const auto& a = r.args;
  if (a.empty()) return failure("no command", true);
  const std::string& cmd = a[0];
  const double timeout = s.setup.query_timeout_s;
  const std::string from = console_node(self);
  auto usage = [&](const std::string& form) { return failure("usage: " + form, true); };

  if (cmd == "nodes") {
    if (a.size() != 1) return usage("nodes");
    // The label of a process known by its node id (a partition's other side).
    std::map<std::string, std::string> labels{{caf::to_string(self->node()), "coordinator"}};
    for (const auto& n : s.setup.nodes->nodes())
      if (n.inspector) labels[caf::to_string(n.inspector.node())] = label(n);
    auto label_of = [labels](const json& id) {
      auto it = labels.find(id.get<std::string>());
      return it == labels.end() ? id.get<std::string>() : it->second;
    };
    Promise promise = self->make_response_promise<std::string>();
    fan_out(self, {{"proc"}, r.console, false}, timeout, [=](std::vector<Part>& parts) mutable {
      json rows = json::array();
      auto row_of = [&](json row, const std::string& process) {
        auto it = std::find_if(parts.begin(), parts.end(),
                               [&](const Part& p) { return p.process == process; });
        if (it == parts.end()) return row;
        if (!it->error.empty()) {
          row["alive"] = false;
          row["error"] = it->error;
        } else {
          for (const auto& key :
               {"pid", "threads", "rss_mb", "cpu_s", "actors", "partitioned_frames"})
            row[key] = it->answer[key];
          json cut = json::array();
          for (const auto& id : it->answer["partitions"]) cut.push_back(label_of(id));
          row["partitioned_from"] = cut;
        }
        return row;
      };
      rows.push_back(row_of(
          {{"node", "coordinator"}, {"name", "coordinator"}, {"alive", true}, {"workers", 0}},
          "coordinator"));
      for (const auto& n : s.setup.nodes->nodes())
        rows.push_back(row_of({{"node", label(n)},
                               {"name", n.name},
                               {"alive", n.alive},
                               {"workers", n.workers.size()}},
                              label(n)));
      promise.deliver(json{{"ok", true}, {"nodes", rows}}.dump());
    });
    return promise;
  }

  if (cmd == "actors") {
    std::string pattern = "*", kind;
    int64_t stage = -2;
    for (size_t i = 1; i < a.size(); ++i) {
      if (a[i] == "--stage" && i + 1 < a.size()) {
        try {
          stage = std::stoll(a[++i]);
        } catch (const std::exception&) {
          return usage("actors [PATTERN] [--stage K] [--kind KIND]");
        }
      } else if (a[i] == "--kind" && i + 1 < a.size()) {
        kind = a[++i];
      } else if (pattern == "*" && a[i].rfind("--", 0) != 0) {
        pattern = a[i];
      } else {
        return usage("actors [PATTERN] [--stage K] [--kind KIND]");
      }
    }
    Promise promise = self->make_response_promise<std::string>();
    shared_actors(self, r.console, timeout, [=](const json& all, const json& gone) mutable {
      json rows = json::array();
      for (const auto& row : all)
        if (matches(pattern, row["name"].get<std::string>()) &&
            (kind.empty() || row["kind"] == kind) && (stage == -2 || row["stage"] == stage))
          rows.push_back(row);
      promise.deliver(json{{"ok", true}, {"actors", rows}, {"unreachable", gone}}.dump());
    });
    return promise;
  }

  if (cmd == "info" || cmd == "trace") {
    if (cmd == "info" && a.size() != 2) return usage("info NAME");
    if (cmd == "trace" && (a.size() < 2 || a.size() > 3)) return usage("trace NAME [SECONDS]");
    double secs = 5;
    if (cmd == "trace" && a.size() == 3) {
      try {
        secs = std::stod(a[2]);
      } catch (const std::exception&) {
        return usage("trace NAME [SECONDS]");
      }
      if (!(secs > 0 && secs <= 60)) return failure("trace: SECONDS must be in (0, 60]", true);
    }
    ConsoleRequest part{{cmd, a[1]}, r.console, false};
    if (cmd == "trace") part.args.push_back(std::to_string(secs));
    Promise promise = self->make_response_promise<std::string>();
    const std::string name = a[1];
    fan_out(
        self, part, timeout + (cmd == "trace" ? secs : 0), [=](std::vector<Part>& parts) mutable {
          for (const auto& p : parts)
            if (p.answer.is_object() && p.answer.value("found", false)) {
              if (!p.answer.contains("trace")) {
                promise.deliver(p.answer.dump());
                return;
              }
              // A peer in another process is known here only by its address: name it
              // from every process's list.
              fan_out(self, {{"actors"}, r.console, false}, timeout,
                      [=, answer = p.answer](std::vector<Part>& lists) mutable {
                        std::map<std::string, std::string> names;
                        for (const auto& row : all_actors(lists))
                          names[row.value("addr", std::string())] = row["name"].get<std::string>();
                        for (auto& t : answer["trace"])
                          if (auto it = names.find(t["peer"].get<std::string>()); it != names.end())
                            t["peer"] = it->second;
                        promise.deliver(answer.dump());
                      });
              return;
            }
          promise.deliver(failure("no actor '" + name + "' (see `actors`)"));
        });
    return promise;
  }

  if (cmd == "stats") {
    if (a.size() != 1) return usage("stats");
    if (!s.setup.metrics) return failure("this run writes no metrics");
    Promise promise = self->make_response_promise<std::string>();
    self->request(s.setup.metrics, model::as_duration(timeout), stats_atom::value)
        .then(
            [=](const std::string& last) mutable {
              promise.deliver(json{{"ok", true}, {"last_step", json::parse(last)}}.dump());
            },
            [=](const caf::error& e) mutable {
              promise.deliver(failure(self->system().render(e)));
            });
    return promise;
  }

  if (cmd == "events") {
    uint64_t since = 0;
    if (a.size() > 2) return usage("events [SINCE]");
    if (a.size() == 2) {
      try {
        since = std::stoull(a[1]);
      } catch (const std::exception&) {
        return usage("events [SINCE]");
      }
    }
    if (!s.setup.metrics) return failure("this run writes no metrics");
    Promise promise = self->make_response_promise<std::string>();
    self->request(s.setup.metrics, model::as_duration(timeout), events_atom::value, since)
        .then(
            [=](const std::string& events) mutable {
              auto out = json::parse(events);
              out["ok"] = true;
              promise.deliver(out.dump());
            },
            [=](const caf::error& e) mutable {
              promise.deliver(failure(self->system().render(e)));
            });
    return promise;
  }

  if (cmd == "config") {
    if (a.size() != 1) return usage("config");
    return json{{"ok", true}, {"config", s.setup.config_toml}}.dump();
  }

  if (cmd == "kill") {
    if (a.size() != 2) return usage("kill PATTERN [--yes]");
    const std::string pattern = a[1];
    const bool yes = r.yes;
    Promise promise = self->make_response_promise<std::string>();
    fan_out(self, {{"actors"}, r.console, false}, timeout, [=](std::vector<Part>& parts) mutable {
      std::map<std::string, std::vector<std::string>> by_process;
      json names = json::array();
      for (const auto& row : all_actors(parts)) {
        const auto name = row["name"].get<std::string>();
        if (!matches(pattern, name) ||
            !supervisors::Roster::killable_kind(row["kind"].get<std::string>()))
          continue;
        by_process[row["node"].get<std::string>()].push_back(name);
        names.push_back(name);
      }
      if (names.empty()) {
        promise.deliver(failure("no actor that can be killed matches '" + pattern +
                                "' (workers, groups, loaders, averagers, the tracker)"));
        return;
      }
      if (names.size() > 1 && !yes) {
        promise.deliver(json{{"ok", false},
                             {"confirm", true},
                             {"matches", names},
                             {"error", "'" + pattern + "' matches " + std::to_string(names.size()) +
                                           " actors; confirm, or pass --yes"}}
                            .dump());
        return;
      }
      record(self, r, from);
      auto g = std::make_shared<std::pair<size_t, json>>(by_process.size(), json::array());
      for (const auto& [process, list] : by_process) {
        ConsoleRequest part{{"kill"}, r.console, false};
        for (const auto& n : list) part.args.push_back(n);
        fan_out(
            self, part, timeout,
            [=](std::vector<Part>& one) mutable {
              for (const auto& p : one)
                if (p.answer.is_object() && p.answer.contains("killed"))
                  for (const auto& k : p.answer["killed"]) g->second.push_back(k);
              if (--g->first == 0)
                promise.deliver(json{{"ok", true}, {"killed", g->second}}.dump());
            },
            process);
      }
    });
    return promise;
  }

  if (cmd == "slow" || cmd == "drop") {
    if (a.size() != 3) return usage(cmd + (cmd == "slow" ? " NAME FACTOR" : " NAME FRACTION"));
    double value = 0;
    try {
      value = std::stod(a[2]);
    } catch (const std::exception&) {
      return usage(cmd + " NAME NUMBER");
    }
    if (cmd == "slow" && !(value >= 1 && value <= 1000))
      return failure("slow: FACTOR must be in [1, 1000]", true);
    if (cmd == "drop" && !(value >= 0 && value < 1))
      return failure("drop: FRACTION must be in [0, 1)", true);
    record(self, r, from);
    Promise promise = self->make_response_promise<std::string>();
    on_actor_process(self, a[1], {{cmd, a[1], a[2]}, r.console, false}, promise, timeout);
    return promise;
  }

  if (cmd == "heal") {
    if (a.size() > 2) return usage("heal [NAME|all]");
    const std::string what = a.size() == 2 ? a[1] : "all";
    record(self, r, from);
    Promise promise = self->make_response_promise<std::string>();
    fan_out(self, {{"heal", what}, r.console, false}, timeout,
            [=](std::vector<Part>& parts) mutable {
              json healed = json::array();
              for (const auto& p : parts)
                if (p.answer.is_object() && p.answer.contains("healed"))
                  for (const auto& h : p.answer["healed"]) healed.push_back(h);
              promise.deliver(json{{"ok", true}, {"healed", healed}}.dump());
            });
    return promise;
  }

  if (cmd == "partition") {
    if (a.size() != 3) return usage("partition NODE_A NODE_B");
    const auto first = find_process(self, a[1]), second = find_process(self, a[2]);
    if (!first.error.empty()) return failure(first.error);
    if (!second.error.empty()) return failure(second.error);
    if (first.label == second.label) return failure("partition: name two different processes");
    record(self, r, from);
    Promise promise = self->make_response_promise<std::string>();
    // Both sides stop sending to the other: the cut holds both ways.
    auto g = std::make_shared<std::pair<int, std::string>>(2, "");
    auto side = [=](const Process& at, const Process& other) mutable {
      fan_out(
          self, {{"partition", other.node_id}, r.console, false}, timeout,
          [=](std::vector<Part>& one) mutable {
            if (one.empty() || !one[0].error.empty() || !one[0].answer.value("ok", false))
              g->second = at.label + ": " +
                          (one.empty()             ? std::string("gone")
                           : !one[0].error.empty() ? one[0].error
                                                   : one[0].answer.value("error", std::string()));
            if (--g->first > 0) return;
            promise.deliver(
                g->second.empty()
                    ? json{{"ok", true}, {"partitioned", {first.label, second.label}}}.dump()
                    : failure("partition: " + g->second));
          },
          at.label);
    };
    side(first, second);
    side(second, first);
    return promise;
  }

  if (cmd == "checkpoint") {
    if (a.size() != 1) return usage("checkpoint");
    auto tracker = s.setup.roster->find("tracker");
    if (!tracker) return failure("this swarm has no step tracker");
    record(self, r, from);
    Promise promise = self->make_response_promise<std::string>();
    // The tracker saves once the open step closes: a step may take a while.
    self->request(*tracker, model::as_duration(messages::kCheckpointWaitS), checkpoint_atom::value)
        .then([=](const std::string& answer) mutable { promise.deliver(answer); },
              [=](const caf::error& e) mutable {
                promise.deliver(failure("checkpoint: " + self->system().render(e)));
              });
    return promise;
  }

  if (cmd == "kill-node" || cmd == "freeze" || cmd == "delay") {
    const size_t want = cmd == "kill-node" ? 2 : 3;
    if (a.size() != want)
      return usage(cmd == "kill-node" ? "kill-node NODE"
                   : cmd == "freeze"  ? "freeze NODE SECONDS"
                                      : "delay NODE MS");
    ConsoleRequest part{{cmd}, r.console, false};
    if (want == 3) {
      double value = 0;
      try {
        value = std::stod(a[2]);
      } catch (const std::exception&) {
        return usage(cmd + " NODE NUMBER");
      }
      if (cmd == "freeze" && !(value > 0 && value <= 600))
        return failure("freeze: SECONDS must be in (0, 600]", true);
      if (cmd == "delay" && !(value >= 0 && value <= 60000))
        return failure("delay: MS must be in [0, 60000]", true);
      part.args.push_back(a[2]);
    }
    const auto target = find_process(self, a[1]);
    if (!target.error.empty()) return failure(target.error);
    const std::string process = target.label;
    record(self, r, from);
    Promise promise = self->make_response_promise<std::string>();
    fan_out(self, part, timeout, deliver_one(promise), process);
    return promise;
  }

  return failure("unknown command '" + cmd + "' (try `help`)", true);
}

}  // namespace swarmrt::actors::console
