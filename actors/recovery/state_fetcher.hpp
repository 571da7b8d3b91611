// A joiner's fetcher: takes a stage's state from every donor the tracker named at once
// (state_donor.hpp), in checksummed chunks, and answers its worker with the state assembled.
//
//   (fetch_state_atom) -> WorkerState   asked once, by the worker that spawned it
//
// Each donor is asked for its manifest first; the manifest most donors agree on is the one
// assembled, and a donor whose manifest differs (another step, other bytes) is never asked for
// a chunk, so chunks of different states never mix. Then each donor has up to `window` chunks
// asked at a time (policy::ChunkSchedule). A donor that goes down, stops sending for
// `chunk_timeout`, refuses a chunk or sends one that fails its checksum is dropped, and its
// unfinished chunks are asked of the others; what arrived stays. A donor serving too many
// joiners says so; it is asked again later and takes part once it has a turn. The fetch fails
// only when no donor is left with chunks missing, or past `deadline`.
#pragma once

#include <caf/all.hpp>
#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "actors/recovery/snapshot.hpp"
#include "policy/chunk_schedule.hpp"
#include "transport/transport.hpp"

namespace swarmrt::actors::recovery {

struct FetchSettings {
  uint32_t window = 4;
  std::chrono::milliseconds chunk_timeout{10000};
  std::chrono::milliseconds deadline{600000};
  uint64_t max_bytes = messages::kDefaultMaxMessage;
  std::string endpoint;  // this process's frame link, where donors send chunks
  std::string who;       // for the log: "worker 7"
};

// What a fetch did, for its log line, tests and the benchmark.
struct FetchReport {
  uint64_t bytes = 0;
  uint32_t chunks = 0;
  std::vector<uint64_t> chunks_from;  // per donor, in the order given
  uint64_t chunks_again = 0;          // asked again after their donor was dropped
  uint64_t bytes_again = 0;
  uint32_t donors_dropped = 0;
  double seconds = 0;
};

struct fetcher_state {
  std::vector<caf::actor> donors;
  int64_t step = -1;
  FetchSettings settings;
  std::shared_ptr<FetchReport> report;
  std::vector<std::optional<messages::StateManifest>> manifests;
  std::vector<bool> answered, busy;  // per donor: manifest answered (or failed); said busy
  std::optional<messages::StateManifest> manifest;  // the one assembled
  std::optional<policy::ChunkSchedule> schedule;
  std::vector<std::chrono::steady_clock::time_point> last_progress;
  std::vector<char> bytes;
  transport::ChunkReceiver receiver;
  std::optional<caf::response_promise> promise;
  std::optional<messages::WorkerState> result;
  std::string error;
  std::chrono::steady_clock::time_point started = std::chrono::steady_clock::now();
  static inline const char* name = "state fetcher";
};

caf::behavior state_fetcher(caf::stateful_actor<fetcher_state>* self,
                            std::vector<caf::actor> donors, int64_t step, FetchSettings settings,
                            std::shared_ptr<FetchReport> report);

}  // namespace swarmrt::actors::recovery
