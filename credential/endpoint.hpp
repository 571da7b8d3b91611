// Where a swarmrt process is reached and what it needs to be let in: HOST:PORT addresses, the
// middleman's timing and the cluster secret as the command line gives them (CAF-free: the
// launcher reads them too, before any actor system exists).
#pragma once

#include <cstdint>
#include <string>

namespace swarmrt::credential {

struct HostPort {
  std::string host;
  uint16_t port = 0;
  bool operator==(const HostPort& o) const { return host == o.host && port == o.port; }
};
// "HOST:PORT" (port 0 allowed where `allow_zero`); throws std::invalid_argument with the reason.
HostPort parse_host_port(const std::string& text, bool allow_zero);
// "HOST:PORT", as parse_host_port reads it.
std::string host_port_text(const HostPort& at);
bool is_loopback(const std::string& host);
// Whether a TCP connection to host:port opens within a second (then closed at once).
bool tcp_port_open(const std::string& host, uint16_t port);

struct NetOptions {
  int64_t heartbeat_ms = 250;            // middleman.heartbeat-interval
  int64_t connection_timeout_ms = 2000;  // middleman.connection-timeout
  std::string secret_file;               // --secret-file, else SWARMRT_SECRET
  std::string secret_on_command_line;    // --secret: refused (it would show in `ps`)
};
// The cluster secret from --secret-file, else SWARMRT_SECRET; empty when neither is given.
// Throws std::invalid_argument with the reason (--secret given, unreadable file).
std::string resolve_secret(const NetOptions& net);
// The secret of a run given none: RUN_DIR/secret when `keep` and it is there, else a new one
// written there (0600). Throws std::runtime_error when the file cannot be read or written.
std::string run_dir_secret(const std::string& run_dir, bool keep);

}  // namespace swarmrt::credential
