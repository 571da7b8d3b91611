// Frames between processes over a plain TCP connection beside CAF's: the tensor bytes of a
// frame (in the same checked chunk format as ChunkTransport) go over a socket this process
// keeps per peer process, written by its own thread, so CAF's I/O thread never copies the
// tensors.
//
// A micro-batch frame travels on the link alone: its envelope names the receiving actor, and
// the link's reader thread tells that actor (bulk_ready_atom, id) once the bytes are in — no
// CAF message per hop, whose cost (a TLS record and a wake-up of the middleman at both ends)
// was most of what a pipeline across processes lost against one process. Its sender is in the
// frame (the micro-batch's route). A round frame is announced over CAF as (bulk_atom, id) from
// the sending actor, so the DiLoCo group knows whom to answer; whichever of the two arrives
// first waits for the other in this process's inbox.
//
// Every process that receives frames runs one BulkServer; its endpoint travels with the
// membership (Member::endpoint) and the join reply, and senders pick this transport for a peer
// whose node has a known endpoint (for_peer in transport.hpp), CAF chunks otherwise.
#pragma once

#include <caf/all.hpp>
#include <chrono>
#include <optional>
#include <string>

#include "transport/transport.hpp"

namespace swarmrt::transport {

using atoms::bulk_atom;        // id of a frame on the side
using atoms::bulk_ready_atom;  // the inbox: it has come

// Starts this process's listening end on `host` (port chosen by the kernel) once; returns its
// "host:port", or empty with the reason logged when it cannot listen.
std::string start_bulk_server(const std::string& host);
std::string bulk_endpoint();

// Every connection to a frame link proves the cluster credential (credential.hpp) before a
// frame is read; at most 32 connections may be proving it at once and 512 be open, the rest
// are closed at once. A message larger than `bytes` is refused before anything is allocated
// for it (RunConfig::max_message_bytes). Connections refused so far, for tests and logs.
void set_max_message(uint64_t bytes);
uint64_t max_message();
uint64_t refused_connections();
// Frame links this process opened inside TLS (transport.encrypt), for tests and logs.
uint64_t encrypted_links();

// Which endpoint serves the actors of a node.
void register_endpoint(const caf::node_id& node, const std::string& endpoint);
std::optional<std::string> endpoint_of(const caf::node_id& node);
// The measured bytes/s of this process's frame link to `node` (transport/delivery.hpp, while
// measure_links is on); 0: unknown or no link.
double link_bytes_per_s(const caf::node_id& node);
// How long a message of `bytes` takes on that link (delivery.hpp); negative: unknown.
double link_seconds_for(const caf::node_id& node, uint64_t bytes);

// Fault injection: every message this process writes on a frame link waits `ms` first
// (chaos.link_delay_ms), so links behave like slow, far ones.
void set_link_delay(double ms);
// Fault injection: every frame link of this process carries at most `mbit_s` megabits a
// second (chaos.link_mbit_s; 0: no cap), paced per link, so a link behaves like a thin one.
void set_link_bandwidth(double mbit_s);
// The same cap for payloads that travel as CAF messages rather than on a frame link (the
// gradients of grad-sync modes): how long `bytes` sent now to `peer` take to arrive behind
// what was sent to it before. Zero without a cap or to this process's own node. The sender
// delays the message by it (delayed_send), so the link is thin and the sender is not blocked.
std::chrono::microseconds paced_delay(const caf::node_id& self, const caf::node_id& peer,
                                      uint64_t bytes);

class BulkTransport final : public Transport {
 public:
  const char* name() const override { return "bulk"; }
  void send(caf::local_actor* self, const caf::actor& to, messages::FrameKind kind,
            messages::Frame frame) override;
};

// What a receiving actor gets: the frame and the actor that sent it (none for a micro-batch
// frame), or why it was refused.
struct BulkDelivery {
  messages::FrameKind kind = messages::FrameKind::microbatch;
  messages::Frame frame;
  caf::actor sender;
  std::string error;
};

// An actor that takes micro-batch frames calls this once: frames the link names it for are
// delivered to it until it ends (a frame for an actor that has ended is read and dropped).
void take_frames_directly(caf::local_actor* self);
// Frames this process dropped because the actor they named had ended, for tests and logs.
uint64_t dropped_frames();

// For (bulk_atom, id): the frame if its bytes are here, otherwise the inbox sends
// (bulk_ready_atom, id) to `self` when they come.
std::optional<BulkDelivery> claim_bulk(caf::local_actor* self, uint64_t id);
// For (bulk_ready_atom, id).
std::optional<BulkDelivery> take_bulk(uint64_t id);

}  // namespace swarmrt::transport
