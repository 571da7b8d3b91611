// One console command line run against the coordinator's inspector and printed, and the
// interactive session around it (ctl_console.hpp).
#include <poll.h>
#include <readline/history.h>
#include <readline/readline.h>
#include <termios.h>
#include <unistd.h>

#include <iostream>
#include <sstream>
#include <thread>

#include "apps/ctl_console.hpp"
#include "apps/ctl_format.hpp"

namespace swarmrt::apps {
namespace {
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

}  // namespace

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

namespace {

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

}  // namespace

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

}  // namespace swarmrt::apps
