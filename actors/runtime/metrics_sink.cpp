#include "actors/runtime/metrics_sink.hpp"

#include "messages/types.hpp"

namespace swarmrt::actors {
using namespace swarmrt::atoms;

caf::behavior metrics_sink(caf::stateful_actor<metrics_sink_state>* self, model::MetricsLog* log) {
  self->state.log = log;
  return {
      [=](metrics_atom, const std::string& line) {
        auto& s = self->state;
        auto record = nlohmann::json::parse(line);
        s.log->write(record);
        const auto event = record.value("event", std::string());
        if (event == "step") {
          s.last_step = std::move(record);
        } else if (!event.empty()) {
          record["seq"] = s.events_seen++;
          s.events.push_back(std::move(record));
          if (s.events.size() > metrics_sink_state::kEvents) s.events.pop_front();
        }
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
