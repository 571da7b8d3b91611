#include "report/prometheus.hpp"

#include <cmath>
#include <cstdio>
#include <map>
#include <sstream>

namespace swarmrt::report {
namespace {

// A label value: backslash, quote and newline escaped, as the format asks.
std::string label(const std::string& v) {
  std::string out;
  for (char c : v) {
    if (c == '\\' || c == '"') out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  return out;
}

std::string number(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.10g", v);
  return buf;
}

struct Family {
  std::ostringstream& os;
  Family(std::ostringstream& out, const char* name, const char* type, const char* help) : os(out) {
    os << "# HELP " << name << ' ' << help << "\n# TYPE " << name << ' ' << type << '\n';
  }
};

double value(const nlohmann::json& j, const char* key) {
  auto it = j.find(key);
  return it != j.end() && it->is_number() ? it->get<double>() : NAN;
}

}  // namespace

std::string prometheus_text(const nlohmann::json& stats, const nlohmann::json& actors,
                            const nlohmann::json& nodes, const nlohmann::json& events) {
  std::ostringstream os;
  const auto last = stats.is_object() && stats.contains("last_step") ? stats["last_step"]
                                                                     : nlohmann::json::object();
  auto gauge = [&](const char* name, const char* type, const char* help, const char* key) {
    const double v = last.is_object() ? value(last, key) : NAN;
    if (std::isnan(v)) return;
    Family(os, name, type, help);
    os << name << ' ' << number(v) << '\n';
  };
  gauge("swarmrt_step", "gauge", "the last step the swarm completed", "step");
  gauge("swarmrt_loss", "gauge", "training loss of the last step (nats/token)", "loss");
  gauge("swarmrt_tokens_per_second", "gauge", "tokens/s of the last step", "tokens_per_s");
  gauge("swarmrt_tokens_total", "counter", "tokens trained", "tokens");
  gauge("swarmrt_learning_rate", "gauge", "inner learning rate of the last step", "lr");
  gauge("swarmrt_sync_bytes_step", "gauge", "sync bytes sent in the last step", "sync_bytes");
  gauge("swarmrt_sync_bytes_peak", "gauge", "most sync bytes sent in one step", "peak_sync_bytes");
  if (last.is_object() && last.contains("bytes") && last["bytes"].is_object()) {
    Family(os, "swarmrt_bytes_total", "counter", "bytes sent by this process's actors, by kind");
    for (const auto& [kind, v] : last["bytes"].items())
      if (v.is_number())
        os << "swarmrt_bytes_total{kind=\"" << label(kind) << "\"} " << number(v.get<double>())
           << '\n';
  }
  if (last.is_object() && last.contains("stages") && last["stages"].is_array()) {
    Family(os, "swarmrt_stage_samples_per_second", "gauge", "samples/s of each stage");
    for (const auto& st : last["stages"])
      os << "swarmrt_stage_samples_per_second{stage=\"" << number(value(st, "stage")) << "\"} "
         << number(value(st, "samples_per_s")) << '\n';
  }
  if (last.is_object() && last.contains("spot_checks") && last["spot_checks"].is_object()) {
    const auto& c = last["spot_checks"];
    Family(os, "swarmrt_spot_checks_total", "counter",
           "spot checks of stage work, by outcome (verify.fraction)");
    for (const char* outcome : {"checks", "agreed", "mismatches", "unsettled", "expired"})
      os << "swarmrt_spot_checks_total{outcome=\"" << outcome << "\"} " << number(value(c, outcome))
         << '\n';
    Family(os, "swarmrt_banned_workers", "gauge", "workers a spot check found wrong and banned");
    os << "swarmrt_banned_workers " << number(value(c, "bans")) << '\n';
  }
  const auto rows =
      actors.is_object() && actors.contains("actors") ? actors["actors"] : nlohmann::json::array();
  auto per_actor = [&](const char* name, const char* type, const char* help, const char* key) {
    Family(os, name, type, help);
    for (const auto& row : rows) {
      const double v = value(row, key);
      if (std::isnan(v)) continue;
      os << name << "{name=\"" << label(row.value("name", "")) << "\",kind=\""
         << label(row.value("kind", "")) << "\",node=\"" << label(row.value("node", "")) << "\"} "
         << number(v) << '\n';
    }
  };
  if (!rows.empty()) {
    per_actor("swarmrt_actor_mailbox", "gauge", "messages waiting in the actor's mailbox",
              "mailbox");
    per_actor("swarmrt_actor_messages_total", "counter", "messages the actor handled", "handled");
    per_actor("swarmrt_actor_busy_seconds_total", "counter", "time the actor spent handling",
              "busy_s");
    per_actor("swarmrt_actor_restarts_total", "counter", "restarts of the actor's name",
              "restarts");
    per_actor("swarmrt_worker_samples_per_second", "gauge",
              "a stage worker's measured samples/s (moving average)", "samples_per_s");
  }
  if (nodes.is_object() && nodes.contains("nodes") && nodes["nodes"].is_array()) {
    Family(os, "swarmrt_node_up", "gauge", "1 while the node is part of the swarm");
    for (const auto& n : nodes["nodes"])
      os << "swarmrt_node_up{node=\"" << label(n.value("node", "")) << "\"} "
         << (n.value("alive", false) ? 1 : 0) << '\n';
  }
  if (events.is_object() && events.contains("events") && events["events"].is_array()) {
    std::map<std::string, uint64_t> count;
    for (const auto& e : events["events"]) ++count[e.value("event", "")];
    Family(os, "swarmrt_events", "gauge", "events among the coordinator's recent ones, by kind");
    for (const auto& [event, n] : count)
      os << "swarmrt_events{event=\"" << label(event) << "\"} " << n << '\n';
  }
  return os.str();
}

}  // namespace swarmrt::report
