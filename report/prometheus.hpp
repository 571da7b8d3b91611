// The Prometheus text format (exposition 0.0.4) of a live swarm, from the console's JSON
// answers (`stats`, `actors`, `nodes`, `events`): what `coordinator --http` serves at
// /metrics. Step, loss, tokens/s, bytes by kind, sync bytes; per actor its mailbox, messages
// handled, busy time and restarts; per node whether it is up; events counted by kind.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace swarmrt::report {

std::string prometheus_text(const nlohmann::json& stats, const nlohmann::json& actors,
                            const nlohmann::json& nodes, const nlohmann::json& events);

}  // namespace swarmrt::report
