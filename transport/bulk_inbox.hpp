// The receiving side of the frame links (bulk.hpp): the inbox where a frame's bytes and its
// receiver meet, and the actors that take micro-batch frames straight from a link.
#pragma once

#include <caf/all.hpp>
#include <cstddef>
#include <cstdint>

#include "transport/bulk.hpp"

namespace swarmrt::transport {

// Every message on a frame link starts with an envelope naming the actor that takes it (a
// micro-batch frame, which no CAF message announces): its u64 id and the fingerprint of its
// node (actor ids count per actor system, and a process may hold more than one, as tests
// do). Both 0: a frame announced over CAF (bulk_atom), whose receiver then knows its sender.
struct Envelope {
  uint64_t actor = 0;
  uint64_t node = 0;
  bool operator==(const Envelope& o) const { return actor == o.actor && node == o.node; }
};
constexpr size_t kEnvelope = 16;
// The same 64 bits for the same node in every process (FNV-1a of its printed id).
uint64_t node_fingerprint(const caf::node_id& node);

// A message has come in whole (or was refused), from a link's reader thread, for `to`.
void arrived(uint64_t id, BulkDelivery d, const Envelope& to);

}  // namespace swarmrt::transport
