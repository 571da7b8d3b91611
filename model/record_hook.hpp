// One record that follows another: when the run's metrics log next writes a record whose
// "event" is `event`, it writes `follow(that record)` right after it, once. A new leader uses
// it to record its recovery with the first step it completes (the step records are the
// tracker's; the takeover is the leader's).
#pragma once

#include <functional>
#include <nlohmann/json.hpp>
#include <string>

namespace swarmrt::model {

void follow_next_record(const std::string& event,
                        std::function<nlohmann::json(const nlohmann::json&)> follow);

}  // namespace swarmrt::model
