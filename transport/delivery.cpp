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

// The socket's acknowledged byte count and least round trip, from the kernel's tcp_info.
bool acked_bytes(int fd, uint64_t& acked, double& min_rtt_s) {
  tcp_info info{};
  socklen_t len = sizeof(info);
  if (getsockopt(fd, IPPROTO_TCP, TCP_INFO, &info, &len) != 0 ||
      len < offsetof(tcp_info, tcpi_bytes_acked) + sizeof(info.tcpi_bytes_acked))
    return false;
  acked = info.tcpi_bytes_acked;
  // The path's least round trip, not the smoothed one: that one holds the queue a slow
  // link's own bytes built, which is part of the transfer's time.
  min_rtt_s = len >= offsetof(tcp_info, tcpi_min_rtt) + sizeof(info.tcpi_min_rtt)
                  ? info.tcpi_min_rtt * 1e-6
                  : 0;
  return true;
}

// A message whose last byte is not acknowledged after this long is not timed (a stalled or
// broken link: the link's failure handling, not its rate, is what matters then).
constexpr auto kGiveUp = std::chrono::seconds(10);

}  // namespace

void DeliveryTimer::sent(uint64_t bytes, Clock::time_point started) {
  if (bytes < policy::LinkRate::kMinBytes) return;
  uint64_t acked = 0;
  double rtt = 0;
  int queued = 0;
  // Acknowledged first, then queued: an acknowledgement between the two reads makes the end
  // early by what it acknowledged, never late (late could wait for bytes never sent).
  if (!acked_bytes(fd_, acked, rtt) || ioctl(fd_, SIOCOUTQ, &queued) != 0) return;
  pending_.push_back({acked + static_cast<uint64_t>(queued), bytes, started});
}

std::chrono::microseconds DeliveryTimer::poll() {
  using std::chrono::microseconds;
  if (pending_.empty()) return microseconds(0);
  uint64_t acked = 0;
  double rtt = 0;
  if (!acked_bytes(fd_, acked, rtt)) {
    pending_.clear();
    return microseconds(0);
  }
  const auto now = Clock::now();
  while (!pending_.empty() &&
         (pending_.front().end <= acked || now - pending_.front().started > kGiveUp)) {
    const auto& p = pending_.front();
    if (p.end <= acked) {
      // Less the last acknowledgement's way back, which is latency, not bandwidth.
      const double s = std::chrono::duration<double>(now - p.started).count();
      note_delivery(endpoint_, p.bytes, std::max(s - rtt, s / 2));
    }
    pending_.pop_front();
  }
  if (pending_.empty()) return microseconds(0);
  // Asked again at a tenth of the oldest message's time so far (at least 100 us, at most
  // 2 ms): its measurement errs by at most that, and a long transfer costs few system calls.
  return std::clamp(std::chrono::duration_cast<microseconds>(now - pending_.front().started) / 10,
                    microseconds(100), microseconds(2000));
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

size_t delivery_samples(const std::string& endpoint) {
  auto& r = rates();
  std::lock_guard<std::mutex> lock(r.mutex);
  auto it = r.by_endpoint.find(endpoint);
  return it == r.by_endpoint.end() ? 0 : it->second.measured();
}

double delivery_seconds(const std::string& endpoint, uint64_t bytes) {
  auto& r = rates();
  std::lock_guard<std::mutex> lock(r.mutex);
  auto it = r.by_endpoint.find(endpoint);
  return it == r.by_endpoint.end() ? -1 : it->second.seconds_for(bytes, seconds_now());
}

}  // namespace swarmrt::transport
