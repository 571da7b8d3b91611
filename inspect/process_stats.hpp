// One process's own figures, from /proc/self: what `swarmrt ctl nodes` shows per process.
#pragma once

#include <cstdint>

namespace swarmrt::inspect {

struct ProcessStats {
  int64_t pid = 0;
  int64_t threads = 0;
  double rss_mb = 0;
  double cpu_s = 0;  // user + system time so far
};

ProcessStats process_stats();

}  // namespace swarmrt::inspect
