// The frame links' inbox (bulk_inbox.hpp): a frame's bytes wait here for the actor that
// takes them, and frames named for an actor wake it.
#include "transport/bulk_inbox.hpp"

#include <spdlog/spdlog.h>
#include <atomic>
#include <chrono>
#include <deque>
#include <mutex>
#include <optional>
#include <unordered_map>
#include <unordered_set>
#include <vector>

namespace swarmrt::transport {
namespace {

// ---- the inbox: payloads and the actors waiting for them -------------------------------
struct Entry {
  std::optional<BulkDelivery> delivery;  // the bytes have come (or were refused)
  caf::actor waiter;                     // an actor has the CAF message and waits
  caf::actor sender;
  Envelope receiver;  // named by the frame link (micro-batch frames)
  std::chrono::steady_clock::time_point since = std::chrono::steady_clock::now();
};

struct Inbox {
  std::mutex mutex;
  std::unordered_map<uint64_t, Entry> entries;
  std::chrono::steady_clock::time_point swept = std::chrono::steady_clock::now();
};
Inbox& inbox() {
  static Inbox* i = new Inbox;  // never destroyed: reader threads may outlive main
  return *i;
}

// Half of a frame whose other half never came (a sender that died between its bytes and its
// CAF message, or the other way round) expires: the inbox stays bounded, and the micro-batch
// it belonged to is re-run by the tracker's timeout like any lost hop. Called with the lock.
constexpr auto kEntryTtl = std::chrono::seconds(120);
constexpr size_t kMaxEntries = 4096;
void sweep(Inbox& in) {
  const auto now = std::chrono::steady_clock::now();
  if (now - in.swept < std::chrono::seconds(5) && in.entries.size() < kMaxEntries) return;
  in.swept = now;
  const auto ttl = in.entries.size() < kMaxEntries ? kEntryTtl : std::chrono::seconds(5);
  size_t expired = 0;
  for (auto it = in.entries.begin(); it != in.entries.end();)
    if (now - it->second.since > ttl) {
      it = in.entries.erase(it);
      ++expired;
    } else {
      ++it;
    }
  if (expired > 0) spdlog::warn("frame link: {} half-arrived frame(s) expired unclaimed", expired);
}

// ---- actors that take micro-batch frames straight from the link ----------------------------
// An actor is known here from when it says so (take_frames_directly) until it ends; a frame
// may come for it before it has said so (its handle went out while it was still starting),
// and waits in the inbox for it. Ended ones are remembered (the most recent kMaxEnded), so a
// frame for one of them is dropped at once.
constexpr size_t kMaxEnded = 4096;
struct EnvelopeHash {
  size_t operator()(const Envelope& e) const { return e.actor * 0x9E3779B97F4A7C15ull ^ e.node; }
};
struct Receivers {
  std::mutex mutex;
  std::unordered_map<Envelope, caf::actor_addr, EnvelopeHash> by_id;
  std::unordered_set<Envelope, EnvelopeHash> ended;
  std::deque<Envelope> ended_order;
};
Receivers& receivers() {
  static Receivers* r = new Receivers;
  return *r;
}

// Frames whose receiver has ended: the tracker re-runs their micro-batches after its timeout.
std::atomic<uint64_t> g_dropped{0};
void log_dropped(const Envelope& to) {
  const auto n = ++g_dropped;
  if (n <= 5 || n % 100 == 0)
    spdlog::warn("frame link dropped a frame for actor {}, which has ended ({} so far)", to.actor,
                 n);
}

Envelope envelope_of(const caf::local_actor* self) {
  return {self->id(), node_fingerprint(self->node())};
}

}  // namespace

uint64_t dropped_frames() {
  return g_dropped.load();
}

uint64_t node_fingerprint(const caf::node_id& node) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : caf::to_string(node)) h = (h ^ c) * 0x100000001b3ull;
  return h;
}

void arrived(uint64_t id, BulkDelivery d, const Envelope& to) {
  auto& in = inbox();
  caf::actor wake;
  {
    std::lock_guard<std::mutex> lock(in.mutex);
    if (!(to == Envelope{})) {
      // Looked up under the inbox's lock: an actor that says it takes frames after this
      // finds the entry when it looks (take_frames_directly).
      auto& r = receivers();
      std::lock_guard<std::mutex> l(r.mutex);
      if (auto it = r.by_id.find(to); it != r.by_id.end())
        wake = caf::actor_cast<caf::actor>(it->second);
      else if (r.ended.count(to) > 0)
        return log_dropped(to);
    }
    sweep(in);
    auto& e = in.entries[id];
    e.delivery = std::move(d);
    e.receiver = to;
    if (wake) e.waiter = wake;
    wake = e.waiter;
  }
  if (wake) caf::anon_send(wake, bulk_ready_atom::value, id);
}

void take_frames_directly(caf::local_actor* self) {
  auto& r = receivers();
  const auto id = envelope_of(self);
  {
    std::lock_guard<std::mutex> lock(r.mutex);
    r.by_id[id] = self->address();
  }
  self->attach_functor([id] {
    auto& r = receivers();
    std::lock_guard<std::mutex> lock(r.mutex);
    r.by_id.erase(id);
    if (r.ended.insert(id).second) r.ended_order.push_back(id);
    if (r.ended_order.size() > kMaxEnded) {
      r.ended.erase(r.ended_order.front());
      r.ended_order.pop_front();
    }
  });
  // Frames that came before it said so.
  std::vector<uint64_t> waiting;
  auto& in = inbox();
  {
    std::lock_guard<std::mutex> lock(in.mutex);
    for (auto& [mid, e] : in.entries)
      if (e.receiver == id && !e.waiter) {
        e.waiter = caf::actor_cast<caf::actor>(self);
        waiting.push_back(mid);
      }
  }
  for (auto mid : waiting)
    caf::anon_send(caf::actor_cast<caf::actor>(self), bulk_ready_atom::value, mid);
}

std::optional<BulkDelivery> claim_bulk(caf::local_actor* self, uint64_t id) {
  auto& in = inbox();
  std::lock_guard<std::mutex> lock(in.mutex);
  sweep(in);
  auto& e = in.entries[id];
  auto sender = caf::actor_cast<caf::actor>(self->current_sender());
  if (e.delivery) {
    auto d = std::move(*e.delivery);
    d.sender = sender;
    in.entries.erase(id);
    return d;
  }
  e.waiter = caf::actor_cast<caf::actor>(self);
  e.sender = sender;
  return std::nullopt;
}

std::optional<BulkDelivery> take_bulk(uint64_t id) {
  auto& in = inbox();
  std::lock_guard<std::mutex> lock(in.mutex);
  auto it = in.entries.find(id);
  if (it == in.entries.end() || !it->second.delivery) return std::nullopt;
  auto d = std::move(*it->second.delivery);
  d.sender = it->second.sender;
  in.entries.erase(it);
  return d;
}

}  // namespace swarmrt::transport
