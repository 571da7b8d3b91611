// How a frame (a micro-batch hop, a DiLoCo round) reaches another actor. One interface, three
// ways: by reference inside a process, as checked chunks over CAF's middleman between CPU
// processes, and over NCCL between CUDA devices (nccl_transport.hpp, CUDA builds only).
// Receivers see the same (frame_atom | round_atom, Frame) message whichever way it came.
#pragma once

#include <caf/all.hpp>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "messages/types.hpp"
#include "messages/wire.hpp"

namespace swarmrt::transport {

class Transport {
 public:
  virtual ~Transport() = default;
  virtual const char* name() const = 0;
  virtual void send(caf::local_actor* self, const caf::actor& to, messages::FrameKind kind,
                    messages::Frame frame) = 0;
};

// Same process: the frame and its tensors are handed over by reference, never copied.
class LocalTransport final : public Transport {
 public:
  const char* name() const override { return "local"; }
  void send(caf::local_actor* self, const caf::actor& to, messages::FrameKind kind,
            messages::Frame frame) override;
};

// Another process: the frame is cut into chunks of at most `max_chunk` bytes (32 MiB), each
// sent as (chunk_atom, bytes), so a big tensor never holds up control traffic on the link.
class ChunkTransport final : public Transport {
 public:
  explicit ChunkTransport(size_t max_chunk = messages::kDefaultMaxChunk) : max_chunk_(max_chunk) {}
  const char* name() const override { return "chunks"; }
  void send(caf::local_actor* self, const caf::actor& to, messages::FrameKind kind,
            messages::Frame frame) override;

 private:
  size_t max_chunk_;
};

// The transport for a peer: local when it lives in this actor system, chunks otherwise.
Transport& for_peer(const caf::local_actor* self, const caf::actor& to);
// Sends over for_peer's transport, unless `to` is cut off (below): then the frame is lost.
void send_frame(caf::local_actor* self, const caf::actor& to, messages::FrameKind kind,
                messages::Frame frame);

// Fault injection (the console's `partition A B`, told to both A and B): every frame this
// process sends to an actor of the process `peer` names (caf::to_string of its node id) is
// lost, as on a cut network link, until heal_partitions(). Senders of micro-batch hops over
// communicator links ask cut_off() too. Control messages still pass: the console heals
// through them, and the coordinator sees both sides, as it would past a partition between
// two machines it reaches by other routes.
void partition_from(const std::string& peer);
void heal_partitions();
std::vector<std::string> partitions();
// Whether a frame to `to` must be lost now (counted when it is); one atomic load while no
// partition is set.
bool cut_off(const caf::actor& to);
uint64_t partitioned_frames();

// The receiving side of ChunkTransport, one per actor: chunks of interleaved messages from
// any number of senders become frames again. A refused chunk is logged with its reason and
// counted; the actor keeps serving.
class ChunkReceiver {
 public:
  explicit ChunkReceiver(uint64_t max_message = messages::kDefaultMaxMessage)
      : reassembler_(max_message) {}
  std::optional<messages::Reassembler::Complete> add(const std::vector<uint8_t>& chunk,
                                                     const std::string& who);
  uint64_t refused() const { return refused_; }
  const std::string& last_reason() const { return last_reason_; }

 private:
  messages::Reassembler reassembler_;
  uint64_t refused_ = 0;
  std::string last_reason_;
};

}  // namespace swarmrt::transport
