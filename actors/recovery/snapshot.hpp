// A worker's state as its donor serves it to a joiner (state_donor.hpp, state_fetcher.hpp):
// serialized once, cut into chunks, each chunk with its CRC-32. Workers of one stage hold equal
// states between steps (grad-sync modes); their snapshots are byte for byte equal, so a joiner
// can take any chunk from any of them and check it against one manifest.
#pragma once

#include <caf/all.hpp>
#include <cstdint>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

#include "messages/types.hpp"

namespace swarmrt::actors::recovery {

struct Snapshot {
  messages::StateManifest manifest;
  std::vector<char> bytes;
};

// `st` serialized (it must be canonical: the optimizer as tensors, `moments`, not as torch's
// bytes; see model::adamw_moments) and cut into chunks of `chunk_bytes`.
std::shared_ptr<const Snapshot> make_snapshot(caf::actor_system& sys,
                                              const messages::WorkerState& st,
                                              uint32_t chunk_bytes);
uint32_t crc_of(const char* data, size_t n);
// Where chunk `index` lies in the bytes: (offset, length).
std::pair<uint64_t, uint64_t> chunk_range(const messages::StateManifest& m, uint32_t index);
// Whether a manifest is one a joiner can assemble: its chunks cover `total` exactly, and
// `total` is within `max_bytes`. Empty when so, else why not.
std::string check_manifest(const messages::StateManifest& m, uint64_t max_bytes);
// The state assembled from a snapshot's bytes; an error when they do not decode.
caf::expected<messages::WorkerState> decode_state(caf::actor_system& sys,
                                                  const std::vector<char>& bytes);

// A chunk on the wire: a round frame (it travels on the frame link between processes) whose
// header says "state chunk", the snapshot's step (step) and the chunk's index (round_id), and
// whose one tensor holds the chunk's bytes.
messages::Frame chunk_frame(int64_t step, uint32_t index, const char* data, size_t n);
struct Chunk {
  int64_t step = -1;
  uint32_t index = 0;
  at::Tensor bytes;  // uint8, contiguous
};
// Throws messages::DecodeError when the frame is not a state chunk.
Chunk open_chunk_frame(const messages::Frame& frame);

// The newest snapshot of one worker: its worker puts it, its donor actor reads it.
class SnapshotStore {
 public:
  void put(std::shared_ptr<const Snapshot> s);
  std::shared_ptr<const Snapshot> get() const;
  bool holds(int64_t step) const;
  // Drops the snapshot if it is still the one of `step` (a newer one stays).
  void drop(int64_t step);

 private:
  mutable std::mutex mutex_;
  std::shared_ptr<const Snapshot> snapshot_;
};

}  // namespace swarmrt::actors::recovery
