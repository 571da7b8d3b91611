// Processes: the children the launcher starts (output on a pipe, read line by line,
// signalled and reaped by pid), and how a swarmrt process stops on SIGINT, SIGTERM or SIGUSR1.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <functional>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace swarmrt::launch {

class Child {
 public:
  // Starts argv[0] with `argv`; stdout and stderr go to one pipe; `input`, if any, is written
  // to its stdin (then closed). Throws std::runtime_error when it cannot start.
  Child(std::string label, const std::vector<std::string>& argv, const std::string& input = "");
  ~Child();
  Child(const Child&) = delete;
  Child& operator=(const Child&) = delete;

  const std::string& label() const { return label_; }
  pid_t pid() const { return pid_; }
  int fd() const { return fd_; }
  // Reads what is available; returns the complete lines (without '\n'). At end of output the
  // last partial line is returned too and fd() becomes -1.
  std::vector<std::string> read_lines();
  // Non-blocking: the exit status once the child has exited (128 + signal when killed).
  std::optional<int> poll_exit();
  bool running() { return !poll_exit().has_value(); }
  void signal(int sig);

 private:
  std::string label_;
  pid_t pid_ = -1;
  int fd_ = -1;
  std::string partial_;
  std::optional<int> status_;
};

// Runs `f` when it goes out of scope (clearing what a signal thread may still read).
struct AtScopeExit {
  std::function<void()> f;
  ~AtScopeExit() { f(); }
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

}  // namespace swarmrt::launch
