// swarmrt launch --from-env --config FILE [--out DIR] [--resume]
// One command for every task of a job a cluster scheduler started (srun, a Kubernetes
// Indexed Job, torchrun or Kubeflow): rank 0 becomes the coordinator, every other rank a node
// with one worker per CPU (or GPU) of its task, joining rank 0's address. The process execs
// `swarmrt coordinator` or `swarmrt node`, so the scheduler's signals reach it directly.
#include "launch/from_env.hpp"

#include <arpa/inet.h>
#include <netdb.h>
#include <poll.h>
#include <spdlog/spdlog.h>
#include <unistd.h>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "credential/endpoint.hpp"
#include "launch/cluster_env.hpp"
#include "launch/process.hpp"
#include "messages/run_id.hpp"

namespace swarmrt::launch {
namespace {

// The first IPv4 address `host` resolves to; empty when it resolves to none.
std::string resolve_ipv4(const std::string& host) {
  addrinfo hints{}, *res = nullptr;
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  if (getaddrinfo(host.c_str(), nullptr, &hints, &res) != 0 || !res) return "";
  char text[INET_ADDRSTRLEN] = {0};
  const auto* a = reinterpret_cast<const sockaddr_in*>(res->ai_addr);
  inet_ntop(AF_INET, &a->sin_addr, text, sizeof(text));
  freeaddrinfo(res);
  return text;
}

bool loopback_ipv4(const std::string& ip) {
  return ip.rfind("127.", 0) == 0;
}

// Slurm's own reading of a node list, where scontrol is installed; else the built-in one.
std::string scontrol_first_host(const std::string& nodelist) {
  try {
    Child c("scontrol", {"scontrol", "show", "hostnames", nodelist});
    std::vector<std::string> lines;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (c.running() && std::chrono::steady_clock::now() < deadline) {
      for (auto& l : c.read_lines()) lines.push_back(l);
      pollfd p{c.fd(), POLLIN, 0};
      poll(&p, c.fd() >= 0 ? 1 : 0, 50);
    }
    for (auto& l : c.read_lines()) lines.push_back(l);
    if (c.running()) c.signal(SIGKILL);
    if (c.poll_exit().value_or(1) == 0 && !lines.empty() && !lines.front().empty())
      return lines.front();
  } catch (const std::exception&) {
  }
  return launch::first_slurm_host(nodelist);
}

std::string this_host() {
  char name[256] = {0};
  gethostname(name, sizeof(name) - 1);
  return name;
}

}  // namespace

int launch_from_env(const FromEnvArgs& args, const std::string& secret) {
  launch::Place place;
  try {
    launch::PlaceOptions o;
    o.port = args.port;
    o.first_host = scontrol_first_host;
    place = launch::read_place(launch::process_env(), o);
  } catch (const launch::PlaceError& e) {
    spdlog::error("launch --from-env: {}", e.what());
    return 2;
  }
  if (secret.empty()) {
    // Every rank must hold the same credential before any port opens; a coordinator that made
    // its own could not hand it to ranks it did not start.
    spdlog::error(
        "launch --from-env: no cluster secret: give every rank the same one with "
        "--secret-file FILE (mode 0600, on a shared filesystem or a mounted Kubernetes "
        "Secret) or SWARMRT_SECRET");
    return 2;
  }
  // A dry run resolves no name: it may look at a pod's command from outside its cluster,
  // where its DNS names mean nothing.
  const std::string head_ip = args.dry_run ? place.head : resolve_ipv4(place.head);
  if (head_ip.empty()) {
    spdlog::error("launch --from-env: rank 0's host '{}' does not resolve to an IPv4 address ({})",
                  place.head, place.describe());
    return 2;
  }
  const std::string run_id = messages::run_id_text(place.run_id());
  const std::string exe = std::filesystem::canonical("/proc/self/exe").string();
  std::vector<std::string> argv = {exe};
  auto add = [&](std::initializer_list<std::string> xs) { argv.insert(argv.end(), xs); };
  std::string role;
  if (place.coordinator()) {
    // Listening where the others were told to look: rank 0's own address.
    add({"coordinator", "--config", args.config, "--listen",
         head_ip + ":" + std::to_string(place.port), "--run-id", run_id});
    if (!args.out.empty()) add({"--out", args.out});
    if (args.resume) argv.push_back("--resume");
    if (args.overwrite) argv.push_back("--overwrite");
    if (!args.http.empty()) add({"--http", args.http});
    add({"--signal-checkpoint-s", fmt::format("{}", args.signal_checkpoint_s)});
    // Every other rank is a node: when they have all joined short of a full swarm, the
    // coordinator says so instead of waiting in silence.
    add({"--world-nodes", std::to_string(place.world - 1)});
    role = "coordinator on " + head_ip + ":" + std::to_string(place.port);
  } else {
    std::string listen = args.listen_addr;
    if (listen.empty()) {
      const std::string self = place.self_host.empty() ? this_host() : place.self_host;
      listen = args.dry_run ? self : resolve_ipv4(self);
      if (listen.empty()) {
        spdlog::error(
            "launch --from-env: this host's name '{}' does not resolve to an IPv4 address; "
            "give the address other hosts reach it on with --listen-addr",
            self);
        return 2;
      }
      if (loopback_ipv4(listen) && !loopback_ipv4(head_ip) && !args.dry_run) {
        spdlog::error(
            "launch --from-env: this host's name '{}' resolves to {}, which other hosts cannot "
            "reach; give the address they reach it on with --listen-addr",
            self, listen);
        return 2;
      }
    }
    const uint32_t workers = args.workers > 0 ? args.workers : place.workers();
    add({"node", "--join", head_ip + ":" + std::to_string(place.port), "--workers",
         std::to_string(workers), "--name",
         std::string(launch::name_of(place.scheduler)) + "-rank" + std::to_string(place.rank),
         "--listen", listen, "--run-id", run_id, "--connect-timeout-s",
         fmt::format("{}", args.connect_timeout_s), "--stop-grace-s",
         fmt::format("{}", args.stop_grace_s)});
    // One worker per visible GPU, each on its own device.
    if (!place.gpus.empty()) add({"--device", "cuda"});
    // Nodes check their config against the coordinator's: a rank given another is refused.
    add({"--config", args.config});
    role = "node with " + std::to_string(workers) + " worker" + (workers == 1 ? "" : "s") +
           " joining " + head_ip + ":" + std::to_string(place.port);
  }
  for (const auto& o : args.overrides) add({"--set", o});
  if (!args.net.secret_file.empty()) add({"--secret-file", args.net.secret_file});
  add({"--heartbeat-ms", std::to_string(args.net.heartbeat_ms), "--connection-timeout-ms",
       std::to_string(args.net.connection_timeout_ms)});

  std::printf("launch --from-env: %s -> %s, run id %s\n", place.describe().c_str(), role.c_str(),
              run_id.c_str());
  if (args.dry_run) {
    std::string line;
    for (size_t i = 1; i < argv.size(); ++i) line += (i > 1 ? " " : "") + argv[i];
    std::printf("would run: swarmrt %s\n(host names are resolved when it runs)\n", line.c_str());
    std::fflush(stdout);
    return 0;
  }
  // Two processes that both read rank 0 (or a port another program holds) would fight over
  // one address; the second says so instead of failing to listen.
  if (place.coordinator() && credential::tcp_port_open(head_ip, place.port)) {
    spdlog::error(
        "launch --from-env: rank 0 ({}) but {}:{} already accepts connections: another process "
        "claims rank 0 or holds the port; choose another with --port or MASTER_PORT",
        place.describe(), head_ip, place.port);
    return 2;
  }
  std::fflush(nullptr);
  std::vector<char*> cargv;
  for (auto& a : argv) cargv.push_back(a.data());
  cargv.push_back(nullptr);
  execv(exe.c_str(), cargv.data());
  spdlog::error("launch --from-env: cannot start {}: {}", exe, std::strerror(errno));
  return 1;
}

}  // namespace swarmrt::launch
