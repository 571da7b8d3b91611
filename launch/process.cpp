#include "launch/process.hpp"

#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cerrno>
#include <cstring>
#include <stdexcept>

namespace swarmrt::launch {

Child::Child(std::string label, const std::vector<std::string>& argv, const std::string& input)
    : label_(std::move(label)) {
  int out[2], in[2];
  if (pipe(out) != 0 || pipe(in) != 0)
    throw std::runtime_error(std::string("pipe: ") + std::strerror(errno));
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_ = fork();
  if (pid_ < 0) throw std::runtime_error(std::string("fork: ") + std::strerror(errno));
  if (pid_ == 0) {
    // The launcher blocks SIGINT/SIGTERM in its threads; the child starts with none blocked.
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, nullptr);
    dup2(in[0], STDIN_FILENO);
    dup2(out[1], STDOUT_FILENO);
    dup2(out[1], STDERR_FILENO);
    close(in[0]), close(in[1]), close(out[0]), close(out[1]);
    execvp(args[0], args.data());
    std::fprintf(stderr, "cannot run %s: %s\n", args[0], std::strerror(errno));
    _exit(127);
  }
  close(in[0]);
  close(out[1]);
  if (!input.empty() && write(in[1], input.data(), input.size()) < 0) {
    // The child exited at once; its output says why.
  }
  close(in[1]);
  fd_ = out[0];
  fcntl(fd_, F_SETFL, fcntl(fd_, F_GETFL) | O_NONBLOCK);
}

Child::~Child() {
  if (fd_ >= 0) close(fd_);
  if (!poll_exit()) {
    signal(SIGKILL);
    int status;
    waitpid(pid_, &status, 0);
  }
}

std::vector<std::string> Child::read_lines() {
  std::vector<std::string> lines;
  if (fd_ < 0) return lines;
  char buf[4096];
  for (;;) {
    const ssize_t n = read(fd_, buf, sizeof(buf));
    if (n > 0) {
      partial_.append(buf, static_cast<size_t>(n));
      continue;
    }
    if (n == 0) {  // end of output
      close(fd_);
      fd_ = -1;
    }
    break;
  }
  size_t start = 0;
  for (size_t nl; (nl = partial_.find('\n', start)) != std::string::npos; start = nl + 1)
    lines.push_back(partial_.substr(start, nl - start));
  partial_.erase(0, start);
  if (fd_ < 0 && !partial_.empty()) {
    lines.push_back(partial_);
    partial_.clear();
  }
  return lines;
}

std::optional<int> Child::poll_exit() {
  if (status_) return status_;
  int status = 0;
  const pid_t r = waitpid(pid_, &status, WNOHANG);
  if (r == pid_) {
    if (WIFEXITED(status)) status_ = WEXITSTATUS(status);
    if (WIFSIGNALED(status)) status_ = 128 + WTERMSIG(status);
  }
  return status_;
}

void Child::signal(int sig) {
  if (!status_) kill(pid_, sig);
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

}  // namespace swarmrt::launch
