// A run's id as it travels in joins and appears on command lines and in logs: 64 bits,
// written as 16 hex digits. The coordinator prints it, launch hands it to nodes, the
// directory names it in a refusal.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace swarmrt::messages {

std::string run_id_text(uint64_t id);
// The id `text` names (hex digits only, not zero), or nothing.
std::optional<uint64_t> parse_run_id(const std::string& text);

}  // namespace swarmrt::messages
