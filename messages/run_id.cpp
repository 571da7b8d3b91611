#include "messages/run_id.hpp"

#include <cstdio>

namespace swarmrt::messages {

std::string run_id_text(uint64_t id) {
  char hex[17];
  std::snprintf(hex, sizeof(hex), "%016llx", static_cast<unsigned long long>(id));
  return hex;
}

std::optional<uint64_t> parse_run_id(const std::string& text) {
  if (text.empty() || text.size() > 16 ||
      text.find_first_not_of("0123456789abcdefABCDEF") != std::string::npos)
    return std::nullopt;
  const uint64_t id = std::stoull(text, nullptr, 16);
  if (id == 0) return std::nullopt;
  return id;
}

}  // namespace swarmrt::messages
