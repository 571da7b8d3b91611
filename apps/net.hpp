// What the coordinator, node and launch commands share: addresses, the middleman settings
// (heartbeats), the cluster secret, and stopping cleanly on SIGINT/SIGTERM.
#pragma once

#include <atomic>
#include <caf/actor_system_config.hpp>
#include <csignal>
#include <cstdint>
#include <functional>
#include <string>
#include <thread>

namespace CLI {
class App;
}

namespace swarmrt::apps {

struct HostPort {
  std::string host;
  uint16_t port = 0;
};
// "HOST:PORT" (port 0 allowed where `allow_zero`); throws std::invalid_argument with the reason.
HostPort parse_host_port(const std::string& text, bool allow_zero);
bool is_loopback(const std::string& host);

struct NetOptions {
  int64_t heartbeat_ms = 250;            // middleman.heartbeat-interval
  int64_t connection_timeout_ms = 2000;  // middleman.connection-timeout
  std::string secret;                    // --secret, else SWARMRT_SECRET
};
void add_net_options(CLI::App& cmd, NetOptions& net);
// The secret given on the command line, else from SWARMRT_SECRET.
std::string resolve_secret(const NetOptions& net);

// Registers swarmrt's message types and loads CAF's middleman with heartbeats on.
void configure_network(caf::actor_system_config& cfg, const NetOptions& net);

// Blocks SIGINT and SIGTERM in every thread started after it (construct it before the actor
// system) and calls `on_signal` from its own thread when one arrives.
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
