#include "actors/runtime/metrics_sink.hpp"

#include "messages/types.hpp"

namespace swarmrt::actors {
using namespace swarmrt::atoms;

namespace {

// An event record for the console's `events` (the newest kEvents).
void keep_event(metrics_sink_state& s, nlohmann::json record) {
  if (record.value("event", std::string()).empty()) return;
  record["seq"] = s.events_seen++;
  s.events.push_back(std::move(record));
  if (s.events.size() > metrics_sink_state::kEvents) s.events.pop_front();
}

}  // namespace

caf::behavior metrics_sink(caf::stateful_actor<metrics_sink_state>* self, model::MetricsLog* log) {
  self->state.log = log;
  return {
      [=](metrics_atom, const std::string& line) {
        auto& s = self->state;
        auto record = nlohmann::json::parse(line);
        s.log->write(record);
        if (record.value("event", std::string()) == "step")
          s.last_step = std::move(record);
        else
          keep_event(s, std::move(record));
      },
      // A step record its writer logged itself (before the next step opens: a takeover reads
      // the last one as the step closed last): kept for the console only.
      [=](metrics_atom, const std::string& line, bool /* logged */) {
        self->state.last_step = nlohmann::json::parse(line);
      },
      [=](stats_atom) { return self->state.last_step.dump(); },
      [=](events_atom, uint64_t since) {
        auto& s = self->state;
        nlohmann::json out = {{"next", s.events_seen}, {"events", nlohmann::json::array()}};
        for (const auto& e : s.events)
          if (e["seq"].get<uint64_t>() >= since) out["events"].push_back(e);
        return out.dump();
      },
  };
}

}  // namespace swarmrt::actors
