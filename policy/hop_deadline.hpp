// When the step tracker declares a micro-batch lost (one of its hops never arrived) and re-runs
// it, from what the swarm measures rather than one fixed wait:
// - the wait is a multiple (factor) of the slowest recent hop (one worker's compute of one
//   micro-batch, as reported), within [floor, ceiling]: a model whose micro-batch takes minutes
//   per stage is not declared lost after 30 s;
// - a micro-batch whose holder is a live worker busy with it (computing it, or holding it to
//   send), or that was handed to a live worker busy computing, is not lost: it is waited for
//   again, up to the ceiling since it last moved;
// - one that is with nobody busy and has not moved during a whole wait is lost (judged by
//   reports, not clocks: the same every time for the same messages); each loss of the same
//   micro-batch doubles its next wait, and past max_losses the run ends (a setting is wrong or
//   the swarm cannot carry it).
// CAF-free: the tracker feeds it hop times and asks it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <optional>

namespace swarmrt::policy {

// The worker's side of those reports: it gathers them and sends several as one message (each
// is a control-plane message between processes), but never holds one so long that the tracker
// could judge a micro-batch it is computing lost. A report waits at most the window, a tenth
// of the least wait (at most 50 ms); a worker about to take a hop sends what it holds, this
// hop's report too, once the window has passed since it last sent or when the hop may
// compute longer than the window (`expected_s`, from its measured rate; unknown before its
// first hop).
double report_window_s(double least_wait_s);
bool report_at_once(std::optional<double> expected_s, double since_sent_s, double least_wait_s);

class HopDeadline {
 public:
  struct Limits {
    double floor_s = 30;      // supervision.microbatch_timeout_s
    double factor = 4;        // supervision.microbatch_timeout_factor
    double ceiling_s = 3600;  // supervision.microbatch_timeout_max_s
    int64_t max_losses = 8;   // supervision.microbatch_max_losses
  };
  enum class Verdict { wait_again, lost, give_up };

  explicit HopDeadline(Limits limits) : limits_(limits) {}

  // A worker's compute of one hop took `seconds` (its "took" to its "passed" report).
  void observe_hop(double seconds);
  // The slowest of the recent hops (0 before any).
  double slowest_hop_s() const;

  // How long to wait before a micro-batch lost `losses` times so far is judged.
  double wait_s(int64_t losses) const;

  // A wait has passed. `moved`: a report of the micro-batch came during it; `busy`: its holder
  // or receiver is a live worker at work; `busy_for_s`: the waits it has spent busy without
  // moving, this one included.
  Verdict judge(bool moved, bool busy, double busy_for_s, int64_t losses) const;

  const Limits& limits() const { return limits_; }

 private:
  static constexpr std::size_t kWindow = 64;  // recent hops the slowest is taken from
  Limits limits_;
  std::deque<double> hops_;
};

}  // namespace swarmrt::policy
