// The launcher's hostfile: one node per line, `#` starts a comment.
//
//   HOST [workers=N] [port=SSH_PORT] [user=USER] [identity=KEY_FILE] [bin=PATH] [listen=ADDR]
//
// HOST is what ssh connects to. `bin` is swarmrt's path on that host (default: this
// executable's path), `listen` the address other nodes reach it on (default: HOST).
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

namespace swarmrt::launch {

struct HostEntry {
  std::string host;
  uint32_t workers = 1;
  uint16_t port = 22;
  std::string user;
  std::string identity;
  std::string bin;
  std::string listen;
};

struct HostfileError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Throws HostfileError naming the file, the line and what is wrong with it.
std::vector<HostEntry> parse_hostfile(const std::string& text, const std::string& origin);
std::vector<HostEntry> load_hostfile(const std::string& path);

}  // namespace swarmrt::launch
