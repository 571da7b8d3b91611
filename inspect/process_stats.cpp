#include "inspect/process_stats.hpp"

#include <unistd.h>

#include <fstream>
#include <sstream>
#include <string>

namespace swarmrt::inspect {

ProcessStats process_stats() {
  ProcessStats out;
  out.pid = getpid();
  std::ifstream status("/proc/self/status");
  for (std::string line; std::getline(status, line);) {
    std::istringstream in(line);
    std::string key;
    in >> key;
    if (key == "Threads:") in >> out.threads;
    if (key == "VmRSS:") {
      double kb = 0;
      in >> kb;
      out.rss_mb = kb / 1024.0;
    }
  }
  // /proc/self/stat: the command name (field 2) may hold spaces, so count fields after ')'.
  std::ifstream stat("/proc/self/stat");
  std::string all((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
  const auto close = all.rfind(')');
  if (close != std::string::npos) {
    std::istringstream in(all.substr(close + 2));
    std::string field;
    double utime = 0, stime = 0;
    // Fields 3..13 precede utime (14) and stime (15).
    for (int i = 3; i <= 13 && in >> field; ++i) {
    }
    in >> utime >> stime;
    out.cpu_s = (utime + stime) / static_cast<double>(sysconf(_SC_CLK_TCK));
  }
  return out;
}

}  // namespace swarmrt::inspect
