// The console's session with a coordinator's inspector, shared by ctl's two files:
//   ctl_command.cpp  the command line, reaching the coordinator (or the leader a standby
//                    names), keeping the connection alive
//   ctl_session.cpp  one command line run and printed, and the interactive session (readline:
//                    history, completion of commands, actor and node names)
#pragma once

#include <pwd.h>
#include <unistd.h>

#include <fmt/format.h>

#include <caf/all.hpp>
#include <chrono>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "messages/atoms.hpp"
#include "messages/console_commands.hpp"

namespace swarmrt::apps {
using json = nlohmann::json;

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
                  atoms::console_atom::value, messages::ConsoleRequest{args, who_, yes})
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

// Runs one command line; returns its exit code (0 ok, 1 error, 2 usage). `interactive`: a
// multi-actor kill asks before it acts.
int run_line(Console& console, std::vector<std::string> args, bool as_json, bool yes,
             bool interactive);
// Reads command lines until the input ends or `quit`; 1 when the coordinator went away.
int interactive(Console& console, const std::string& target, bool as_json);

}  // namespace swarmrt::apps
