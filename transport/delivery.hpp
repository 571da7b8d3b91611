// How fast each frame link delivers (swarm.compression = auto, policy/hop_choice.hpp): a
// message is timed from its first byte written to its last byte acknowledged by the peer's
// kernel, so the socket's send buffer, which takes a hop at once, does not make a thin link
// look fast. Kept per endpoint (one link per peer process), read by the workers that send on it.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>

namespace swarmrt::transport {

// Waits until socket `fd` has no byte left unacknowledged and returns the seconds since
// `started`, less the path's least round trip (the last acknowledgement's way back, which is
// latency, not bandwidth). Gives up (nullopt) when `interrupted` says so (the next message is
// waiting: the link's throughput matters more than a measurement) or after `limit`.
std::optional<double> wait_delivered(int fd, std::chrono::steady_clock::time_point started,
                                     const std::function<bool()>& interrupted,
                                     std::chrono::milliseconds limit);

// Whether frame links time their messages (off: no polling at all).
void measure_links(bool on);
bool measuring_links();

// `bytes` delivered in `seconds` on the link to `endpoint`.
void note_delivery(const std::string& endpoint, uint64_t bytes, double seconds);
// The link's bytes/s (policy::LinkRate: median of recent messages); 0: unknown.
double delivered_bytes_per_s(const std::string& endpoint);
// How long a message of `bytes` takes on it (policy::LinkRate::seconds_for); negative: unknown.
double delivery_seconds(const std::string& endpoint, uint64_t bytes);

}  // namespace swarmrt::transport
