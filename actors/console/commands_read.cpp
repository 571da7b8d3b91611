// The console's commands that look and change nothing: nodes, actors, info, trace, stats,
// events, config (actors/console/commands.hpp).
#include <nlohmann/json.hpp>

#include "actors/console/commands.hpp"
#include "config/config.hpp"
#include "messages/metrics.hpp"

namespace swarmrt::actors::console {
using namespace swarmrt::atoms;

Result nodes_command(const Call& c) {
  auto* self = c.self;
  auto& s = self->state;
  const auto& a = c.args;
  if (a.size() != 1) return c.usage();
  // The label of a process known by its node id (a partition's other side).
  std::map<std::string, std::string> labels{{caf::to_string(self->node()), "coordinator"}};
  for (const auto& n : s.setup.nodes->nodes())
    if (n.inspector) labels[caf::to_string(n.inspector.node())] = label(n);
  auto label_of = [labels](const json& id) {
    auto it = labels.find(id.get<std::string>());
    return it == labels.end() ? id.get<std::string>() : it->second;
  };
  const json coordinators = coordinator_rows(self);
  Promise promise = c.promise();
  fan_out(
      self, {{"proc"}, c.request.console, false}, c.timeout_s,
      [=](std::vector<Part>& parts) mutable {
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
        promise.deliver(json{{"ok", true}, {"nodes", rows}, {"coordinators", coordinators}}.dump());
      });
  return promise;
}

Result actors_command(const Call& c) {
  auto* self = c.self;
  const auto& a = c.args;
  std::string pattern = "*", kind;
  int64_t stage = -2;
  for (size_t i = 1; i < a.size(); ++i) {
    if (a[i] == "--stage" && i + 1 < a.size()) {
      try {
        stage = std::stoll(a[++i]);
      } catch (const std::exception&) {
        return c.usage();
      }
    } else if (a[i] == "--kind" && i + 1 < a.size()) {
      kind = a[++i];
    } else if (pattern == "*" && a[i].rfind("--", 0) != 0) {
      pattern = a[i];
    } else {
      return c.usage();
    }
  }
  Promise promise = c.promise();
  shared_actors(
      self, c.request.console, c.timeout_s, [=](const json& all, const json& gone) mutable {
        json rows = json::array();
        for (const auto& row : all)
          if (matches(pattern, row["name"].get<std::string>()) &&
              (kind.empty() || row["kind"] == kind) && (stage == -2 || row["stage"] == stage))
            rows.push_back(row);
        promise.deliver(json{{"ok", true}, {"actors", rows}, {"unreachable", gone}}.dump());
      });
  return promise;
}

Result info_or_trace_command(const Call& c) {
  auto* self = c.self;
  const auto& a = c.args;
  const std::string& cmd = a[0];
  if (cmd == "info" && a.size() != 2) return c.usage();
  if (cmd == "trace" && (a.size() < 2 || a.size() > 3)) return c.usage();
  double secs = 5;
  if (cmd == "trace" && a.size() == 3) {
    try {
      secs = std::stod(a[2]);
    } catch (const std::exception&) {
      return c.usage();
    }
    if (!(secs > 0 && secs <= 60)) return failure("trace: SECONDS must be in (0, 60]", true);
  }
  ConsoleRequest part{{cmd, a[1]}, c.request.console, false};
  if (cmd == "trace") part.args.push_back(std::to_string(secs));
  Promise promise = c.promise();
  const std::string name = a[1];
  fan_out(
      self, part, c.timeout_s + (cmd == "trace" ? secs : 0), [=](std::vector<Part>& parts) mutable {
        for (const auto& p : parts)
          if (p.answer.is_object() && p.answer.value("found", false)) {
            if (!p.answer.contains("trace")) {
              promise.deliver(p.answer.dump());
              return;
            }
            // A peer in another process is known here only by its address: name it
            // from every process's list.
            fan_out(self, {{"actors"}, c.request.console, false}, c.timeout_s,
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

Result stats_command(const Call& c) {
  auto* self = c.self;
  auto& s = self->state;
  const auto& a = c.args;
  if (a.size() != 1) return c.usage();
  if (!s.setup.metrics) return failure("this run writes no metrics");
  Promise promise = c.promise();
  self->request(s.setup.metrics, config::as_duration(c.timeout_s), stats_atom::value)
      .then(
          [=](const std::string& last) mutable {
            promise.deliver(json{{"ok", true}, {"last_step", json::parse(last)}}.dump());
          },
          [=](const caf::error& e) mutable { promise.deliver(failure(self->system().render(e))); });
  return promise;
}

Result events_command(const Call& c) {
  auto* self = c.self;
  auto& s = self->state;
  const auto& a = c.args;
  uint64_t since = 0;
  if (a.size() > 2) return c.usage();
  if (a.size() == 2) {
    try {
      since = std::stoull(a[1]);
    } catch (const std::exception&) {
      return c.usage();
    }
  }
  if (!s.setup.metrics) return failure("this run writes no metrics");
  Promise promise = c.promise();
  self->request(s.setup.metrics, config::as_duration(c.timeout_s), events_atom::value, since)
      .then(
          [=](const std::string& events) mutable {
            auto out = json::parse(events);
            out["ok"] = true;
            promise.deliver(out.dump());
          },
          [=](const caf::error& e) mutable { promise.deliver(failure(self->system().render(e))); });
  return promise;
}

Result config_command(const Call& c) {
  auto& s = c.self->state;
  const auto& a = c.args;
  if (a.size() != 1) return c.usage();
  return json{{"ok", true}, {"config", s.setup.config_toml}}.dump();
}

}  // namespace swarmrt::actors::console
