#include "report/run_series.hpp"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>

namespace swarmrt::report {
namespace fs = std::filesystem;

namespace {

double number(const nlohmann::json& r, const char* key, double otherwise) {
  auto it = r.find(key);
  return it != r.end() && it->is_number() ? it->get<double>() : otherwise;
}

std::string text(const nlohmann::json& r, const char* key) {
  auto it = r.find(key);
  return it != r.end() && it->is_string() ? it->get<std::string>() : "";
}

}  // namespace

RunSeries read_run(const std::string& path, const std::string& name) {
  const fs::path file = fs::is_directory(path) ? fs::path(path) / "metrics.jsonl" : fs::path(path);
  std::ifstream in(file);
  if (!in)
    throw MetricsError(file.string() + ": cannot be read" +
                       (fs::exists(file) ? "" : " (no such file: is this a run directory?)"));
  RunSeries s;
  s.name = name;
  std::map<int64_t, double> tokens_at;  // tokens trained by the end of each step
  double tokens = 0, last_wall = 0;
  std::vector<std::pair<double, double>> wall_tokens;  // (wall, tokens) after each step
  struct Pending {
    double wall;
    Event event;
  };
  std::vector<Pending> pending;
  static const std::set<std::string> kEvents = {"fault", "recovered", "rejected", "rebalance"};
  std::string line;
  size_t number_of_line = 0;
  while (std::getline(in, line)) {
    ++number_of_line;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    // A line that is no record (a torn last line of a process killed mid-write, or a run
    // read while it writes) is named and skipped: the records around it still plot.
    const std::string where = file.string() + ":" + std::to_string(number_of_line) + ": ";
    nlohmann::json r;
    try {
      r = nlohmann::json::parse(line);
    } catch (const nlohmann::json::exception& e) {
      s.skipped.push_back(where + "not a JSON record (" + e.what() + ")");
      continue;
    }
    if (!r.is_object()) {
      s.skipped.push_back(where + "not a JSON object");
      continue;
    }
    const std::string event = text(r, "event");
    if (event == "step") {
      auto st = r.find("step");
      if (st == r.end() || !st->is_number_integer()) {
        s.skipped.push_back(where + "a step record without a step number");
        continue;
      }
      const int64_t step = st->get<int64_t>();
      // `tokens` is the run's count by the end of the step (a resumed run's too); a record
      // without it is placed at its step number.
      tokens = number(r, "tokens", NAN);
      if (!std::isfinite(tokens)) tokens = static_cast<double>(step);
      // A run resumed from an earlier checkpoint repeats steps: its records replace the
      // superseded ones from there on.
      const auto superseded = [&](const Point& p) { return p.tokens >= tokens; };
      for (auto* v : {&s.loss, &s.tokens_per_s, &s.val_loss, &s.loss_bpb, &s.val_bpb})
        v->erase(std::remove_if(v->begin(), v->end(), superseded), v->end());
      for (auto& [kind, v] : s.bytes)
        v.erase(std::remove_if(v.begin(), v.end(), superseded), v.end());
      tokens_at[step] = tokens;
      if (auto loss = number(r, "loss", NAN); std::isfinite(loss)) s.loss.push_back({tokens, loss});
      if (auto bpb = number(r, "bpb", NAN); std::isfinite(bpb)) s.loss_bpb.push_back({tokens, bpb});
      if (auto tps = number(r, "tokens_per_s", NAN); std::isfinite(tps))
        s.tokens_per_s.push_back({tokens, tps});
      if (auto b = r.find("bytes"); b != r.end() && b->is_object())
        for (const auto& [kind, v] : b->items())
          if (v.is_number()) s.bytes[kind].push_back({tokens, v.get<double>()});
      last_wall = number(r, "wall", last_wall);
      wall_tokens.emplace_back(last_wall, tokens);
    } else if (event == "eval") {
      auto st = r.find("step");
      const double v = number(r, "val_loss", NAN);
      if (st == r.end() || !st->is_number_integer() || !std::isfinite(v)) continue;
      auto at = tokens_at.find(st->get<int64_t>());
      const double when = at != tokens_at.end() ? at->second : tokens;
      s.val_loss.push_back({when, v});
      if (auto bpb = number(r, "val_bpb", NAN); std::isfinite(bpb))
        s.val_bpb.push_back({when, bpb});
    } else if (kEvents.count(event)) {
      std::string what = text(r, "kind");
      const std::string actor = text(r, "actor").empty() ? text(r, "worker") : text(r, "actor");
      if (!actor.empty()) what += (what.empty() ? "" : " ") + actor;
      pending.push_back({number(r, "wall", last_wall), {0, event, what}});
    }
  }
  // An event sits at the tokens of the last step that ended before it.
  for (auto& p : pending) {
    auto it = std::upper_bound(wall_tokens.begin(), wall_tokens.end(), p.wall,
                               [](double w, const auto& wt) { return w < wt.first; });
    p.event.tokens = it == wall_tokens.begin() ? 0 : std::prev(it)->second;
    s.events.push_back(p.event);
  }
  if (s.loss.empty()) {
    std::string why = file.string() + ": no step record: nothing to plot";
    if (!s.skipped.empty())
      why += " (" + std::to_string(s.skipped.size()) +
             " line(s) skipped, the first: " + s.skipped.front() + ")";
    throw MetricsError(why);
  }
  return s;
}

}  // namespace swarmrt::report
