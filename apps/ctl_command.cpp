// swarmrt ctl HOST:PORT[,...] | --etcd URL --run-id ID [COMMAND [ARGS...]] [--json] [--yes]
// The console of a live swarm (architecture §9): it connects to the coordinator's control port
// over the same mutual TLS as any node (the cluster credential is required), asks the
// directory for the coordinator's inspector and sends it commands. With a COMMAND it runs that
// one and exits 0 (ok), 1 (error) or 2 (usage); without, it is interactive: line editing,
// history and tab completion of commands, actor and node names (readline).
#include <poll.h>
#include <pwd.h>
#include <readline/history.h>
#include <readline/readline.h>
#include <spdlog/spdlog.h>
#include <termios.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <caf/all.hpp>
#include <caf/io/all.hpp>
#include <condition_variable>
#include <iostream>
#include <mutex>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>
#include <tuple>
#include <utility>

#include "apps/commands.hpp"
#include "apps/ctl_console.hpp"
#include "apps/ctl_format.hpp"
#include "apps/net.hpp"
#include "apps/options.hpp"
#include "leader/replicas.hpp"
#include "messages/console_commands.hpp"
#include "messages/run_id.hpp"

namespace swarmrt::apps {
namespace {
using namespace swarmrt::atoms;
using json = nlohmann::json;

struct CtlArgs {
  std::string target;
  std::string etcd;    // the run's etcd: where its coordinator replicas are listed
  std::string run_id;  // with --etcd
  leader::EtcdTls etcd_tls;
  bool json = false;
  bool yes = false;
  bool timing = false;
  double timeout_s = 30;
  NetOptions net = console_net();

  // How long a console waits for the coordinator (its handshake, on a machine whose cores
  // all train, can take seconds) and for a silent coordinator before it gives up.
  static NetOptions console_net() {
    NetOptions n;
    n.connection_timeout_ms = 30000;
    return n;
  }
};

// Sends the coordinator's directory a harmless question every `every_ms` (its answer to an
// anonymous sender is dropped), so that the coordinator, whose tick drops a peer silent for
// its connection timeout, keeps a console that runs no tick of its own.
class KeepAlive {
 public:
  KeepAlive(caf::actor directory, int64_t every_ms)
      : thread_([this, directory, every_ms] {
          std::unique_lock<std::mutex> lock(mutex_);
          while (!stop_) {
            caf::anon_send(directory, inspector_atom::value);
            wake_.wait_for(lock, std::chrono::milliseconds(every_ms), [this] { return stop_; });
          }
        }) {}
  ~KeepAlive() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stop_ = true;
    }
    wake_.notify_all();
    thread_.join();
  }

 private:
  std::mutex mutex_;
  std::condition_variable wake_;
  bool stop_ = false;
  std::thread thread_;
};

// Whoever answers at one address: the coordinator's directory and inspector, or nulls with the
// reason told.
std::pair<caf::actor, caf::actor> reach_console(caf::actor_system& sys, const std::string& address,
                                                const HostPort& target, const CtlArgs& args,
                                                bool& refused, std::ostream& why) {
  // A coordinator that is not there is said at once; a handshake that spanned a heartbeat
  // tick (a busy machine) is tried again within --connection-timeout-ms.
  const auto reached = reach_coordinator(
      sys, target,
      std::chrono::steady_clock::now() + std::chrono::milliseconds(args.net.connection_timeout_ms),
      false, nullptr, nullptr);
  if (!reached.directory) {
    refused = reached.refused;
    if (reached.refused)
      why << "error: the coordinator at " << address
          << " refused this console: the TLS handshake failed, the two do not hold the "
             "same cluster credential"
          << std::endl;
    else if (reached.error.find("connection_timeout") != std::string::npos)
      why << "error: the coordinator at " << address
          << " did not finish the handshake within --connection-timeout-ms ("
          << args.net.connection_timeout_ms << " ms): busy, frozen or not a coordinator"
          << std::endl;
    else
      why << "error: cannot reach the coordinator at " << address << ": " << reached.error
          << std::endl;
    return {};
  }
  caf::actor inspector;
  caf::scoped_actor self{sys};
  self->request(reached.directory, std::chrono::seconds(10), inspector_atom::value)
      .receive([&](const caf::actor& a) { inspector = a; },
               [&](const caf::error& e) {
                 why << "error: the coordinator at " << address
                     << " has no console: " << sys.render(e) << std::endl;
               });
  return {reached.directory, inspector};
}

// A coordinator replica that answered but has no console is a standby (apps/standby_door.hpp):
// the replicas it names, the leader's first, are tried next (each address once).
void follow_standby(caf::actor_system& sys, const caf::actor& door, const std::string& address,
                    std::vector<std::pair<std::string, HostPort>>& targets) {
  caf::scoped_actor self{sys};
  std::vector<std::string> named;
  self->request(door, std::chrono::seconds(5), replicas_atom::value)
      .receive([&](const std::vector<std::string>& at) { named = at; }, [](const caf::error&) {});
  bool told = false;
  for (const auto& a : named) {
    HostPort at;
    try {
      at = parse_host_port(a, false);
    } catch (const std::exception&) {
      continue;
    }
    bool listed = false;
    for (const auto& t : targets) listed |= t.second == at;
    if (listed) continue;
    if (!told) std::cerr << "(" << address << " is a standby coordinator: asking " << a << ")\n";
    told = true;
    targets.emplace_back(a, at);
  }
}

// The run's coordinator replicas as etcd lists them now (ctl --etcd): HOST:PORT each.
std::vector<std::string> replicas_from_etcd(const CtlArgs& args, const std::string& secret) {
  const auto id = messages::parse_run_id(args.run_id);
  if (!id)
    throw std::invalid_argument("--run-id '" + args.run_id +
                                "': not a run id (the 16 hex digits a coordinator prints)");
  TlsFilesGuard files;
  leader::Etcd etcd(args.etcd, leader::etcd_tls(args.etcd, args.etcd_tls, secret, files.files));
  std::vector<std::string> listed;
  try {
    listed = leader::replica_addresses_in(etcd, messages::run_id_text(*id));
  } catch (const std::exception& e) {
    throw std::runtime_error("--etcd " + args.etcd + ": " + e.what());
  }
  if (listed.empty())
    throw std::runtime_error("etcd at " + args.etcd + " lists no coordinator replica of run " +
                             args.run_id + " (none runs, or the run is over)");
  return listed;
}

int run_ctl(const CtlArgs& args, std::vector<std::string> command) {
  // HOST:PORT, or the addresses of a run's coordinator replicas, A,B,...: only the leader
  // listens, so the first that answers is the one to talk to. With --etcd the replicas etcd
  // lists are tried too (after any given); the address may then be left out, and a first
  // word without a port is the command's.
  std::vector<std::pair<std::string, HostPort>> targets;
  std::string secret;
  try {
    std::string given = args.target;
    if (!args.etcd.empty() && given.find(':') == std::string::npos) {
      if (!given.empty()) command.insert(command.begin(), given);
      given.clear();
    }
    if (given.empty() && args.etcd.empty())
      throw std::invalid_argument(
          "give the coordinator's HOST:PORT (or its replicas' A,B,...) or --etcd URL --run-id ID");
    if (!args.etcd.empty() && args.run_id.empty())
      throw std::invalid_argument(
          "--etcd needs --run-id: the run's replicas are listed in etcd under it");
    std::stringstream list(given);
    for (std::string a; std::getline(list, a, ',');)
      targets.emplace_back(a, parse_host_port(a, false));
    secret = resolve_secret(args.net);
    if (!args.etcd.empty() && !secret.empty())
      for (const auto& a : replicas_from_etcd(args, secret))
        targets.emplace_back(a, parse_host_port(a, false));
    if (targets.empty()) throw std::invalid_argument("no coordinator address");
  } catch (const std::invalid_argument& e) {
    std::cerr << "error: " << e.what() << std::endl;
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "error: " << e.what() << std::endl;
    return 1;
  }
  if (secret.empty()) {
    std::cerr << "error: no cluster secret: the coordinator admits only its holders; give "
                 "--secret-file FILE (<run dir>/secret) or SWARMRT_SECRET"
              << std::endl;
    return 2;
  }
  // Only errors from CAF and the planes: the console prints its own answers.
  spdlog::set_level(spdlog::level::err);
  caf::actor_system_config cfg;
  // The console's own types only: this process runs without LibTorch (apps/front.cpp).
  messages::register_console_types(cfg);
  cfg.set("logger.verbosity", caf::atom("quiet"));
  cfg.set("work-stealing.aggressive-poll-attempts", 1);  // as the runtime's: no busy polling
  cfg.set("work-stealing.moderate-poll-attempts", 1);
  TlsFilesGuard tls{configure_planes(cfg, args.net, secret, "ctl")};
  // No heartbeat tick in a console: CAF 0.17's tick drops an outgoing connection whose
  // handshake has not come back by the next tick, and a console started on a busy machine
  // spans tick after tick (20 consoles started at once beside a training run on 2 cores: a
  // few failed even after 30 s of retries). The console keeps its connection alive itself
  // (KeepAlive), so the coordinator still hears from it every --heartbeat-ms; a coordinator
  // that goes away closes the connection, one that freezes lets requests time out.
  cfg.set("middleman.heartbeat-interval", caf::timespan{0});
  // A console's actors are few and idle: one scheduler thread that sleeps until a message
  // wakes it (CAF notifies a sleeping worker of every message from outside it). With the
  // runtime's two threads each waking every 10 ms to look for work to steal, an idle console
  // took 1.4% of a core; 20 of them beside a run on 2 cores cost it a fifth of its speed.
  cfg.set("scheduler.max-threads", 1);
  cfg.set("work-stealing.relaxed-sleep-duration", caf::timespan{std::chrono::seconds(1)});
  caf::actor_system sys{cfg};
  caf::actor dir, inspector;
  std::string address;
  std::ostringstream why;  // told only when no address answers
  // By index: a standby's answer adds the leader's address to the list.
  for (size_t k = 0; k < targets.size(); ++k) {
    const auto [text, target] = targets[k];
    bool refused = false;
    std::tie(dir, inspector) = reach_console(sys, text, target, args, refused, why);
    if (inspector || refused) {
      address = text;
      break;
    }
    if (dir) follow_standby(sys, dir, text, targets);
  }
  if (!inspector) {
    std::cerr << why.str();
    // A standby without a port of its own (--listen port 0, no secret yet) says nothing.
    if (args.etcd.empty())
      std::cerr << "(a coordinator standby on a port of its own names the leader; one on port "
                   "0 cannot: give every replica's address, A,B,..., or --etcd URL --run-id ID "
                   "to find the leader)"
                << std::endl;
    return 1;
  }
  KeepAlive keep_alive{dir, args.net.heartbeat_ms};
  int code = 0;
  {
    Console console(sys, inspector, address, args.timeout_s, args.timing);
    code = command.empty() ? interactive(console, address, args.json)
                           : run_line(console, command, args.json, args.yes, false);
  }
  // As a node does: the process ends here, without waiting for CAF's teardown of the
  // connection.
  std::fflush(nullptr);
  credential::remove_cluster_tls(tls.files);
  _exit(code);
}

}  // namespace

void add_ctl_command(CLI::App& app, int& exit_code) {
  auto args = std::make_shared<CtlArgs>();
  auto* cmd = app.add_subcommand(
      "ctl",
      "inspect and steer a live swarm through its coordinator (interactive without COMMAND)");
  cmd->add_option("target", args->target,
                  "the coordinator's HOST:PORT, or its replicas' A,B,... (the leader answers); "
                  "may be left out with --etcd");
  cmd->add_option("--etcd", args->etcd,
                  "the run's etcd (http[s]://HOST:PORT, comma-separated; with --run-id): the "
                  "console tries the coordinator replicas listed there and talks to the leader");
  cmd->add_option("--run-id", args->run_id, "the run whose replicas --etcd lists");
  add_etcd_tls_options(*cmd, args->etcd_tls);
  cmd->add_flag("--json", args->json, "print the answer as JSON (one object per answer)");
  cmd->add_flag("--yes,-y", args->yes,
                "a kill may match more than one actor; kill-coordinator may stop the run");
  cmd->add_flag("--timing", args->timing,
                "print how long each answer took (stderr): what the console's benchmark reads");
  cmd->add_option("--timeout-s", args->timeout_s, "wait this long for an answer")
      ->capture_default_str();
  add_net_options(*cmd, args->net);
  // COMMAND [ARGS...] is whatever follows; its own options (--stage, --kind, --follow) pass
  // through untouched.
  cmd->allow_extras();
  cmd->footer("commands:\n" + ctl::help_text(""));
  cmd->callback([args, cmd, &exit_code] { exit_code = run_ctl(*args, cmd->remaining()); });
}

}  // namespace swarmrt::apps
