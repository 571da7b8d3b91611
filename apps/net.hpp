// What the coordinator, node and launch commands share: addresses, the middleman settings
// (heartbeats), the cluster credential and the control plane's mutual TLS, and stopping
// cleanly on SIGINT/SIGTERM.
#pragma once

#include <atomic>
#include <caf/actor.hpp>
#include <caf/actor_system_config.hpp>
#include <chrono>
#include <csignal>
#include <cstdint>
#include <functional>
#include <string>
#include <thread>
#include <utility>

#include "transport/cluster_tls.hpp"

namespace CLI {
class App;
}

namespace swarmrt::apps {

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

// The coordinator's directory over the control plane (mutual TLS). A handshake that spanned
// a heartbeat tick is tried again (CAF 0.17 drops such a connection as timed out, which says
// nothing about the credential; `on_slow` is told the first time), and so is a port not open
// yet when `retry_unreachable`, until `deadline` or `give_up()`. A port that accepts TCP but
// fails the TLS handshake holds another credential: `refused` is set and nothing is retried.
struct Reached {
  caf::actor directory;  // null when not reached
  bool refused = false;
  std::string error;  // what CAF said last
};
Reached reach_coordinator(caf::actor_system& sys, const HostPort& at,
                          std::chrono::steady_clock::time_point deadline, bool retry_unreachable,
                          const std::function<bool()>& give_up,
                          const std::function<void()>& on_slow);

struct NetOptions {
  int64_t heartbeat_ms = 250;            // middleman.heartbeat-interval
  int64_t connection_timeout_ms = 2000;  // middleman.connection-timeout
  std::string secret_file;               // --secret-file, else SWARMRT_SECRET
  std::string secret_on_command_line;    // --secret: refused (it would show in `ps`)
};
void add_net_options(CLI::App& cmd, NetOptions& net);
// The cluster secret from --secret-file, else SWARMRT_SECRET; empty when neither is given.
// Throws std::invalid_argument with the reason (--secret given, unreadable file).
std::string resolve_secret(const NetOptions& net);
// The secret of a run given none: RUN_DIR/secret when `keep` and it is there, else a new one
// written there (0600). Throws std::runtime_error when the file cannot be read or written.
std::string run_dir_secret(const std::string& run_dir, bool keep);

// Registers swarmrt's message types, loads CAF's middleman with heartbeats on, and puts the
// control plane on mutual TLS: CAF's openssl module with a certificate of the cluster CA
// derived from `secret` (transport/cluster_tls.hpp), so a peer without the secret gets no
// connection, no handle and no message through. Bulk planes authenticate with the same
// secret. The returned files must outlive the actor system (CAF reads them per connection).
transport::TlsFiles configure_network(caf::actor_system_config& cfg, const NetOptions& net,
                                      const std::string& secret, const std::string& name);

// Runs `f` when it goes out of scope (clearing what a signal thread may still read).
struct AtScopeExit {
  std::function<void()> f;
  ~AtScopeExit() { f(); }
};

// Removes the TLS files when it goes out of scope (moved, they go with the move).
struct TlsFilesGuard {
  transport::TlsFiles files;
  explicit TlsFilesGuard(transport::TlsFiles f = {}) : files(std::move(f)) {}
  TlsFilesGuard(TlsFilesGuard&& o) noexcept : files(std::exchange(o.files, {})) {}
  TlsFilesGuard& operator=(TlsFilesGuard&&) = delete;
  ~TlsFilesGuard() { transport::remove_cluster_tls(files); }
};

// Blocks SIGINT, SIGTERM and SIGUSR1 in every thread started after it (construct it before the
// actor system) and calls `on_signal` from its own thread when one arrives.
class StopSignals {
 public:
  explicit StopSignals(std::function<void(int)> on_signal);
  ~StopSignals();
  bool fired() const { return fired_; }

 private:
  std::atomic<bool> done_{false};
  std::atomic<bool> fired_{false};
  std::thread thread_;
};

}  // namespace swarmrt::apps
