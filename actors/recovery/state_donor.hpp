// A worker's donor: serves the snapshot its worker took (snapshot.hpp) to joiners in chunks,
// beside the worker, so a transfer never waits for the worker's compute and the worker never
// waits for a transfer.
//
//   (manifest_atom, step, endpoint) -> StateManifest   registers the asker as a joiner; refused
//        when the snapshot is not of `step`, or while `max_joiners` others are being served
//        (the asker takes a turn later). `endpoint`: the asker's frame link, where chunks go.
//   (state_chunk_atom, step, index)  the chunk, sent back as a frame; a joiner that is not
//        registered, or a snapshot no longer of `step`, gets (state_chunk_atom, step, index, why)
//   (fetch_done_atom)                 the joiner is done: its turn goes to another
//
// Memory is bounded by one snapshot (the worker keeps only its newest) and the chunks in
// flight: each joiner asks for at most recovery.window chunks at a time. A joiner that goes
// down or stays silent past `linger` loses its turn; a snapshot no joiner has used for
// `linger` is dropped. The donor ends with its worker.
#pragma once

#include <caf/all.hpp>
#include <chrono>
#include <map>
#include <memory>

#include "actors/recovery/snapshot.hpp"

namespace swarmrt::actors::recovery {

struct DonorLimits {
  uint32_t max_joiners = 4;
  std::chrono::milliseconds linger{60000};
  // Fault injection for tests: after serving this many chunks the donor ends as killed
  // (0: never), as a donor whose process dies mid-transfer.
  uint64_t die_after_chunks = 0;
};

struct donor_state {
  std::shared_ptr<SnapshotStore> store;
  DonorLimits limits;
  // Registered joiners and when each last asked for something.
  std::map<caf::actor_addr, std::chrono::steady_clock::time_point> joiners;
  std::chrono::steady_clock::time_point last_use = std::chrono::steady_clock::now();
  uint64_t served = 0;
  static inline const char* name = "state donor";
};

caf::behavior state_donor(caf::stateful_actor<donor_state>* self, caf::actor worker,
                          std::shared_ptr<SnapshotStore> store, DonorLimits limits);

}  // namespace swarmrt::actors::recovery
