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
#include "apps/coordinator_leader.hpp"
#include "apps/ctl_format.hpp"
#include "apps/net.hpp"
#include "messages/console_commands.hpp"
#include "messages/run_id.hpp"
#include "messages/types.hpp"

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

// The answer to one command: exit code (0 ok, 1 error, 2 usage) and the JSON.
struct Answer {
  int code = 0;
  json body;
};

class Console {
 public:
  Console(caf::actor_system& sys, caf::actor inspector, std::string target, double timeout_s,
          bool timing)
      : self_(sys),
        inspector_(std::move(inspector)),
        target_(std::move(target)),
        timeout_s_(timeout_s),
        timing_(timing) {
    char host[256] = {0};
    gethostname(host, sizeof(host) - 1);
    const passwd* pw = getpwuid(getuid());
    who_ = fmt::format("ctl {}@{} pid {}", pw ? pw->pw_name : std::to_string(getuid()), host,
                       getpid());
    self_->monitor(inspector_);
  }

  Answer ask(const std::vector<std::string>& args, bool yes, double extra_s = 0) {
    Answer out;
    const auto started = std::chrono::steady_clock::now();
    self_
        ->request(inspector_,
                  std::chrono::milliseconds(static_cast<int64_t>((timeout_s_ + extra_s) * 1e3)),
                  console_atom::value, messages::ConsoleRequest{args, who_, yes})
        .receive(
            [&](const std::string& answer) {
              out.body = json::parse(answer);
              if (!out.body.value("ok", false))
                out.code =
                    out.body.value("usage", false) || out.body.value("confirm", false) ? 2 : 1;
            },
            [&](const caf::error& e) {
              gone_ = e == caf::sec::request_receiver_down || gone_check();
              out.code = 1;
              out.body = {{"ok", false},
                          {"error", gone_ ? "the coordinator at " + target_ + " is gone"
                                          : self_->system().render(e)}};
            });
    if (timing_)
      std::cerr << fmt::format(
          "answered in {:.2f} ms\n",
          std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - started)
              .count());
    return out;
  }
  bool gone() const { return gone_; }

 private:
  // Whether a down message for the coordinator's inspector has arrived.
  bool gone_check() {
    bool down = false;
    self_->receive([&](const caf::down_msg&) { down = true; },
                   caf::after(std::chrono::milliseconds(0)) >> [] {});
    return down;
  }
  caf::scoped_actor self_;
  caf::actor inspector_;
  std::string target_;
  double timeout_s_;
  bool timing_;
  std::string who_;
  bool gone_ = false;
};

// Seconds a command may take beyond the usual reply time (a trace runs its time first).
double extra_time(const std::vector<std::string>& args) {
  if (args.size() >= 3 && args[0] == "trace") {
    try {
      return std::stod(args[2]);
    } catch (const std::exception&) {
    }
  }
  if (args.size() >= 1 && args[0] == "checkpoint") return messages::kCheckpointWaitS;
  return args.size() >= 1 && args[0] == "trace" ? 5 : 0;
}

// Terminal in non-canonical mode while a refreshing view runs, so one key ends it.
class KeyWatch {
 public:
  KeyWatch() : tty_(isatty(STDIN_FILENO)) {
    if (tty_ && tcgetattr(STDIN_FILENO, &saved_) == 0) {
      termios raw = saved_;
      raw.c_lflag &= ~static_cast<tcflag_t>(ICANON | ECHO);
      tcsetattr(STDIN_FILENO, TCSANOW, &raw);
      restore_ = true;
    }
  }
  ~KeyWatch() {
    if (restore_) tcsetattr(STDIN_FILENO, TCSANOW, &saved_);
  }
  // Waits up to `seconds`; true once a key was pressed (consumed) or stdin closed.
  bool stop_within(double seconds) {
    pollfd p{STDIN_FILENO, POLLIN, 0};
    if (poll(&p, 1, static_cast<int>(seconds * 1e3)) <= 0) return false;
    char c;
    return read(STDIN_FILENO, &c, 1) >= 0;
  }

 private:
  bool tty_;
  bool restore_ = false;
  termios saved_{};
};

void print(const std::vector<std::string>& args, const Answer& a, bool as_json) {
  if (as_json) {
    std::cout << a.body.dump() << std::endl;
  } else if (a.code != 0) {
    std::cerr << "error: " << a.body.value("error", std::string("failed")) << std::endl;
  } else {
    std::cout << ctl::render(args, a.body) << std::flush;
  }
}

// Runs one command line; returns its exit code. `interactive`: a multi-actor kill asks.
int run_line(Console& console, std::vector<std::string> args, bool as_json, bool yes,
             bool interactive) {
  if (args.empty()) return 0;
  // --yes and --json may come anywhere on the line.
  for (auto it = args.begin(); it != args.end();) {
    if (*it == "--yes" || *it == "-y") {
      yes = true;
      it = args.erase(it);
    } else if (*it == "--json") {
      as_json = true;
      it = args.erase(it);
    } else {
      ++it;
    }
  }
  const std::string cmd = args[0];
  if (cmd == "help") {
    const auto text = ctl::help_text(args.size() > 1 ? args[1] : "");
    if (text.empty()) {
      std::cerr << "error: no command '" << args[1] << "' (try `help`)" << std::endl;
      return 2;
    }
    std::cout << text;
    return 0;
  }
  if (cmd == "top" || cmd == "watch" ||
      (cmd == "events" && args.size() == 2 && args[1] == "--follow")) {
    double every = 1;
    if (cmd != "events" && args.size() == 2) {
      try {
        every = std::stod(args[1]);
      } catch (const std::exception&) {
        every = -1;
      }
      if (!(every >= 0.1 && every <= 3600)) {
        std::cerr << "error: usage: " << cmd << " [SECONDS], SECONDS in [0.1, 3600]" << std::endl;
        return 2;
      }
    } else if (cmd != "events" && args.size() != 1) {
      std::cerr << "error: usage: " << cmd << " [SECONDS]" << std::endl;
      return 2;
    }
    KeyWatch keys;
    uint64_t since = 0;
    const bool tty = isatty(STDOUT_FILENO) && !as_json;
    do {
      std::vector<std::string> ask =
          cmd == "top"     ? std::vector<std::string>{"actors"}
          : cmd == "watch" ? std::vector<std::string>{"stats"}
                           : std::vector<std::string>{"events", std::to_string(since)};
      auto a = console.ask(ask, false);
      if (a.code != 0) {
        print(ask, a, as_json);
        return a.code;
      }
      if (cmd == "events") {
        since = a.body["next"].get<uint64_t>();
        print({"events"}, a, as_json);
      } else {
        if (tty) std::cout << "\033[H\033[2J";  // a refreshing view, like top
        if (as_json)
          print({cmd}, a, true);
        else
          std::cout << (cmd == "top" ? ctl::render_top(a.body["actors"], 30)
                                     : ctl::render({"stats"}, a.body))
                    << (tty ? "(any key stops)\n" : "") << std::flush;
      }
    } while (!keys.stop_within(every));
    return 0;
  }
  auto a = console.ask(args, yes, extra_time(args));
  if (a.code == 2 && a.body.value("confirm", false) && interactive) {
    std::cout << a.body.value("error", std::string()) << "\n";
    for (const auto& m : a.body["matches"]) std::cout << "  " << m.get<std::string>() << "\n";
    std::unique_ptr<char, decltype(&free)> reply(readline("kill them all? [y/N] "), &free);
    if (!reply || (std::string(reply.get()) != "y" && std::string(reply.get()) != "yes")) {
      std::cout << "nothing killed\n";
      return 1;
    }
    a = console.ask(args, true);
  }
  print(args, a, as_json);
  return a.code;
}

std::vector<std::string> split(const std::string& line) {
  std::istringstream in(line);
  std::vector<std::string> words;
  for (std::string w; in >> w;) words.push_back(w);
  return words;
}

// Tab completion: the first word is a command; later words are actor or node names, as the
// command's row says (messages/console_commands.hpp) and the last `actors` and `nodes`
// answers gave them.
std::vector<std::string> g_actor_names, g_node_names;
char* complete_word(const char* text, int state) {
  static size_t index = 0;
  static std::vector<std::string> candidates;
  if (state == 0) {
    index = 0;
    candidates.clear();
    const bool first =
        rl_point == 0 || std::string(rl_line_buffer, rl_point).find(' ') == std::string::npos;
    const std::string prefix(text);
    if (first) {
      for (const auto& c : messages::console_commands())
        if (c.name.rfind(prefix, 0) == 0) candidates.push_back(c.name);
    } else {
      const std::string line(rl_line_buffer, rl_point);
      const auto* command = messages::find_console_command(line.substr(0, line.find(' ')));
      const auto completes = command ? command->completes : messages::Completes::nothing;
      const auto& names = completes == messages::Completes::nodes ? g_node_names : g_actor_names;
      if (completes != messages::Completes::nothing)
        for (const auto& n : names)
          if (n.rfind(prefix, 0) == 0) candidates.push_back(n);
    }
  }
  if (index >= candidates.size()) return nullptr;
  return strdup(candidates[index++].c_str());
}

char** complete(const char* text, int, int) {
  rl_attempted_completion_over = 1;  // no file names
  return rl_completion_matches(text, complete_word);
}

void refresh_names(Console& console) {
  g_actor_names.clear();
  g_node_names.clear();
  auto actors = console.ask({"actors"}, false);
  if (actors.code == 0)
    for (const auto& r : actors.body["actors"])
      g_actor_names.push_back(r["name"].get<std::string>());
  auto nodes = console.ask({"nodes"}, false);
  if (nodes.code == 0)
    for (const auto& n : nodes.body["nodes"]) {
      g_node_names.push_back(n["node"].get<std::string>());
      g_node_names.push_back(n["name"].get<std::string>());
    }
  // `heal all`, `heal NAME`: actors and the word all.
  g_actor_names.push_back("all");
}

int interactive(Console& console, const std::string& target, bool as_json) {
  rl_attempted_completion_function = complete;
  rl_completer_word_break_characters = const_cast<char*>(" \t");
  // Names for tab completion; commands piped in need none (and a script's timing stays clean).
  const bool keyboard = isatty(STDIN_FILENO);
  if (keyboard) refresh_names(console);
  std::cout << "swarmrt console on " << target << " (help: commands, quit: leave)" << std::endl;
  while (true) {
    std::unique_ptr<char, decltype(&free)> line(readline("swarmrt> "), &free);
    if (!line) {
      std::cout << std::endl;
      return 0;  // end of input
    }
    auto words = split(line.get());
    if (words.empty()) continue;
    add_history(line.get());
    if (words[0] == "quit" || words[0] == "exit") return 0;
    run_line(console, words, as_json, false, true);
    if (console.gone()) return 1;
    if (keyboard && (words[0] == "kill" || words[0] == "actors" || words[0] == "nodes"))
      refresh_names(console);
  }
}

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
  leader::Etcd etcd(args.etcd, etcd_tls(args.etcd, args.etcd_tls, secret, files.files));
  std::vector<std::string> listed;
  try {
    listed = replica_addresses_in(etcd, *id);
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
  TlsFilesGuard tls{configure_network(cfg, args.net, secret, "ctl")};
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
  transport::remove_cluster_tls(tls.files);
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
