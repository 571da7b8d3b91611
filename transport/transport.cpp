#include "transport/transport.hpp"

#include <spdlog/spdlog.h>
#include <atomic>
#include <mutex>
#include <random>
#include <set>

#include "transport/bulk.hpp"

namespace swarmrt::transport {
using namespace swarmrt::atoms;

namespace {

// Message ids only need to be distinct among the messages in flight to one receiver; a
// random 64-bit start per thread makes collisions between senders negligible.
uint64_t next_message_id() {
  thread_local uint64_t next = std::random_device{}() * 0x9E3779B97F4A7C15ull;
  return ++next;
}

}  // namespace

void LocalTransport::send(caf::local_actor* self, const caf::actor& to, messages::FrameKind kind,
                          messages::Frame frame) {
  if (kind == messages::FrameKind::microbatch)
    caf::unsafe_send_as(self, to, frame_atom::value, std::move(frame));
  else
    caf::unsafe_send_as(self, to, round_atom::value, std::move(frame));
}

void ChunkTransport::send(caf::local_actor* self, const caf::actor& to, messages::FrameKind kind,
                          messages::Frame frame) {
  for (auto& chunk : messages::to_chunks(frame, kind, next_message_id(), max_chunk_))
    caf::unsafe_send_as(self, to, chunk_atom::value, std::move(chunk));
}

namespace {

struct Partitions {
  std::atomic<bool> any{false};
  std::atomic<uint64_t> lost{0};
  std::mutex mutex;
  std::set<std::string> peers;
};
Partitions& cut() {
  static Partitions* p = new Partitions;  // never destroyed: senders may outlive main
  return *p;
}

}  // namespace

void partition_from(const std::string& peer) {
  auto& c = cut();
  std::lock_guard<std::mutex> lock(c.mutex);
  c.peers.insert(peer);
  c.any = true;
}

void heal_partitions() {
  auto& c = cut();
  std::lock_guard<std::mutex> lock(c.mutex);
  c.peers.clear();
  c.any = false;
}

std::vector<std::string> partitions() {
  auto& c = cut();
  std::lock_guard<std::mutex> lock(c.mutex);
  return {c.peers.begin(), c.peers.end()};
}

bool cut_off(const caf::actor& to) {
  auto& c = cut();
  if (!c.any.load(std::memory_order_relaxed) || !to) return false;
  const auto node = caf::to_string(to.node());
  std::lock_guard<std::mutex> lock(c.mutex);
  if (c.peers.count(node) == 0) return false;
  ++c.lost;
  return true;
}

uint64_t partitioned_frames() {
  return cut().lost.load();
}

void send_frame(caf::local_actor* self, const caf::actor& to, messages::FrameKind kind,
                messages::Frame frame) {
  if (cut_off(to)) return;
  for_peer(self, to).send(self, to, kind, std::move(frame));
}

Transport& for_peer(const caf::local_actor* self, const caf::actor& to) {
  static LocalTransport local;
  static ChunkTransport chunks;
  static BulkTransport bulk;
  if (to.node() == self->node()) return local;
  if (endpoint_of(to.node())) return bulk;
  return chunks;
}

std::optional<messages::Reassembler::Complete> ChunkReceiver::add(const std::vector<uint8_t>& chunk,
                                                                  const std::string& who) {
  try {
    return reassembler_.add(chunk);
  } catch (const messages::DecodeError& e) {
    ++refused_;
    last_reason_ = e.what();
    spdlog::warn("{} refused a chunk: {}", who, e.what());
    return std::nullopt;
  }
}

}  // namespace swarmrt::transport
