#include "apps/ctl_format.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "messages/console_commands.hpp"

namespace swarmrt::apps::ctl {
using json = nlohmann::json;

std::string help_text(const std::string& command) {
  std::string out;
  for (const auto& c : messages::console_commands()) {
    if (!command.empty() && c.name != command) continue;
    out += fmt::format("  {:<44} {}{}\n", c.usage, c.help,
                       c.destructive ? " [changes the swarm]" : "");
  }
  return out;
}

namespace {

std::string str(const json& v) {
  if (v.is_null()) return "-";
  if (v.is_string()) return v.get<std::string>();
  if (v.is_number_float()) return fmt::format("{:.3f}", v.get<double>());
  return v.dump();
}

std::string actors_table(const json& rows) {
  std::string out =
      fmt::format("{:<28} {:<10} {:>5} {:<12} {:>7} {:>9} {:>9} {:>8} {:>9}\n", "NAME", "KIND",
                  "STAGE", "NODE", "MAILBOX", "HANDLED", "BUSY_S", "RESTARTS", "UPTIME_S");
  for (const auto& r : rows)
    out += fmt::format("{:<28} {:<10} {:>5} {:<12} {:>7} {:>9} {:>9.2f} {:>8} {:>9.1f}\n",
                       str(r["name"]), str(r["kind"]),
                       r["stage"].get<int64_t>() < 0 ? "-" : str(r["stage"]), str(r["node"]),
                       r.value("mailbox", 0), r.value("handled", 0), r.value("busy_s", 0.0),
                       r.value("restarts", 0), r.value("uptime_s", 0.0));
  return out;
}

std::string fields(const json& obj, const std::string& indent) {
  std::string out;
  for (const auto& [k, v] : obj.items()) {
    if (v.is_object()) {
      out += fmt::format("{}{}:\n{}", indent, k, fields(v, indent + "  "));
    } else {
      out += fmt::format("{}{:<22} {}\n", indent, k + ":", str(v));
    }
  }
  return out;
}

}  // namespace

std::string render_top(const json& actors, size_t rows) {
  std::vector<json> list(actors.begin(), actors.end());
  std::sort(list.begin(), list.end(), [](const json& a, const json& b) {
    const auto ma = a.value("mailbox", 0), mb = b.value("mailbox", 0);
    if (ma != mb) return ma > mb;
    return a.value("busy_s", 0.0) > b.value("busy_s", 0.0);
  });
  if (list.size() > rows) list.resize(rows);
  return actors_table(json(list));
}

std::string render(const std::vector<std::string>& args, const json& a) {
  const std::string cmd = args.empty() ? "" : args[0];
  if (cmd == "nodes") {
    std::string out =
        fmt::format("{:<12} {:<24} {:<6} {:>7} {:>8} {:>7} {:>8} {:>8}  {}\n", "NODE", "NAME",
                    "ALIVE", "WORKERS", "PID", "THREADS", "RSS_MB", "CPU_S", "PARTITIONED_FROM");
    for (const auto& n : a["nodes"]) {
      std::string cut;
      for (const auto& p : n.value("partitioned_from", json::array()))
        cut += (cut.empty() ? "" : ",") + p.get<std::string>();
      out += fmt::format("{:<12} {:<24} {:<6} {:>7} {:>8} {:>7} {:>8} {:>8}  {}\n", str(n["node"]),
                         str(n["name"]), n["alive"].get<bool>() ? "yes" : "no", str(n["workers"]),
                         str(n.value("pid", json())), str(n.value("threads", json())),
                         str(n.value("rss_mb", json())), str(n.value("cpu_s", json())),
                         cut.empty() ? "-" : cut);
    }
    // The coordinator replicas: which leads, under which epoch, and the standbys behind it.
    const auto coordinators = a.value("coordinators", json::array());
    if (!coordinators.empty()) {
      out += fmt::format("\n{:<12} {:>6} {:>8}  {:<22} {}\n", "COORDINATOR", "EPOCH", "PID",
                         "ADDRESS", "HOST");
      for (const auto& c : coordinators)
        out += fmt::format("{:<12} {:>6} {:>8}  {:<22} {}\n", str(c["role"]),
                           c.value("epoch", json()).is_null() ? "-" : str(c["epoch"]),
                           str(c.value("pid", json())), str(c.value("address", json("-"))),
                           str(c.value("host", json("-"))));
    }
    return out;
  }
  if (cmd == "actors" || cmd == "top") {
    std::string out = cmd == "top" ? render_top(a["actors"], 30) : actors_table(a["actors"]);
    for (const auto& u : a.value("unreachable", json::array()))
      out += fmt::format("({} did not answer: {})\n", str(u["node"]), str(u["error"]));
    return out;
  }
  if (cmd == "info") return fields(a["actor"], "");
  if (cmd == "trace") {
    std::string out = fmt::format("trace of {}: {} messages\n", str(a["actor"]), a["trace"].size());
    for (const auto& t : a["trace"]) {
      const bool in = t["dir"] == "in";
      out += fmt::format("  {:>8.3f}s {:<3} {:<12} {:<36} {} {}{}\n", t["t"].get<double>(),
                         str(t["dir"]), str(t["kind"]), str(t["detail"]), in ? "from" : "to",
                         str(t["peer"]),
                         in ? fmt::format(" ({:.2f} ms)", t["busy_ms"].get<double>()) : "");
    }
    return out;
  }
  if (cmd == "stats" || cmd == "watch") {
    const auto& s = a["last_step"];
    if (s.is_null()) return "no step has completed yet\n";
    // Bits per byte where the run knows them (null where the text's size is unknown).
    const auto bpb = s.find("bpb");
    const std::string in_bits = bpb != s.end() && bpb->is_number()
                                    ? fmt::format(" ({:.4f} bits/byte)", bpb->get<double>())
                                    : "";
    std::string out = fmt::format("step {} | loss {:.4f}{} | {:.0f} tokens/s | {:.1f} s\n",
                                  str(s["step"]), s.value("loss", 0.0), in_bits,
                                  s.value("tokens_per_s", 0.0), s.value("time_s", 0.0));
    for (const auto& st : s.value("stages", json::array()))
      out += fmt::format("  stage {}: {:.1f} samples/s\n", str(st["stage"]),
                         st.value("samples_per_s", 0.0));
    // swarm.compression = auto: each link's encoding (a sparse round's density: "topk 4%"),
    // its measured rate and the compute it hides under.
    for (const auto& h : s.value("hop_encodings", json::array()))
      out += fmt::format("  {} of worker {} to {}: {} ({:.1f} Mbit/s, {:.1f} ms of compute)\n",
                         str(h["encoding"]).rfind("topk", 0) == 0 ? "rounds" : "hops",
                         str(h["worker"]), str(h["to"]), str(h["encoding"]), h.value("mbit_s", 0.0),
                         h.value("compute_ms", 0.0));
    if (s.contains("bytes")) {
      out += "  bytes sent:";
      for (const auto& [kind, n] : s["bytes"].items())
        out += fmt::format(" {} {:.2f} MB", kind, n.get<double>() / 1e6);
      out += "\n";
    }
    if (s.contains("sync_bytes"))
      out +=
          fmt::format("  sync bytes: {:.3f} MB this step, {:.3f} MB at most in one step\n",
                      s["sync_bytes"].get<double>() / 1e6, s.value("peak_sync_bytes", 0.0) / 1e6);
    return out;
  }
  if (cmd == "events") {
    std::string out;
    for (const auto& e : a["events"]) {
      json rest = e;
      for (const auto* k : {"seq", "event", "wall"}) rest.erase(k);
      out += fmt::format("{:>5} {:<10} {}\n", str(e["seq"]), str(e["event"]), rest.dump());
    }
    return out;
  }
  if (cmd == "config") return a["config"].get<std::string>();
  if (cmd == "checkpoint")
    return fmt::format("checkpoint of step {}: {} ({} workers)\n", str(a["step"]), str(a["path"]),
                       str(a["workers"]));
  if (cmd == "partition")
    return fmt::format("{} and {} are partitioned: frames between them are lost until `heal all`\n",
                       str(a["partitioned"][0]), str(a["partitioned"][1]));
  json rest = a;
  rest.erase("ok");
  return rest.dump() + "\n";
}

}  // namespace swarmrt::apps::ctl
