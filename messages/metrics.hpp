// A metrics.jsonl record (metrics_atom) as any actor sends it to the run's metrics sink.
#pragma once

#include <caf/all.hpp>
#include <nlohmann/json.hpp>

#include "messages/types.hpp"
#include "model/run_dir.hpp"

namespace swarmrt::messages {

// Stamped here, when it happens, not when the sink gets to it. No sink: nothing is written.
template <class Actor>
void send_metrics(Actor* self, const caf::actor& sink, nlohmann::json record) {
  if (!sink) return;
  record["wall"] = model::wall_clock_s();
  self->send(sink, atoms::metrics_atom::value, record.dump());
}

}  // namespace swarmrt::messages
