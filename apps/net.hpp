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

#include "credential/cluster_tls.hpp"
#include "credential/endpoint.hpp"
#include "launch/process.hpp"

namespace swarmrt::apps {

// The endpoints (credential/endpoint.hpp), by the short names every command uses.
using credential::host_port_text;
using credential::HostPort;
using credential::is_loopback;
using credential::NetOptions;
using credential::parse_host_port;
using credential::resolve_secret;
using credential::run_dir_secret;
using credential::tcp_port_open;
using credential::TlsFilesGuard;
using launch::AtScopeExit;
using launch::StopSignals;

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

// Loads CAF's middleman with heartbeats on and puts the control plane on mutual TLS: CAF's
// openssl module with a certificate of the cluster CA derived from `secret`
// (credential/cluster_tls.hpp), so a peer without the secret gets no connection, no handle
// and no message through. Bulk planes authenticate with the same secret. The returned files
// must outlive the actor system (CAF reads them per connection). It registers no message
// types: this file is also the console's (apps/front.cpp), which runs without LibTorch.
credential::TlsFiles configure_planes(caf::actor_system_config& cfg, const NetOptions& net,
                                      const std::string& secret, const std::string& name);

// The runtime's actor system (every message type, the scheduler's settings) on the planes
// (net_runtime.cpp).
credential::TlsFiles configure_network(caf::actor_system_config& cfg, const NetOptions& net,
                                       const std::string& secret, const std::string& name);

}  // namespace swarmrt::apps
