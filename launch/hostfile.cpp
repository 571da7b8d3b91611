#include "launch/hostfile.hpp"

#include <fstream>
#include <sstream>

namespace swarmrt::launch {

namespace {
// Host names and IPv4/IPv6 addresses; nothing that starts with '-' or holds shell or ssh syntax.
bool valid_name(const std::string& h) {
  if (h.empty() || h.size() > 253 || h[0] == '-' || h[0] == '.') return false;
  return h.find_first_not_of(
             "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-:_") ==
         std::string::npos;
}
}  // namespace

std::vector<HostEntry> parse_hostfile(const std::string& text, const std::string& origin) {
  std::vector<HostEntry> hosts;
  std::istringstream in(text);
  std::string line;
  for (int number = 1; std::getline(in, line); ++number) {
    if (auto hash = line.find('#'); hash != std::string::npos) line.erase(hash);
    std::istringstream words(line);
    std::string word;
    if (!(words >> word)) continue;
    auto fail = [&](const std::string& why) {
      throw HostfileError(origin + ":" + std::to_string(number) + ": " + why);
    };
    HostEntry e;
    e.host = word;
    // The host becomes ssh's destination: a name or an address, never an option ("-oProxy...").
    if (!valid_name(e.host))
      fail("'" + e.host + "' is not a host name or address (letters, digits, '.', '-', ':', '_')");
    while (words >> word) {
      const auto eq = word.find('=');
      if (eq == std::string::npos || eq == 0 || eq + 1 == word.size())
        fail("'" + word + "' is not key=value");
      const auto key = word.substr(0, eq), value = word.substr(eq + 1);
      auto number_in = [&](long lo, long hi) {
        if (value.find_first_not_of("0123456789") != std::string::npos || value.size() > 6)
          fail(key + "=" + value + " is not a number");
        const long v = std::stol(value);
        if (v < lo || v > hi)
          fail(key + "=" + value + " is out of range " + std::to_string(lo) + ".." +
               std::to_string(hi));
        return v;
      };
      if (key == "workers")
        e.workers = static_cast<uint32_t>(number_in(1, 1000));
      else if (key == "port")
        e.port = static_cast<uint16_t>(number_in(1, 65535));
      else if (key == "user")
        e.user = value;
      else if (key == "identity")
        e.identity = value;
      else if (key == "bin")
        e.bin = value;
      else if (key == "listen")
        e.listen = value;
      else
        fail("unknown key '" + key + "' (workers, port, user, identity, bin, listen)");
    }
    if (e.listen.empty()) e.listen = e.host;
    if (!valid_name(e.listen)) fail("listen=" + e.listen + " is not a host name or address");
    if (!e.user.empty() &&
        (e.user[0] == '-' ||
         e.user.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOP"
                                  "QRSTUVWXYZ0123456789._-") != std::string::npos))
      fail("user=" + e.user + " is not a user name");
    hosts.push_back(std::move(e));
  }
  if (hosts.empty()) throw HostfileError(origin + ": no hosts");
  return hosts;
}

std::vector<HostEntry> load_hostfile(const std::string& path) {
  std::ifstream f(path);
  if (!f) throw HostfileError(path + ": cannot be read");
  std::stringstream text;
  text << f.rdbuf();
  return parse_hostfile(text.str(), path);
}

}  // namespace swarmrt::launch
