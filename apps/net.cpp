#include "apps/net.hpp"

#include <spdlog/spdlog.h>
#include <unistd.h>
#include <caf/io/middleman.hpp>
#include <caf/openssl/manager.hpp>
#include <caf/openssl/remote_actor.hpp>
#include <cstdlib>
#include <stdexcept>

#include "credential/credential.hpp"

namespace swarmrt::apps {

Reached reach_coordinator(caf::actor_system& sys, const HostPort& at,
                          std::chrono::steady_clock::time_point deadline, bool retry_unreachable,
                          const std::function<bool()>& give_up,
                          const std::function<void()>& on_slow) {
  Reached out;
  bool slow_told = false;
  for (;;) {
    auto found = caf::openssl::remote_actor(sys, at.host, at.port);
    if (found) {
      out.directory = *found;
      return out;
    }
    out.error = sys.render(found.error());
    // CAF 0.17's heartbeat tick drops a connection whose BASP handshake has not arrived yet
    // (its last-seen time is still zero) and reports connection_timeout: on a slow link, or
    // while either side is busy, the handshake spans a tick.
    if (found.error() == caf::sec::connection_timeout) {
      if (!slow_told && on_slow) on_slow();
      slow_told = true;
    } else if (out.error.find("ip_connect failed") == std::string::npos &&
               tcp_port_open(at.host, at.port)) {
      // A TCP connect that failed says nothing about the credential, even when the port is
      // open a moment later (the coordinator was still starting): only this is a refusal.
      out.refused = true;
      return out;
    } else if (!retry_unreachable) {
      return out;
    }
    if ((give_up && give_up()) || std::chrono::steady_clock::now() > deadline) return out;
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
}

credential::TlsFiles configure_planes(caf::actor_system_config& cfg, const NetOptions& net,
                                      const std::string& secret, const std::string& name) {
  cfg.load<caf::io::middleman>();
  // Mutual TLS on the control plane. With certificate, key and CA file set, CAF's openssl
  // module requires and verifies a certificate on both sides (unset, it would fall back to
  // anonymous ciphers that authenticate no one).
  auto files = credential::write_cluster_tls(secret, name);
  cfg.load<caf::openssl::manager>();
  cfg.openssl_certificate = files.cert;
  cfg.openssl_key = files.key;
  cfg.openssl_cafile = files.ca;
  credential::set_cluster_secret(secret);
  cfg.set("middleman.heartbeat-interval",
          caf::timespan{std::chrono::milliseconds(net.heartbeat_ms)});
  cfg.set("middleman.connection-timeout",
          caf::timespan{std::chrono::milliseconds(net.connection_timeout_ms)});
  // Nodes reach each other's actors through the coordinator's connection (BASP routes them);
  // only small control messages take that path, since tensor bytes go on the frame link
  // directly. CAF's automatic direct connections were left off: in one of about twenty runs
  // a message between two nodes was lost while such a connection came up.
  cfg.set("middleman.enable-automatic-connections", false);
  return files;
}

}  // namespace swarmrt::apps
