#include "config/fingerprint.hpp"

#include <cstdio>
#include <map>
#include <set>
#include <sstream>

namespace swarmrt::config {
namespace {

std::map<std::string, std::string> shared_keys(const std::string& text) {
  std::map<std::string, std::string> out;
  std::istringstream in(text);
  std::string line, section;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    if (line.front() == '[') {
      section = line.substr(1, line.find(']') - 1);
      continue;
    }
    const auto eq = line.find(" = ");
    if (eq == std::string::npos) continue;
    const std::string key = section + "." + line.substr(0, eq);
    if (!is_shared_key(key)) continue;  // each node sets it for itself (config/config.cpp)
    out[key] = line.substr(eq + 3);
  }
  return out;
}

}  // namespace

std::string fingerprint_text(const RunConfig& config) {
  std::ostringstream out;
  out << "protocol = " << kProtocolVersion << "\n";
  for (const auto& [key, value] : shared_keys(to_toml(config)))
    out << key << " = " << value << "\n";
  return out.str();
}

std::string fingerprint(const RunConfig& config) {
  uint64_t h = 1469598103934665603ull;  // FNV-1a
  for (unsigned char c : fingerprint_text(config)) h = (h ^ c) * 1099511628211ull;
  char buf[17];
  std::snprintf(buf, sizeof(buf), "%016llx", static_cast<unsigned long long>(h));
  return buf;
}

std::vector<std::string> fingerprint_mismatch(const std::string& mine, const std::string& theirs) {
  auto parse = [](const std::string& text) {
    std::map<std::string, std::string> kv;
    std::istringstream in(text);
    std::string line;
    while (std::getline(in, line))
      if (auto eq = line.find(" = "); eq != std::string::npos)
        kv[line.substr(0, eq)] = line.substr(eq + 3);
    return kv;
  };
  const auto a = parse(mine), b = parse(theirs);
  std::vector<std::string> out;
  for (const auto& [key, value] : a) {
    auto it = b.find(key);
    if (it == b.end())
      out.push_back(key + ": " + value + " here, missing there");
    else if (it->second != value)
      out.push_back(key + ": " + value + " here, " + it->second + " there");
  }
  for (const auto& [key, value] : b)
    if (!a.count(key)) out.push_back(key + ": missing here, " + value + " there");
  return out;
}

}  // namespace swarmrt::config
