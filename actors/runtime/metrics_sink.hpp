// The metrics sink: the one writer of a run's metrics.jsonl, so records from every actor
// arrive whole and in the order they were sent. It also keeps what the console shows without
// reading the file back: the last step record and the last events (faults, recoveries,
// rejections, console commands).
#pragma once

#include <caf/all.hpp>
#include <deque>
#include <nlohmann/json.hpp>

#include "model/run_dir.hpp"

namespace swarmrt::actors {

struct metrics_sink_state {
  static constexpr size_t kEvents = 1000;  // events kept for the console
  model::MetricsLog* log = nullptr;
  nlohmann::json last_step;           // the last {"event":"step"} record; null before one
  std::deque<nlohmann::json> events;  // the last kEvents events, oldest first
  uint64_t events_seen = 0;           // events written so far (the console's cursor)
  static inline const char* name = "metrics";
};

//   (metrics_atom, json line)   appends the line to `log`
//   (stats_atom)                -> std::string: the last step record (JSON, null before one)
//   (events_atom, since)        -> std::string: {"next": n, "events": [...]}, the kept events
//                                  numbered >= since, each with its number as "seq"
caf::behavior metrics_sink(caf::stateful_actor<metrics_sink_state>* self, model::MetricsLog* log);

}  // namespace swarmrt::actors
