#include "policy/chunk_schedule.hpp"

#include <algorithm>
#include <stdexcept>

namespace swarmrt::policy {

ChunkSchedule::ChunkSchedule(uint32_t chunks, size_t donors, uint32_t window)
    : donors_(donors), done_(chunks, false), window_(std::max<uint32_t>(window, 1)) {
  for (uint32_t c = 0; c < chunks; ++c) pending_.push_back(c);
}

std::optional<uint32_t> ChunkSchedule::next(size_t d) {
  auto& donor = donors_.at(d);
  if (donor.dropped || donor.asked.size() >= window_) return std::nullopt;
  while (!pending_.empty()) {
    const uint32_t c = pending_.front();
    pending_.pop_front();
    if (done_[c]) continue;  // given back, then arrived late from the donor dropped
    if (given_back_.erase(c)) ++asked_again_;
    donor.asked.insert(c);
    return c;
  }
  return std::nullopt;
}

bool ChunkSchedule::arrived(size_t d, uint32_t c) {
  auto& donor = donors_.at(d);
  if (c >= done_.size() || done_[c] || donor.dropped || donor.asked.erase(c) == 0) return false;
  done_[c] = true;
  ++done_count_;
  ++donor.delivered;
  return true;
}

size_t ChunkSchedule::drop(size_t d) {
  auto& donor = donors_.at(d);
  if (donor.dropped) return 0;
  donor.dropped = true;
  const size_t n = donor.asked.size();
  // Given back in reverse so that they leave the front of the queue in index order.
  for (auto it = donor.asked.rbegin(); it != donor.asked.rend(); ++it) {
    pending_.push_front(*it);
    given_back_.insert(*it);
  }
  donor.asked.clear();
  return n;
}

size_t ChunkSchedule::live_donors() const {
  return static_cast<size_t>(
      std::count_if(donors_.begin(), donors_.end(), [](const Donor& d) { return !d.dropped; }));
}

}  // namespace swarmrt::policy
