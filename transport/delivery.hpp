// How fast each frame link delivers (swarm.compression = auto, policy/hop_choice.hpp): a
// message is timed from its first byte written to its last byte acknowledged by the peer's
// kernel, so the socket's send buffer, which takes a hop at once, does not make a thin link
// look fast. Kept per endpoint (one link per peer process), read by the workers that send on it.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <string>

namespace swarmrt::transport {

// Times one link's messages from the first byte written to the last acknowledged, each one,
// also while later ones are written behind it: a message that waited behind others reached the
// peer that late, and a pipeline waiting for it sees that. (Timing only messages that found the
// link idle would see a token-bucket shaper's burst, not the rate it holds a busy link to.)
// While a write waits for room in a full socket, earlier messages are noted when it returns:
// late, on a link that is behind anyway. Owned by the link's writer thread.
class DeliveryTimer {
 public:
  using Clock = std::chrono::steady_clock;
  DeliveryTimer(int fd, std::string endpoint) : fd_(fd), endpoint_(std::move(endpoint)) {}
  // A message of `bytes` was handed to the socket whole; its first byte at `started`.
  void sent(uint64_t bytes, Clock::time_point started);
  // Notes each message the peer has acknowledged to the last byte (note_delivery); returns
  // how long to wait before asking again, zero when no message is waiting to be timed.
  std::chrono::microseconds poll();

 private:
  struct Pending {
    uint64_t end;  // the socket's byte count (acknowledged + queued) once it was written
    uint64_t bytes;
    Clock::time_point started;
  };
  int fd_;
  std::string endpoint_;
  std::deque<Pending> pending_;
};

// Whether frame links time their messages (off: no polling at all).
void measure_links(bool on);
bool measuring_links();

// `bytes` delivered in `seconds` on the link to `endpoint`.
void note_delivery(const std::string& endpoint, uint64_t bytes, double seconds);
// The link's bytes/s (policy::LinkRate: median of recent messages); 0: unknown.
double delivered_bytes_per_s(const std::string& endpoint);
// How long a message of `bytes` takes on it (policy::LinkRate::seconds_for); negative: unknown.
double delivery_seconds(const std::string& endpoint, uint64_t bytes);
// How many of the link's messages are measured and kept (policy::LinkRate::measured).
size_t delivery_samples(const std::string& endpoint);

}  // namespace swarmrt::transport
