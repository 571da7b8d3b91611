// swarm.compression = auto: which encoding each link's hops take, from what the link carries
// and how long the worker computes. A hop hides under compute when its bytes leave in the time
// the worker spends on a micro-batch (forward and backward): the link is then never what the
// pipeline waits for, and compressing further only costs loss and codec time. So each link
// takes the least compressed encoding that hides, down to swarm.hop_encoding (the floor the
// user allows), and the floor when none does. A link starts at the floor and climbs as its
// hops are measured: a thin link's first hops then do not stall the pipeline (or starve the
// control plane sharing its queue), and on a fast one the climb costs a few compressed hops.
//
// The measurement (LinkRate): each hop that crosses a link between processes is timed from
// its first byte written to its last byte acknowledged by the peer (transport/bulk.cpp), so
// kernel buffers do not make a slow link look fast. A hop is a burst with idle time after it,
// so a small hop may pass inside a shaper's burst allowance and look faster than the link: the
// chooser moves to a less compressed encoding only with a margin, and after a move up that did
// not last it waits twice as long before trying again (as TCP backs off), so a link does not
// flap; a move up that lasts resets the wait.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <vector>

#include "config/config.hpp"

namespace swarmrt::policy {

// The encodings auto may choose, least compressed first, down to `floor` (swarm.hop_encoding):
// none, bf16, int8, int4 (int5/3 when that is the floor), int3, int4/2. `half` (train.precision
// bf16) drops bf16, whose bytes are then none's.
std::vector<config::HopEncoding> hop_ladder(config::HopEncoding floor, bool half);

// The densities auto may give a worker's sparse round contributions (diloco.compress = topk),
// densest first, down to `floor` (diloco.topk_density): floor × 8, 4, 2, 1, none above 1. A
// contribution hides when it reaches the group within the steps its round overlaps compute
// (diloco.overlap_steps; one step without overlap, where the workers wait for the round and a
// step's worth of waiting costs 1/H of it). Denser rounds leave less to the error feedback.
constexpr int kDensityRungs = 4;
std::vector<double> density_ladder(double floor);

// diloco.all_gather: every worker receives the others' contributions as they were sent, so a
// round's densest contribution crosses its slowest link. Each worker tells the group the
// density its own link carries; the group answers with the least of them (`cap`), and a
// worker's next contribution takes the rung it chose (`rung` of `ladder`) or the densest rung
// no denser than `cap`, whichever is sparser (the floor when every rung is denser). cap <= 0:
// none, `rung` stands.
size_t capped_rung(const std::vector<double>& ladder, size_t rung, double cap);

// One link's timed messages (bytes, seconds from first byte written to last acknowledged), the
// last kKeep of each size. Measurements older than kMaxAgeS are forgotten (the link may have
// changed). Each size keeps its own: a rung that fell behind is remembered while another rung's
// hops flow, so the chooser does not try it again at once.
class LinkRate {
 public:
  static constexpr size_t kKeep = 16;
  static constexpr size_t kSizes = 8;  // sizes kept at most (the ladder has six rungs)
  static constexpr double kMaxAgeS = 30;
  static constexpr uint64_t kMinBytes = 16 * 1024;  // smaller: latency, not bandwidth
  static constexpr double kSameSize = 0.15;         // messages this close in size are alike

  void add(uint64_t bytes, double seconds, double now_s);
  // The median of the last kKeep messages' bytes/s; 0: unknown.
  double bytes_per_s(double now_s) const;
  // How long a message of `bytes` takes: the median of recent messages of its size (a shaper's
  // burst lets a small one through at line rate and holds a large one back, so a rate measured
  // on one size mispredicts another), else `bytes` over bytes_per_s; negative: unknown.
  double seconds_for(uint64_t bytes, double now_s) const;
  size_t measured() const { return samples_.size(); }

 private:
  struct Sample {
    uint64_t bytes;
    double seconds, at;
  };
  std::deque<Sample> samples_;
};

// One link's choice, a rung of the ladder (0: least compressed): of a hop's encoding, or of a
// round contribution's density (with a first dwell of a few rounds: they are rare).
class HopChooser {
 public:
  static constexpr double kHideFraction = 1.0;  // a hop's transfer must fit in this much compute
  static constexpr double kUpFraction = 0.5;    // ... and in this much to move up a rung
  static constexpr int kFirstDwell = 16;        // hops on a rung before moving up from it
  static constexpr int kMaxDwell = 1024;
  static constexpr int kRoundDwell = 2;  // contributions: rounds on a rung before moving up

  explicit HopChooser(int first_dwell = kFirstDwell)
      : first_dwell_(first_dwell), dwell_(first_dwell) {}

  // `seconds`: how long a hop takes on the link in each rung of the ladder (LinkRate::
  // seconds_for; negative: unknown); `compute_s`: the worker's seconds per micro-batch (0:
  // unknown). The first choice is the floor; the choice stays where what it needs is unknown.
  // Returns the rung for this hop.
  size_t choose(const std::vector<double>& seconds, double compute_s);
  size_t rung() const { return rung_; }
  int moves() const { return moves_; }
  int hops() const { return hops_; }  // choices made

 private:
  size_t rung_ = SIZE_MAX;  // the first choose clamps it to the floor
  int hops_on_rung_ = 0;
  int first_dwell_;
  int dwell_;
  bool moved_up_ = false;  // the last move was up: a quick move back down doubles the dwell
  int moves_ = 0;
  int hops_ = 0;
};

}  // namespace swarmrt::policy
