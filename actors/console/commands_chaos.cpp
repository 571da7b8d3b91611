// The console's commands that break things on purpose, to watch the swarm recover: kill, slow,
// drop, misbehave, heal, partition, kill-node, freeze, delay (actors/console/commands.hpp). Each is
// recorded as a `console` event once its words are valid.
#include <algorithm>
#include <nlohmann/json.hpp>

#include "actors/console/commands.hpp"
#include "config/config.hpp"
#include "supervisors/roster.hpp"

namespace swarmrt::actors::console {
using namespace swarmrt::atoms;

Result kill_command(const Call& c) {
  auto* self = c.self;
  const auto& a = c.args;
  if (a.size() != 2) return c.usage();
  const std::string pattern = a[1];
  const bool yes = c.request.yes;
  Promise promise = c.promise();
  fan_out(self, {{"actors"}, c.request.console, false}, c.timeout_s,
          [=](std::vector<Part>& parts) mutable {
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
              promise.deliver(
                  json{{"ok", false},
                       {"confirm", true},
                       {"matches", names},
                       {"error", "'" + pattern + "' matches " + std::to_string(names.size()) +
                                     " actors; confirm, or pass --yes"}}
                      .dump());
              return;
            }
            c.record();
            auto g = std::make_shared<std::pair<size_t, json>>(by_process.size(), json::array());
            for (const auto& [process, list] : by_process) {
              ConsoleRequest part{{"kill"}, c.request.console, false};
              for (const auto& n : list) part.args.push_back(n);
              fan_out(
                  self, part, c.timeout_s,
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

Result slow_or_drop_command(const Call& c) {
  auto* self = c.self;
  const auto& a = c.args;
  const std::string& cmd = a[0];
  if (a.size() != 3) return c.usage();
  double value = 0;
  try {
    value = std::stod(a[2]);
  } catch (const std::exception&) {
    return c.usage();
  }
  if (cmd == "slow" && !(value >= 1 && value <= 1000))
    return failure("slow: FACTOR must be in [1, 1000]", true);
  if (cmd == "drop" && !(value >= 0 && value < 1))
    return failure("drop: FRACTION must be in [0, 1)", true);
  c.record();
  Promise promise = c.promise();
  on_actor_process(self, a[1], {{cmd, a[1], a[2]}, c.request.console, false}, promise, c.timeout_s);
  return promise;
}

// misbehave NAME KIND [SCALE]: checked here, carried out by the worker's process.
Result misbehave_command(const Call& c) {
  auto* self = c.self;
  const auto& a = c.args;
  if (a.size() != 3 && a.size() != 4) return c.usage();
  const std::string& kind = a[2];
  const auto& kinds = config::names<config::Malicious>();
  if (kind != "noise" && std::find(kinds.begin(), kinds.end(), kind) == kinds.end())
    return failure("misbehave: KIND must be sign_flip, scale, random, stale, noise or none, not '" +
                       kind + "'",
                   true);
  double scale = kind == "noise" ? 1.0 : 10.0;
  if (a.size() == 4) {
    try {
      scale = std::stod(a[3]);
    } catch (const std::exception&) {
      return c.usage();
    }
    if (!(scale > 0 && scale <= 1e6)) return failure("misbehave: SCALE must be in (0, 1e6]", true);
  }
  c.record();
  Promise promise = c.promise();
  on_actor_process(self, a[1],
                   {{"misbehave", a[1], kind, std::to_string(scale)}, c.request.console, false},
                   promise, c.timeout_s);
  return promise;
}

Result heal_command(const Call& c) {
  auto* self = c.self;
  const auto& a = c.args;
  if (a.size() > 2) return c.usage();
  const std::string what = a.size() == 2 ? a[1] : "all";
  c.record();
  Promise promise = c.promise();
  fan_out(self, {{"heal", what}, c.request.console, false}, c.timeout_s,
          [=](std::vector<Part>& parts) mutable {
            json healed = json::array();
            for (const auto& p : parts)
              if (p.answer.is_object() && p.answer.contains("healed"))
                for (const auto& h : p.answer["healed"]) healed.push_back(h);
            promise.deliver(json{{"ok", true}, {"healed", healed}}.dump());
          });
  return promise;
}

Result partition_command(const Call& c) {
  auto* self = c.self;
  const auto& a = c.args;
  if (a.size() != 3) return c.usage();
  const auto first = find_process(self, a[1]), second = find_process(self, a[2]);
  if (!first.error.empty()) return failure(first.error);
  if (!second.error.empty()) return failure(second.error);
  if (first.label == second.label) return failure("partition: name two different processes");
  c.record();
  Promise promise = c.promise();
  // Both sides stop sending to the other: the cut holds both ways.
  auto g = std::make_shared<std::pair<int, std::string>>(2, "");
  auto side = [=](const Process& at, const Process& other) mutable {
    fan_out(
        self, {{"partition", other.node_id}, c.request.console, false}, c.timeout_s,
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

Result process_command(const Call& c) {
  auto* self = c.self;
  const auto& a = c.args;
  const std::string& cmd = a[0];
  const size_t want = cmd == "kill-node" ? 2 : 3;
  if (a.size() != want) return c.usage();
  ConsoleRequest part{{cmd}, c.request.console, false};
  if (want == 3) {
    double value = 0;
    try {
      value = std::stod(a[2]);
    } catch (const std::exception&) {
      return c.usage();
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
  c.record();
  Promise promise = c.promise();
  fan_out(self, part, c.timeout_s, deliver_one(promise), process);
  return promise;
}

Result kill_coordinator_command(const Call& c) {
  auto* self = c.self;
  const auto& a = c.args;
  if (a.size() != 1) return c.usage();
  size_t standbys = 0;
  for (const auto& r : coordinator_rows(self)) standbys += r.value("role", "") == "standby";
  if (standbys == 0 && !c.request.yes)
    return json{{"ok", false},
                {"confirm", true},
                {"error",
                 "no standby coordinator: killing this one stops the run until `coordinator "
                 "--resume`; confirm, or pass --yes"}}
        .dump();
  c.record();
  Promise promise = c.promise();
  fan_out(self, {{"kill-coordinator"}, c.request.console, false}, c.timeout_s, deliver_one(promise),
          "coordinator");
  return promise;
}

}  // namespace swarmrt::actors::console
