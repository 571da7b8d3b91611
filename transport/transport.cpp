#include "transport/transport.hpp"

#include <spdlog/spdlog.h>
#include <random>

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
