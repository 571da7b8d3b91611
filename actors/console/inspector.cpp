#include "actors/console/inspector.hpp"

#include <signal.h>
#include <spawn.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <nlohmann/json.hpp>
#include <thread>

#include "actors/console/internal.hpp"
#include "config/config.hpp"
#include "inspect/probe.hpp"
#include "inspect/process_stats.hpp"
#include "messages/metrics.hpp"
#include "supervisors/entitled.hpp"
#include "transport/bulk.hpp"

extern char** environ;

namespace swarmrt::actors {
using namespace swarmrt::atoms;
using json = nlohmann::json;
using console::failure;
using console::matches;
using console::Self;
using messages::ConsoleRequest;

void NodeBook::put(const Node& node) {
  std::lock_guard<std::mutex> lock(mu_);
  nodes_[node.index] = node;
}

void NodeBook::lost(uint32_t index) {
  std::lock_guard<std::mutex> lock(mu_);
  if (auto it = nodes_.find(index); it != nodes_.end()) it->second.alive = false;
}

std::vector<NodeBook::Node> NodeBook::nodes() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<Node> out;
  for (const auto& [index, node] : nodes_) out.push_back(node);
  return out;
}

void register_inspector(const caf::actor& inspector) {
  inspector->home_system().registry().put(caf::atom("inspector"),
                                          caf::actor_cast<caf::strong_actor_ptr>(inspector));
}

namespace {

const double kTraceMaxS = 60;          // a trace runs at most this long...
const size_t kTraceMaxEntries = 2000;  // ...and keeps at most this many messages

bool is_coordinator(const Self* self) {
  return self->state.setup.coordinator;
}

// "coordinator", or the node's label.
std::string process_label(const Self* self) {
  const auto node = self->state.setup.roster->node();
  return is_coordinator(self) || node.empty() ? std::string("coordinator") : node;
}

caf::actor chaos_of(const Self* self) {
  auto chaos = self->state.setup.roster->find("chaos");
  return chaos ? *chaos : caf::actor{};
}

// name@process on a node, the bare name on the coordinator.
std::string display(const Self* self, const std::string& name) {
  return is_coordinator(self) ? name : name + "@" + process_label(self);
}

json actor_row(const Self* self, const supervisors::RosterEntry& e) {
  json row = {{"name", display(self, e.name)},
              {"addr", caf::to_string(e.handle.address())},
              {"kind", e.kind},
              {"stage", e.stage},
              {"node", process_label(self)},
              {"restarts", e.restarts},
              {"state", "alive"}};
  if (auto* probe = inspect::probe_of(e.handle)) {
    row["mailbox"] = probe->waiting();
    row["handled"] = probe->handled();
    row["busy_s"] = probe->busy_s();
    row["uptime_s"] = probe->uptime_s();
    if (probe->rate() >= 0) row["samples_per_s"] = probe->rate();
  }
  return row;
}

std::optional<supervisors::RosterEntry> find_local(const Self* self, const std::string& name) {
  for (const auto& e : self->state.setup.roster->entries())
    if (e.name == name || display(self, e.name) == name) return e;
  return std::nullopt;
}

// Who an address is, as a trace shows it.
std::string name_of_addr(const Self* self, const caf::actor_addr& addr) {
  if (!addr) return "anonymous";
  for (const auto& e : self->state.setup.roster->entries())
    if (e.handle.address() == addr) return display(self, e.name);
  if (addr == self->address()) return display(self, "inspector");
  return caf::to_string(addr);
}

// Starts `sh -c "sleep S; kill -CONT <pid>"` and then stops this whole process, as SIGSTOP
// from outside would: every thread, heartbeats included, until the child wakes it.
std::string freeze(double seconds, double lead_ms) {
  const std::string cmd =
      "sleep " + std::to_string(seconds) + "; kill -CONT " + std::to_string(getpid());
  const char* argv[] = {"/bin/sh", "-c", cmd.c_str(), nullptr};
  pid_t child = 0;
  if (posix_spawn(&child, "/bin/sh", nullptr, nullptr, const_cast<char**>(argv), environ) != 0)
    return "cannot start the process that would wake this node: not frozen";
  // The answer leaves first; then the process stops.
  std::thread([lead_ms] {
    std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(lead_ms));
    raise(SIGSTOP);
  }).detach();
  return "frozen for " + std::to_string(seconds) + " s";
}

bool entitled_to_change(Self* self) {
  const auto& sender = self->current_sender();
  return supervisors::from_this_process(self) ||
         (sender && sender->node() == self->state.setup.coordinator_node);
}

// ---- this process's part of a command ----------------------------------------------------

using Part = std::optional<caf::result<std::string>>;

// This process's part of the commands that look: proc, actors, info, trace.
Part local_read_part(Self* self, const ConsoleRequest& r) {
  auto& s = self->state;
  const auto& a = r.args;
  const std::string cmd = a.empty() ? "" : a[0];
  if (cmd == "proc") {
    const auto p = inspect::process_stats();
    return json{{"ok", true},
                {"node", process_label(self)},
                {"pid", p.pid},
                {"threads", p.threads},
                {"rss_mb", p.rss_mb},
                {"cpu_s", p.cpu_s},
                {"actors", s.setup.roster->entries().size()},
                {"partitions", transport::partitions()},
                {"partitioned_frames", transport::partitioned_frames()}}
        .dump();
  }
  if (cmd == "actors") {
    json rows = json::array();
    for (const auto& e : s.setup.roster->entries()) rows.push_back(actor_row(self, e));
    return json{{"ok", true}, {"actors", rows}}.dump();
  }
  if (cmd == "info" && a.size() == 2) {
    auto e = find_local(self, a[1]);
    if (!e) return json{{"ok", true}, {"found", false}}.dump();
    json row = actor_row(self, *e);
    // Only these kinds describe themselves; the others are what the probe shows.
    if (e->kind != "worker" && e->kind != "group" && e->kind != "tracker" && e->kind != "balancer")
      return json{{"ok", true}, {"found", true}, {"actor", row}}.dump();
    auto promise = self->make_response_promise<std::string>();
    self->request(e->handle, config::as_duration(s.setup.query_timeout_s / 2), info_atom::value)
        .then(
            [=](const std::string& info) mutable {
              auto out = row;
              out["info"] = json::parse(info);
              promise.deliver(json{{"ok", true}, {"found", true}, {"actor", out}}.dump());
            },
            [=](const caf::error& e) mutable {
              auto out = row;
              out["info_error"] = self->system().render(e);
              promise.deliver(json{{"ok", true}, {"found", true}, {"actor", out}}.dump());
            });
    return promise;
  }
  if (cmd == "trace" && a.size() == 3) {
    auto e = find_local(self, a[1]);
    if (!e) return json{{"ok", true}, {"found", false}}.dump();
    auto* probe = inspect::probe_of(e->handle);
    if (!probe) return failure(a[1] + " cannot be traced");
    const double secs = std::min(std::max(std::stod(a[2]), 0.1), kTraceMaxS);
    probe->start_trace(kTraceMaxEntries,
                       inspect::ActorProbe::Clock::now() +
                           std::chrono::milliseconds(static_cast<int64_t>(secs * 1e3)));
    const auto id = s.next_trace++;
    s.traces[id] = {self->make_response_promise(), display(self, e->name), e->handle};
    self->delayed_send(self, config::as_duration(secs), trace_timer_atom::value, id);
    return s.traces[id].promise;
  }
  // Everything below changes the swarm.
  if (!entitled_to_change(self)) {
    supervisors::rejected(self, "inspector", cmd);
    return failure("rejected: not entitled");
  }
  if (!is_coordinator(self))
    spdlog::warn("console (through the coordinator): {}",
                 fmt::format("{}", fmt::join(a.begin(), a.end(), " ")));
  return std::nullopt;
}

// This process's part of the commands that break: kill, slow, drop, heal, delay, partition,
// kill-node, freeze.
Part local_chaos_part(Self* self, const ConsoleRequest& r) {
  auto& s = self->state;
  const auto& a = r.args;
  const std::string cmd = a.empty() ? "" : a[0];
  if (cmd == "kill" && a.size() >= 2) {
    // The chaos control actor kills them: the same count, log line and fault record as a
    // scheduled kill. The answer lists what it says it killed.
    auto promise = self->make_response_promise<std::string>();
    auto done = std::make_shared<std::pair<size_t, json>>(a.size() - 1, json::array());
    for (size_t i = 1; i < a.size(); ++i) {
      auto e = find_local(self, a[i]);
      auto answered = [=](const std::string& said) mutable {
        if (said.rfind("killed ", 0) == 0) done->second.push_back(display(self, said.substr(7)));
        if (--done->first == 0)
          promise.deliver(json{{"ok", true}, {"killed", done->second}}.dump());
      };
      if (!e) {
        answered("");
        continue;
      }
      self->request(chaos_of(self), config::as_duration(s.setup.query_timeout_s), kill_atom::value,
                    e->name)
          .then(answered, [=](const caf::error&) mutable { answered(""); });
    }
    return promise;
  }
  if (cmd == "slow" && a.size() == 3) {
    auto e = find_local(self, a[1]);
    if (!e || e->kind != "worker") return failure("no worker '" + a[1] + "' here");
    const double factor = std::stod(a[2]);
    self->send(e->handle, slow_atom::value, e->name, factor);
    spdlog::warn("console: {} now computes {}x slower", e->name, factor);
    return json{{"ok", true}, {"slowed", display(self, e->name)}, {"factor", factor}}.dump();
  }
  if (cmd == "drop" && a.size() == 3) {
    auto e = find_local(self, a[1]);
    if (!e || e->kind != "worker") return failure("no worker '" + a[1] + "' here");
    self->send(e->handle, drop_atom::value, std::stod(a[2]));
    spdlog::warn("console: {} now loses {} of the hops it sends", e->name, std::stod(a[2]));
    return json{{"ok", true}, {"dropping", display(self, e->name)}, {"fraction", std::stod(a[2])}}
        .dump();
  }
  if (cmd == "misbehave" && a.size() == 4) {
    auto e = find_local(self, a[1]);
    if (!e || e->kind != "worker") return failure("no worker '" + a[1] + "' here");
    const double scale = std::stod(a[3]);
    self->send(e->handle, misbehave_atom::value, a[2], scale);
    spdlog::warn("console: {} now misbehaves: {} x{}", e->name, a[2], scale);
    return json{
        {"ok", true}, {"misbehaving", display(self, e->name)}, {"kind", a[2]}, {"scale", scale}}
        .dump();
  }
  if (cmd == "heal" && a.size() == 2) {
    json healed = json::array();
    for (const auto& e : s.setup.roster->entries()) {
      if (e.kind != "worker" || (a[1] != "all" && !matches(a[1], display(self, e.name)))) continue;
      self->send(e.handle, slow_atom::value, e.name, 1.0);
      self->send(e.handle, drop_atom::value, 0.0);
      self->send(e.handle, misbehave_atom::value, std::string("none"), 1.0);
      healed.push_back(display(self, e.name));
    }
    if (a[1] == "all") {
      transport::set_link_delay(0);
      if (!transport::partitions().empty()) {
        transport::heal_partitions();
        spdlog::warn("console: partitions healed");
        healed.push_back(process_label(self) + " partitions");
      }
    }
    return json{{"ok", true}, {"healed", healed}}.dump();
  }
  if (cmd == "delay" && a.size() == 2) {
    transport::set_link_delay(std::stod(a[1]));
    return json{{"ok", true}, {"node", process_label(self)}, {"delay_ms", std::stod(a[1])}}.dump();
  }
  if (cmd == "partition" && a.size() == 2) {
    transport::partition_from(a[1]);
    spdlog::warn("console: frames to and from process {} are lost until healed", a[1]);
    return json{{"ok", true}, {"node", process_label(self)}, {"cut_off_from", a[1]}}.dump();
  }
  if (cmd == "kill-node" && a.size() == 1) {
    if (is_coordinator(self)) return failure("the coordinator is not killed from its console");
    // The answer leaves first; the chaos actor then ends the process as a crash would.
    self->delayed_send(
        chaos_of(self),
        std::chrono::duration_cast<std::chrono::milliseconds>(
            std::chrono::duration<double, std::milli>(self->state.setup.answer_lead_ms)),
        kill_atom::value, std::string("node"));
    return json{{"ok", true}, {"killed", process_label(self)}}.dump();
  }
  if (cmd == "kill-coordinator" && a.size() == 1) {
    if (!is_coordinator(self)) return failure("kill-coordinator runs on the coordinator");
    // The answer leaves first; the chaos actor then ends this process as a crash would (the
    // same log line as chaos.kill = "coordinator").
    self->delayed_send(
        chaos_of(self),
        std::chrono::duration_cast<std::chrono::milliseconds>(
            std::chrono::duration<double, std::milli>(self->state.setup.answer_lead_ms)),
        kill_atom::value, std::string("coordinator"));
    return json{{"ok", true}, {"killed", "coordinator (pid " + std::to_string(getpid()) + ")"}}
        .dump();
  }
  if (cmd == "freeze" && a.size() == 2) {
    if (is_coordinator(self)) return failure("the coordinator is not frozen from its console");
    const double secs = std::stod(a[1]);
    return json{{"ok", true},
                {"node", process_label(self)},
                {"result", freeze(secs, self->state.setup.answer_lead_ms)}}
        .dump();
  }
  return std::nullopt;
}

caf::result<std::string> local_part(Self* self, const ConsoleRequest& r) {
  if (auto answer = local_read_part(self, r)) return std::move(*answer);
  if (auto answer = local_chaos_part(self, r)) return std::move(*answer);
  const auto& a = r.args;
  const std::string cmd = a.empty() ? "" : a[0];
  return failure("this process has no part of '" + cmd + "' with " + std::to_string(a.size() - 1) +
                     " argument(s)",
                 true);
}

}  // namespace

caf::behavior inspector(Self* self, InspectorSetup setup) {
  self->state.setup = std::move(setup);
  return {
      [=](inspect_atom, const ConsoleRequest& r) -> caf::result<std::string> {
        try {
          return local_part(self, r);
        } catch (const std::exception& e) {  // a number that does not parse
          return failure(std::string("bad argument: ") + e.what(), true);
        }
      },
      [=](console_atom, const ConsoleRequest& r) -> caf::result<std::string> {
        if (!is_coordinator(self))
          return failure("this is a node's inspector: a console connects to the coordinator");
        return console::run_console_command(self, r);
      },
      [=](timeouts_atom, double query_timeout_s, double answer_lead_ms) {
        if (!supervisors::from_this_process(self)) return;
        self->state.setup.query_timeout_s = query_timeout_s;
        self->state.setup.answer_lead_ms = answer_lead_ms;
      },
      [=](trace_timer_atom, uint64_t id) {
        auto& s = self->state;
        auto it = s.traces.find(id);
        if (it == s.traces.end()) return;
        json entries = json::array();
        if (auto* probe = inspect::probe_of(it->second.target))
          for (const auto& t : probe->take_trace())
            entries.push_back({{"t", t.t},
                               {"dir", t.dir},
                               {"kind", t.kind},
                               {"detail", t.detail},
                               {"peer", name_of_addr(self, t.peer)},
                               {"busy_ms", t.busy_ms}});
        it->second.promise.deliver(json{
            {"ok", true},
            {"found", true},
            {"actor", it->second.name},
            {"trace", entries}}.dump());
        s.traces.erase(it);
      },
  };
}

}  // namespace swarmrt::actors
