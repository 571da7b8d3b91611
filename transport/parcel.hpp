// Big one-way messages between processes in slices: a stage's gradient to its averager and the
// averaged sum back (grad-sync modes) are as large as the stage's parameters, and as one CAF
// message they outlast the control plane's connection timeout (relay.hpp says why); a
// gpt2-small `swarm` run with two workers across processes lost its nodes at step 1.
//
// `send_parcel` is `send` to an actor of this process; to one of another process it serializes
// the message and sends it as (parcel_atom, id, index, count, total, slice) messages. The
// receiver keeps a ParcelInbox in its state and hands each parcel_atom to it: once a parcel is
// whole, its message is handed to the actor's active behaviour at once, with the slices'
// sender as the sender, as if it had come in one piece.
#pragma once

#include <spdlog/spdlog.h>
#include <caf/all.hpp>
#include <caf/binary_deserializer.hpp>
#include <map>
#include <optional>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "messages/atoms.hpp"
#include "transport/bulk.hpp"
#include "transport/relay.hpp"

namespace swarmrt::transport {

inline std::atomic<uint64_t> g_parcels_sliced{0};  // parcels this process sent in slices

// `self->send(to, xs...)`, or `delayed_send` after `delay` when it is positive (a paced link),
// in slices when `to` lives in another process.
template <class Self, class... Ts>
void send_parcel(Self* self, const caf::actor& to, caf::timespan delay, Ts&&... xs) {
  using namespace swarmrt::atoms;
  auto post = [&](auto&&... ys) {
    if (delay.count() > 0)
      self->delayed_send(to, delay, std::forward<decltype(ys)>(ys)...);
    else
      self->send(to, std::forward<decltype(ys)>(ys)...);
  };
  if (!to || to.node() == self->node()) return post(std::forward<Ts>(xs)...);
  auto msg = caf::make_message(std::forward<Ts>(xs)...);
  static std::atomic<uint64_t> next{std::random_device{}()};
  const uint64_t id = next.fetch_add(1);
  ++g_parcels_sliced;
  auto slice = [&](uint32_t i, uint32_t count, uint64_t total, std::vector<uint8_t> bytes) {
    post(parcel_atom::value, id, i, count, total, std::move(bytes));
  };
  if (auto err = for_each_slice(self->system(), msg, slice))
    spdlog::error("a message to another process does not serialize: {}",
                  self->system().render(err));
}

// The receiving side, one per actor. A sender's slices come in order (CAF keeps the order
// between two actors), so a new parcel from a sender ends any it left unfinished (it died
// or was cut off mid-parcel); at most kMaxOpen senders may have one open.
class ParcelInbox {
 public:
  static constexpr size_t kMaxOpen = 64;

  // Takes a slice; the parcel's message once it is whole, else nothing. A slice that breaks
  // the rules drops its parcel with a warning naming `who` and the reason.
  std::optional<caf::message> add(caf::actor_system& sys, const caf::actor_addr& from, uint64_t id,
                                  uint32_t index, uint32_t count, uint64_t total,
                                  const std::vector<uint8_t>& slice, const std::string& who) {
    std::string why;
    auto it = open_.find(from);
    if (index == 0) {
      if (it != open_.end()) open_.erase(it);
      it = open_.end();
      if (total > max_message())
        why = "a message of " + std::to_string(total) + " bytes exceeds the limit of " +
              std::to_string(max_message()) + " (transport.max_message_mib)";
      else if (count != slice_count(total))
        why = "a message of " + std::to_string(total) + " bytes cannot come in " +
              std::to_string(count) + " slices";
      else if (open_.size() >= kMaxOpen)
        why = "too many messages in slices at once";
      if (why.empty()) {
        it = open_.emplace(from, Open{id, count, total, 0, {}}).first;
        it->second.bytes.reserve(total);
      }
    } else if (it == open_.end() || it->second.id != id || it->second.next != index ||
               it->second.count != count || it->second.total != total) {
      why = "slice " + std::to_string(index) + " of a message it did not see begin";
    }
    if (why.empty() &&
        (slice.size() > kRelaySlice || it->second.bytes.size() + slice.size() > it->second.total))
      why = "slice " + std::to_string(index) + " overruns its message";
    if (!why.empty()) {
      // Only the parcel the slice belongs to is dropped (a stray slice leaves another open).
      if (it != open_.end() && it->second.id == id) open_.erase(it);
      ++refused_;
      spdlog::warn("{} refused a message in slices: {}", who, why);
      return std::nullopt;
    }
    auto& p = it->second;
    p.bytes.insert(p.bytes.end(), slice.begin(), slice.end());
    if (++p.next < p.count) return std::nullopt;
    caf::message msg;
    caf::binary_deserializer source{sys, reinterpret_cast<const char*>(p.bytes.data()),
                                    p.bytes.size()};
    const bool whole = p.bytes.size() == p.total;
    auto err = whole ? source(msg) : caf::error{};
    open_.erase(it);
    if (!whole || err) {
      ++refused_;
      spdlog::warn("{} refused a message in slices: {}", who,
                   whole ? "it does not decode: " + sys.render(err) : "its slices end early");
      return std::nullopt;
    }
    return msg;
  }
  uint64_t refused() const { return refused_; }

 private:
  struct Open {
    uint64_t id;
    uint32_t count;
    uint64_t total;
    uint32_t next;
    std::vector<uint8_t> bytes;
  };
  std::map<caf::actor_addr, Open> open_;
  uint64_t refused_ = 0;
};

// (parcel_atom, id, index, count, total, slice) for an actor whose state has `parcels` (a
// ParcelInbox): a whole parcel's message goes to the active behaviour at once (a copy of it:
// the handler may `become` another).
template <class Self>
void take_parcel(Self* self, uint64_t id, uint32_t index, uint32_t count, uint64_t total,
                 const std::vector<uint8_t>& slice, const std::string& who) {
  auto msg = self->state.parcels.add(self->system(),
                                     caf::actor_cast<caf::actor_addr>(self->current_sender()), id,
                                     index, count, total, slice, who);
  if (!msg) return;
  caf::behavior current = self->bhvr_stack().back();
  current(*msg);
}

}  // namespace swarmrt::transport
