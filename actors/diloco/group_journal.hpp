// What a standby needs of each DiLoCo group to take over without running a step again: the
// group's store (θ, the outer momentum, the applied rounds of every fragment) written to the
// shared run directory after every applied round, before any worker hears of it. The workers
// of a stage hold θ too (their anchors), but not the outer momentum, which only the group
// has; so the file is written before the round is answered, and a worker that took θ(t)
// implies a journal entry of round t on disk.
//
// One checksummed file per stage and step (run_dir/diloco/group-K-step-S.ckpt, written aside
// and renamed, under the leader's write fence): the step is the one whose round it applied,
// so a new leader that continues after step S (the last step record) takes each stage's
// newest entry at a step <= S. A stage keeps its two newest steps: the step after the last
// record may have applied a round no record says was taken.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "actors/diloco/diloco_group.hpp"

namespace swarmrt::actors {

class GroupJournal {
 public:
  explicit GroupJournal(std::string dir) : dir_(std::move(dir)) {}
  const std::string& dir() const { return dir_; }

  // Writes stage `stage`'s store as of `step` (the caller holds store.mu) and drops the
  // stage's entries older than its two newest steps; the bytes of the file. Throws
  // model::CheckpointError when the file cannot be written (a fenced leader exits instead).
  uint64_t write(uint32_t stage, uint64_t step, const GroupStore& store) const;
  // The stage's newest entry at a step <= `step` into `store`; its step, or nullopt when it
  // has none that reads back intact (each refused file through `on_refused(path, why)`).
  std::optional<uint64_t> restore(
      uint32_t stage, uint64_t step, GroupStore& store,
      const std::function<void(const std::string&, const std::string&)>& on_refused = {}) const;
  // Removes the entries of every stage after `step` (every entry when step < 0): a run that
  // continues from an earlier point writes its own.
  void drop_after(int64_t step) const;
  // Removes stage `stage`'s entries (a write failed: an older entry would not match θ).
  void forget(uint32_t stage) const;

 private:
  std::string dir_;
};

// The journal of a run that goes on from `step` (its start, a checkpoint's): every entry goes
// and each stage's store is written at that step. A stage whose write fails is left with no
// entry (logged), so a takeover resumes from a checkpoint rather than from a wrong round.
void start_journal(const std::vector<GroupStorePtr>& stores, uint64_t step);

}  // namespace swarmrt::actors
