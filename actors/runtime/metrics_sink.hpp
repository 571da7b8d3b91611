// The metrics sink: the one writer of a run's metrics.jsonl, so records from every actor
// arrive whole and in the order they were sent.
#pragma once

#include <caf/all.hpp>

#include "model/run_dir.hpp"

namespace swarmrt::actors {

// (metrics_atom, json line) appends the line to `log`.
caf::behavior metrics_sink(caf::event_based_actor* self, model::MetricsLog* log);

}  // namespace swarmrt::actors
