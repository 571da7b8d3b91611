#include "actors/runtime/metrics_sink.hpp"

#include "messages/types.hpp"

namespace swarmrt::actors {
using namespace swarmrt::atoms;

caf::behavior metrics_sink(caf::event_based_actor*, model::MetricsLog* log) {
  return {
      [=](metrics_atom, const std::string& line) { log->write(nlohmann::json::parse(line)); },
  };
}

}  // namespace swarmrt::actors
