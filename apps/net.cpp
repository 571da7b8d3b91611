#include "apps/net.hpp"

#include <filesystem>

#include <netdb.h>
#include <poll.h>
#include <pthread.h>
#include <spdlog/spdlog.h>
#include <sys/socket.h>
#include <unistd.h>
#include <CLI/CLI.hpp>
#include <caf/io/middleman.hpp>
#include <caf/openssl/manager.hpp>
#include <caf/openssl/remote_actor.hpp>
#include <cstdlib>
#include <stdexcept>

#include "actors/runtime/runtime.hpp"
#include "transport/credential.hpp"

namespace swarmrt::apps {

std::string host_port_text(const HostPort& at) {
  return at.host + ":" + std::to_string(at.port);
}

HostPort parse_host_port(const std::string& text, bool allow_zero) {
  const auto colon = text.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == text.size())
    throw std::invalid_argument("'" + text + "' is not HOST:PORT");
  HostPort out;
  out.host = text.substr(0, colon);
  const auto port_text = text.substr(colon + 1);
  if (port_text.find_first_not_of("0123456789") != std::string::npos || port_text.size() > 5)
    throw std::invalid_argument("'" + port_text + "' in '" + text + "' is not a port number");
  const long port = std::stol(port_text);
  if (port > 65535 || (port == 0 && !allow_zero))
    throw std::invalid_argument("port " + port_text + " in '" + text + "' is out of range");
  out.port = static_cast<uint16_t>(port);
  return out;
}

bool is_loopback(const std::string& host) {
  return host == "127.0.0.1" || host == "localhost" || host == "::1";
}

bool tcp_port_open(const std::string& host, uint16_t port) {
  addrinfo hints{}, *res = nullptr;
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  if (getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &res) != 0 || !res)
    return false;
  bool open = false;
  const int fd = socket(res->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd >= 0) {
    if (connect(fd, res->ai_addr, res->ai_addrlen) == 0) {
      open = true;
    } else if (errno == EINPROGRESS) {
      pollfd p{fd, POLLOUT, 0};
      int err = 0;
      socklen_t len = sizeof(err);
      open = poll(&p, 1, 1000) == 1 && getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) == 0 &&
             err == 0;
    }
    close(fd);
  }
  freeaddrinfo(res);
  return open;
}

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

void add_net_options(CLI::App& cmd, NetOptions& net) {
  cmd.add_option("--heartbeat-ms", net.heartbeat_ms,
                 "middleman heartbeat interval in ms (a frozen peer is noticed by its absence)")
      ->check(CLI::Range(int64_t{10}, int64_t{60000}));
  cmd.add_option("--connection-timeout-ms", net.connection_timeout_ms,
                 "drop a peer silent for this long, in ms")
      ->check(CLI::Range(int64_t{50}, int64_t{600000}));
  cmd.add_option("--secret-file", net.secret_file,
                 "file holding the cluster secret, first line (default: $SWARMRT_SECRET)");
  cmd.add_option("--secret", net.secret_on_command_line,
                 "refused: a secret on a command line shows in every process list; use "
                 "--secret-file or SWARMRT_SECRET");
}

std::string resolve_secret(const NetOptions& net) {
  if (!net.secret_on_command_line.empty())
    throw std::invalid_argument(
        "--secret is refused: a secret on a command line shows in every process list "
        "(ps, /proc); give it as --secret-file FILE or in SWARMRT_SECRET");
  if (!net.secret_file.empty()) {
    std::string warning;
    try {
      auto secret = transport::read_secret_file(net.secret_file, &warning);
      if (!warning.empty()) spdlog::warn("{}", warning);
      return secret;
    } catch (const std::runtime_error& e) {
      throw std::invalid_argument(e.what());
    }
  }
  const char* env = std::getenv("SWARMRT_SECRET");
  return env ? env : "";
}

std::string run_dir_secret(const std::string& run_dir, bool keep) {
  const std::string path = (std::filesystem::path(run_dir) / "secret").string();
  if (keep && std::filesystem::exists(path)) return transport::read_secret_file(path);
  auto secret = transport::generate_secret();
  transport::write_secret_file(path, secret);
  return secret;
}

transport::TlsFiles configure_network(caf::actor_system_config& cfg, const NetOptions& net,
                                      const std::string& secret, const std::string& name) {
  actors::configure_actor_system(cfg);
  cfg.load<caf::io::middleman>();
  // Mutual TLS on the control plane. With certificate, key and CA file set, CAF's openssl
  // module requires and verifies a certificate on both sides (unset, it would fall back to
  // anonymous ciphers that authenticate no one).
  auto files = transport::write_cluster_tls(secret, name);
  cfg.load<caf::openssl::manager>();
  cfg.openssl_certificate = files.cert;
  cfg.openssl_key = files.key;
  cfg.openssl_cafile = files.ca;
  transport::set_cluster_secret(secret);
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

namespace {
// Threads that libraries start before main (OpenBLAS's pool) cannot have the signals blocked,
// so a signal may land on any thread: the handler only writes its number to a pipe, and the
// watcher thread reads it there.
int g_signal_pipe[2] = {-1, -1};
void on_stop_signal(int sig) {
  const unsigned char b = static_cast<unsigned char>(sig);
  [[maybe_unused]] auto n = write(g_signal_pipe[1], &b, 1);
}
}  // namespace

StopSignals::StopSignals(std::function<void(int)> on_signal) {
  if (g_signal_pipe[0] < 0 && pipe(g_signal_pipe) != 0)
    throw std::runtime_error("cannot create the signal pipe");
  struct sigaction sa {};
  sa.sa_handler = on_stop_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  // A scheduler's warning before the time limit (Slurm's --signal=USR1@SECONDS).
  sigaction(SIGUSR1, &sa, nullptr);
  // Threads started from here on (CAF's, torch's) keep the signals blocked; the watcher
  // unblocks them for itself.
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGUSR1);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  thread_ = std::thread([this, set, on_signal = std::move(on_signal)] {
    pthread_sigmask(SIG_UNBLOCK, &set, nullptr);
    while (!done_) {
      pollfd p{g_signal_pipe[0], POLLIN, 0};
      if (poll(&p, 1, 100) <= 0) continue;
      unsigned char sig = 0;
      if (read(g_signal_pipe[0], &sig, 1) == 1) {
        fired_ = true;
        on_signal(sig);
      }
    }
  });
}

StopSignals::~StopSignals() {
  done_ = true;
  thread_.join();
}

}  // namespace swarmrt::apps
