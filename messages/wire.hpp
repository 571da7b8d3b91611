// Frames as bytes, for moving micro-batches and round messages between CPU processes: the
// encoded header, then every tensor's raw bytes, cut into chunks of at most `max_chunk` bytes
// so no single message exceeds what one transport frame may carry (BASP frames are bounded
// and serialized on one I/O thread, so big tensors must not block control traffic).
//
// A chunk: "SWTC" | u32 version | u64 message id | u32 index | u32 count | u64 total bytes
//          | u64 offset | u32 slice length | u32 reserved | slice
// The slices of one message, in index order, are: u32 header length | header | payloads.
//
// Reassembly trusts nothing: chunks that disagree with each other, sizes past the limits, a
// header that does not decode or tensors whose bytes do not add up are refused with a reason.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <vector>

#include "messages/header.hpp"
#include "messages/types.hpp"

namespace swarmrt::messages {

constexpr size_t kChunkPrefix = 4 + 4 + 8 + 4 + 4 + 8 + 8 + 4 + 4;
constexpr size_t kDefaultMaxChunk = size_t{32} << 20;       // 32 MiB per chunk
constexpr uint64_t kDefaultMaxMessage = uint64_t{4} << 30;  // 4 GiB per message

enum class FrameKind : uint8_t { microbatch = 0, round = 1 };

// A frame laid out as chunks without copying its tensors: each chunk is its prefix and byte
// ranges into the plan's own copy of the header and the tensors the plan keeps alive, for a
// writer that sends them straight from memory (writev).
struct ChunkPlan {
  struct Slice {
    const uint8_t* data;
    size_t size;
  };
  struct Chunk {
    std::vector<uint8_t> prefix;
    std::vector<Slice> slices;
    size_t bytes = 0;  // prefix and slices
  };
  std::vector<Chunk> chunks;
  std::vector<uint8_t> message_prefix;
  std::vector<uint8_t> header;
  std::vector<at::Tensor> tensors;
};
std::unique_ptr<ChunkPlan> plan_chunks(const Frame& frame, FrameKind kind, uint64_t message_id,
                                       size_t max_chunk = kDefaultMaxChunk);

// The fields of a chunk's prefix (kChunkPrefix bytes); throws DecodeError on a bad magic or
// version. The caller checks the rest, as Reassembler::add does.
struct ChunkPrefix {
  uint64_t message_id = 0;
  uint32_t index = 0;
  uint32_t count = 0;
  uint64_t total = 0;
  uint64_t offset = 0;
  uint32_t length = 0;
};
ChunkPrefix parse_chunk_prefix(const uint8_t* data);

// Splits a frame into chunks. Tensors are written in their native byte order (every node of a
// swarm is little-endian x86-64 or aarch64; the handshake checks the rest of the build).
std::vector<std::vector<uint8_t>> to_chunks(const Frame& frame, FrameKind kind, uint64_t message_id,
                                            size_t max_chunk = kDefaultMaxChunk);

// Collects chunks of any number of interleaved messages; returns each frame when its last
// chunk arrives. A refused chunk throws DecodeError and drops that message's partial state.
class Reassembler {
 public:
  explicit Reassembler(uint64_t max_message = kDefaultMaxMessage, size_t max_pending = 64)
      : max_message_(max_message), max_pending_(max_pending) {}

  struct Complete {
    FrameKind kind;
    Frame frame;
  };
  std::optional<Complete> add(const uint8_t* data, size_t size);
  std::optional<Complete> add(const std::vector<uint8_t>& chunk) {
    return add(chunk.data(), chunk.size());
  }
  size_t pending() const { return partial_.size(); }

 private:
  struct Partial {
    uint32_t count = 0;
    uint64_t total = 0;
    uint64_t received = 0;
    uint32_t next_index = 0;
    std::vector<uint8_t> bytes;
  };
  uint64_t max_message_;
  size_t max_pending_;
  std::map<uint64_t, Partial> partial_;
};

// Turns a whole message's bytes (the concatenated slices) into a frame; used by the
// reassembler and directly by the fuzz target.
Reassembler::Complete decode_message(const uint8_t* data, size_t size);
// The same, with tensors that are views of `data` where their alignment allows; `owner` keeps
// the bytes alive as long as any of those tensors.
Reassembler::Complete decode_message(const uint8_t* data, size_t size,
                                     const std::shared_ptr<void>& owner);

}  // namespace swarmrt::messages
