#include "transport/delivery.hpp"

// linux/tcp.h, not netinet/tcp.h: only the kernel's tcp_info has tcpi_min_rtt.
#include <linux/sockios.h>
#include <linux/tcp.h>
#include <netinet/in.h>
#include <sys/ioctl.h>
#include <sys/socket.h>

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <map>
#include <mutex>
#include <thread>

#include "policy/hop_choice.hpp"

namespace swarmrt::transport {
namespace {

using Clock = std::chrono::steady_clock;

std::atomic<bool> g_measure{false};

struct Rates {
  std::mutex mutex;
  std::map<std::string, policy::LinkRate> by_endpoint;
};
Rates& rates() {
  static Rates* r = new Rates;
  return *r;
}

double seconds_now() {
  return std::chrono::duration<double>(Clock::now().time_since_epoch()).count();
}

}  // namespace

std::optional<double> wait_delivered(int fd, Clock::time_point started,
                                     const std::function<bool()>& interrupted,
                                     std::chrono::milliseconds limit) {
  for (;;) {
    int unacked = 0;
    if (ioctl(fd, SIOCOUTQ, &unacked) != 0) return std::nullopt;
    const auto now = Clock::now();
    const auto elapsed = now - started;
    if (unacked == 0) {
      // The path's least round trip, not the smoothed one: that one holds the queue a slow
      // link's own bytes built, which is part of the transfer's time.
      tcp_info info{};
      socklen_t len = sizeof(info);
      double rtt_s = 0;
      if (getsockopt(fd, IPPROTO_TCP, TCP_INFO, &info, &len) == 0 &&
          len >= offsetof(tcp_info, tcpi_min_rtt) + sizeof(info.tcpi_min_rtt))
        rtt_s = info.tcpi_min_rtt * 1e-6;
      const double s = std::chrono::duration<double>(elapsed).count();
      return std::max(s - rtt_s, s / 2);
    }
    if (elapsed > limit || interrupted()) return std::nullopt;
    // Polled at a tenth of the time so far (at least 100 us, at most 2 ms): the measurement
    // errs by at most that, and a long transfer costs few system calls.
    const auto nap = std::clamp<Clock::duration>(elapsed / 10, std::chrono::microseconds(100),
                                                 std::chrono::milliseconds(2));
    std::this_thread::sleep_for(nap);
  }
}

void measure_links(bool on) {
  g_measure = on;
}

bool measuring_links() {
  return g_measure.load();
}

void note_delivery(const std::string& endpoint, uint64_t bytes, double seconds) {
  auto& r = rates();
  std::lock_guard<std::mutex> lock(r.mutex);
  r.by_endpoint[endpoint].add(bytes, seconds, seconds_now());
}

double delivered_bytes_per_s(const std::string& endpoint) {
  auto& r = rates();
  std::lock_guard<std::mutex> lock(r.mutex);
  auto it = r.by_endpoint.find(endpoint);
  return it == r.by_endpoint.end() ? 0 : it->second.bytes_per_s(seconds_now());
}

double delivery_seconds(const std::string& endpoint, uint64_t bytes) {
  auto& r = rates();
  std::lock_guard<std::mutex> lock(r.mutex);
  auto it = r.by_endpoint.find(endpoint);
  return it == r.by_endpoint.end() ? -1 : it->second.seconds_for(bytes, seconds_now());
}

}  // namespace swarmrt::transport
