// Which donor sends which chunk of a state a joiner fetches from several donors at once
// (actors/recovery/state_fetcher.cpp). Every donor holds the same bytes; each is kept busy with
// up to `window` chunks asked and not yet arrived, so fast donors send more chunks than slow
// ones. A donor that is dropped (died, stalled, sent a chunk that fails its checksum) gives its
// unfinished chunks back, and the next donor to ask takes them first: what is fetched again is
// at most what the dropped donor had not delivered, and nothing that arrived is fetched twice.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <optional>
#include <set>
#include <vector>

namespace swarmrt::policy {

class ChunkSchedule {
 public:
  ChunkSchedule(uint32_t chunks, size_t donors, uint32_t window);

  // The next chunk donor `d` should be asked for, or none (its window is full, it was
  // dropped, or every chunk is asked or done). The caller asks for it at once.
  std::optional<uint32_t> next(size_t d);
  // Chunk `c` arrived from donor `d` whole and checked: true when `d` was asked for it and it
  // was not done yet (anything else is ignored by the caller).
  bool arrived(size_t d, uint32_t c);
  // Donor `d` is no longer asked; its chunks asked and not arrived are handed out again.
  // Returns how many that were.
  size_t drop(size_t d);

  bool complete() const { return done_count_ == done_.size(); }
  uint32_t done_count() const { return done_count_; }
  uint32_t chunks() const { return static_cast<uint32_t>(done_.size()); }
  size_t live_donors() const;
  bool dropped(size_t d) const { return donors_.at(d).dropped; }
  size_t asked_of(size_t d) const { return donors_.at(d).asked.size(); }
  // Chunks donor `d` delivered, and chunks asked again after a drop (both for the log).
  uint64_t delivered_by(size_t d) const { return donors_.at(d).delivered; }
  uint64_t asked_again() const { return asked_again_; }

 private:
  struct Donor {
    std::set<uint32_t> asked;
    bool dropped = false;
    uint64_t delivered = 0;
  };
  std::vector<Donor> donors_;
  std::vector<bool> done_;
  std::deque<uint32_t> pending_;  // not asked of anyone, given-back chunks first
  std::set<uint32_t> given_back_;
  uint32_t window_;
  uint32_t done_count_ = 0;
  uint64_t asked_again_ = 0;
};

}  // namespace swarmrt::policy
