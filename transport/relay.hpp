// Big replies between processes in slices. A stage's state (parameters, DiLoCo anchor, AdamW
// moments) is gigabytes at gpt2-small size; as one CAF message on the control plane it takes
// longer to arrive than the middleman's connection timeout (2 s), which judges a connection by
// its last whole message, so both ends drop the link mid-transfer (a coordinator and a node on
// one machine lost each other at the first checkpoint, on the GPU check and on this CPU).
//
// `ask<T>` is `request` for a reply of type T that may be big: to an actor of this process it
// is the plain request (nothing is serialized); to one of another process it spawns a
// collector here and sends the asked actor (relay_atom, collector, timeout_ms, the request).
// The asked actor's `relay<T>` asks itself the same request, serializes the answer and sends
// it to the collector in slices of kRelaySlice bytes, each a message of its own, so heartbeats
// and other traffic pass between them. The collector checks every slice (order, sizes, the
// run's max message) and answers the asker's (collect_atom) request with the value, locally.
#pragma once

#include <algorithm>
#include <atomic>
#include <caf/all.hpp>
#include <caf/binary_deserializer.hpp>
#include <caf/binary_serializer.hpp>
#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "messages/atoms.hpp"
#include "transport/bulk.hpp"

namespace swarmrt::transport {

// 256 KiB: a slice crosses a 10 Mbit/s link in 0.2 s and a 2 Mbit/s one in 1 s, inside the
// connection timeout (a slower link needs a longer --connection-timeout-ms). At 4 MiB a node
// joining over 10 Mbit/s lost its coordinator at every state it took (tests/cli/slow_join.sh).
// 1.5 GB is then 6,000 messages, each a small cost beside its bytes' transfer.
constexpr size_t kRelaySlice = size_t{256} << 10;

// How many slices a message of `total` bytes comes in (an empty one still takes one).
inline uint32_t slice_count(uint64_t total) {
  return static_cast<uint32_t>(std::max<uint64_t>((total + kRelaySlice - 1) / kRelaySlice, 1));
}

// Serializes `value` and calls post(index, count, total, slice bytes) for each slice in order;
// the serializer's error, if it fails (nothing is posted then).
template <class T, class Post>
caf::error for_each_slice(caf::actor_system& sys, T& value, Post&& post) {
  std::vector<char> buf;
  caf::binary_serializer sink{sys, buf};
  if (auto err = sink(value)) return err;
  const uint64_t total = buf.size();
  const uint32_t count = slice_count(total);
  for (uint32_t i = 0; i < count; ++i) {
    const size_t from = size_t{i} * kRelaySlice;
    const size_t end = std::min<size_t>(from + kRelaySlice, buf.size());
    post(i, count, total, std::vector<uint8_t>(buf.begin() + from, buf.begin() + end));
  }
  return caf::none;
}

// Slices received by this process's collectors (a reply of one slice comes whole), and replies
// refused by them (tests, logs).
inline std::atomic<uint64_t> g_relay_slices{0};
inline std::atomic<uint64_t> g_relay_refused{0};

template <class T>
struct relay_collector_state {
  caf::actor target;  // the asked actor: the only sender taken
  std::vector<uint8_t> bytes;
  uint64_t total = 0;
  uint32_t next = 0;  // the slice expected next
  std::optional<caf::response_promise> promise;
  std::optional<T> value;
  std::string error;
  static inline const char* name = "relay collector";
};

template <class T>
void relay_finish(caf::stateful_actor<relay_collector_state<T>>* self) {
  auto& s = self->state;
  if (!s.promise || (!s.value && s.error.empty())) return;
  if (s.value)
    s.promise->deliver(std::move(*s.value));
  else
    s.promise->deliver(caf::make_error(caf::sec::runtime_error, s.error));
  self->quit();
}

template <class T>
void relay_fail(caf::stateful_actor<relay_collector_state<T>>* self, std::string why) {
  auto& s = self->state;
  if (s.value || !s.error.empty()) return;
  ++g_relay_refused;
  s.error = std::move(why);
  s.bytes = {};
  relay_finish(self);
}

template <class T>
void relay_slice(caf::stateful_actor<relay_collector_state<T>>* self, uint32_t index,
                 uint32_t count, uint64_t total, const std::vector<uint8_t>& slice,
                 uint64_t max_bytes) {
  auto& s = self->state;
  if (s.value || !s.error.empty()) return;
  if (self->current_sender() != s.target.address()) return;  // only the asked actor answers
  ++g_relay_slices;
  if (total > max_bytes)
    return relay_fail(self, "a reply of " + std::to_string(total) + " bytes exceeds the limit of " +
                                std::to_string(max_bytes) + " (transport.max_message_mib)");
  if (count != slice_count(total) || index != s.next || (index > 0 && total != s.total))
    return relay_fail(self, "reply slice " + std::to_string(index) + " of " +
                                std::to_string(count) + " out of order");
  if (index == 0) {
    s.total = total;
    s.bytes.reserve(total);
  }
  if (slice.size() > kRelaySlice || s.bytes.size() + slice.size() > total)
    return relay_fail(self, "reply slice " + std::to_string(index) + " overruns the reply");
  s.bytes.insert(s.bytes.end(), slice.begin(), slice.end());
  ++s.next;
  if (s.next < count) return;
  if (s.bytes.size() != total) return relay_fail(self, "the reply's slices end before it does");
  T value;
  caf::binary_deserializer source{self->system(), reinterpret_cast<const char*>(s.bytes.data()),
                                  s.bytes.size()};
  if (auto err = source(value))
    return relay_fail(self, "the reply does not decode: " + self->system().render(err));
  s.bytes = {};
  s.value = std::move(value);
  relay_finish(self);
}

template <class T>
caf::behavior relay_collector(caf::stateful_actor<relay_collector_state<T>>* self,
                              caf::actor target, std::chrono::milliseconds timeout,
                              uint64_t max_bytes) {
  using namespace swarmrt::atoms;
  self->state.target = target;
  self->monitor(target);
  self->set_down_handler([=](caf::down_msg& dm) {
    relay_fail(self, "the asked actor went down: " + self->system().render(dm.reason));
  });
  // The asker's own request times out then too; this ends the collector if it never asks.
  self->delayed_send(self, timeout + std::chrono::seconds(1), relay_timeout_atom::value);
  return {
      [=](collect_atom) -> caf::result<T> {
        auto promise = self->template make_response_promise<T>();
        self->state.promise = promise;
        relay_finish(self);
        return promise;
      },
      [=](relay_slice_atom, uint32_t index, uint32_t count, uint64_t total,
          const std::vector<uint8_t>& slice) {
        relay_slice(self, index, count, total, slice, max_bytes);
      },
      [=](relay_value_atom, uint64_t total, const T& value) {
        auto& s = self->state;
        if (self->current_sender() != s.target.address() || s.value || !s.error.empty()) return;
        ++g_relay_slices;  // a reply of one slice
        if (total > max_bytes)
          return relay_fail(self, "a reply of " + std::to_string(total) +
                                      " bytes exceeds the limit of " + std::to_string(max_bytes) +
                                      " (transport.max_message_mib)");
        s.value = value;
        relay_finish(self);
      },
      [=](relay_fail_atom, const std::string& why) {
        if (self->current_sender() == self->state.target.address()) relay_fail(self, why);
      },
      [=](relay_timeout_atom) {
        relay_fail(self, "no whole reply within " + std::to_string(timeout.count()) + " ms");
        self->quit();
      },
  };
}

// `request` for a reply of type T that may be big (see the top). The caller handles the
// answer as it would a request's: .then, .await or .receive.
template <class T, class Self, class... Ts>
auto ask(Self* self, const caf::actor& target, std::chrono::milliseconds timeout, Ts&&... xs) {
  using namespace swarmrt::atoms;
  if (!target || target.node() == self->node())
    return self->request(target, timeout, std::forward<Ts>(xs)...);
  auto collector = self->system().spawn(relay_collector<T>, target, timeout, max_message());
  self->send(target, relay_atom::value, collector, static_cast<uint64_t>(timeout.count()),
             std::forward<Ts>(xs)...);
  return self->request(collector, timeout, collect_atom::value);
}

// Sends `value` to `collector` in slices; one that fits in a single slice goes whole, as a
// CAF message, whose deserialization (unlike a slice's) can make proxies of the actor handles
// it holds (a state offer names its donors, actors/recovery/).
template <class T, class Self>
void send_relay_slices(Self* self, const caf::actor& collector, const T& value) {
  using namespace swarmrt::atoms;
  std::optional<uint64_t> whole;  // its serialized size, when it goes whole
  auto post = [&](uint32_t i, uint32_t count, uint64_t total, std::vector<uint8_t> slice) {
    if (count == 1) {
      whole = total;
      return;
    }
    self->send(collector, relay_slice_atom::value, i, count, total, std::move(slice));
  };
  if (auto err = for_each_slice(self->system(), const_cast<T&>(value), post))
    return self->send(collector, relay_fail_atom::value,
                      "the reply does not serialize: " + self->system().render(err));
  if (whole) self->send(collector, relay_value_atom::value, *whole, value);
}

// The asked actor's side of `ask`: (relay_atom, collector, timeout_ms, xs...) answered by
// asking itself xs... and sending the answer to the collector in slices.
template <class T, class Self, class... Ts>
void relay(Self* self, const caf::actor& collector, uint64_t timeout_ms, Ts... xs) {
  using namespace swarmrt::atoms;
  self->request(caf::actor_cast<caf::actor>(self), std::chrono::milliseconds(timeout_ms), xs...)
      .then([=](const T& value) { send_relay_slices(self, collector, value); },
            [=](const caf::error& e) {
              self->send(collector, relay_fail_atom::value, self->system().render(e));
            });
}

}  // namespace swarmrt::transport
