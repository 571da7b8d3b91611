#include "policy/simulator.hpp"

#include "policy/bound.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <queue>
#include <random>
#include <stdexcept>

namespace swarmrt::policy {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

enum class Kind { fail, recover, join, arrive, tick, point };

struct Event {
  double t;
  uint64_t seq;  // equal times: in the order they were scheduled
  Kind kind;
  uint32_t peer;
  uint64_t epoch;  // an arrival of a peer that failed since is stale
  bool operator>(const Event& o) const { return t != o.t ? t > o.t : seq > o.seq; }
};

enum class State { serving, moving, down };

struct SimPeer {
  double speed = 0;
  uint32_t stage = 0;
  State state = State::down;
  uint64_t epoch = 0;
  double moved_at = -kInf;
  double priced = 0;  // max over stages of price x rate: its share of the bound (bound.hpp)
};

void check(bool ok, const char* what) {
  if (!ok) throw std::invalid_argument(std::string("simulate: ") + what);
}

class Simulation {
 public:
  explicit Simulation(const SimParams& p)
      : p_(p),
        stages_(p.cost.size()),
        model_(p.cost, link_bytes(p)),
        speed_rng_(p.seed),
        churn_rng_(p.seed + 1),
        tick_rng_(p.seed + 2),
        noise_rng_(p.seed + 3) {}

  SimResult run() {
    const int64_t n = p_.speeds.empty() ? p_.peers : static_cast<int64_t>(p_.speeds.size());
    for (int64_t i = 0; i < n; ++i) {
      const double speed =
          p_.speeds.empty() ? draw_speed(speed_rng_) : p_.speeds[static_cast<size_t>(i)];
      add_peer(speed);
      // The run starts with everyone in place: the directory's rule, no download.
      auto& w = peers_.back();
      w.stage = place_fewest(view(), stages_);
      w.state = State::serving;
    }
    // The bound's prices, from the peers at the start: any prices give an upper bound, so
    // they stay valid as peers fail, recover and join.
    std::vector<double> rate;
    for (const auto& w : peers_)
      for (size_t k = 0; k < stages_; ++k) rate.push_back(rate_at(w.speed, k));
    prices_ = placement_bound(rate, p_.cost).prices;
    for (auto& w : peers_) price(w);
    for (uint32_t i = 0; i < peers_.size(); ++i) schedule_failure(i);
    schedule_join();
    if (p_.balancer) schedule(next_period(), Kind::tick);
    schedule(p_.sample_s, Kind::point);
    dirty_ = true;
    while (!queue_.empty() && queue_.top().t <= p_.duration_s) {
      const Event e = queue_.top();
      queue_.pop();
      advance(e.t);
      handle(e);
      ++result_.events;
    }
    advance(p_.duration_s);
    if (result_.points.empty() || result_.points.back().t < p_.duration_s) record_point();
    return result_;
  }

 private:
  double draw_speed(std::mt19937_64& rng) {
    // Log-uniform: as many peers in [1, 2]x as in [5, 10]x the slowest.
    std::uniform_real_distribution<double> u(0.0, std::log(p_.speed_spread));
    return p_.min_rate * std::exp(u(rng));
  }

  // Samples/s of a peer of `speed` serving stage k (the model in the header).
  double rate_at(double speed, size_t k) const {
    double r = speed / p_.cost[k];
    const double h = hops(k, stages_);
    if (p_.link_bytes_per_s > 0 && p_.sample_bytes > 0 && h > 0)
      r = std::min(r, p_.link_bytes_per_s / (h * p_.sample_bytes));
    if (p_.latency_s > 0 && h > 0)
      r = std::min(r, static_cast<double>(p_.max_inflight) * p_.microbatch /
                          (2 * p_.latency_s + p_.microbatch * p_.cost[k] / speed));
    return r;
  }

  // Bytes one sample moves over a worker's link at each stage, as the balancer models it.
  static std::vector<double> link_bytes(const SimParams& p) {
    std::vector<double> bytes;
    if (p.link_bytes_per_s <= 0 || p.sample_bytes <= 0 || p.cost.size() < 2) return bytes;
    for (size_t k = 0; k < p.cost.size(); ++k)
      bytes.push_back(hops(k, p.cost.size()) * p.sample_bytes);
    return bytes;
  }
  // Activations and gradients, in and out: 2 at either end of the pipeline, 4 between.
  static double hops(size_t k, size_t stages) {
    return stages < 2 ? 0 : (k == 0 || k + 1 == stages) ? 2 : 4;
  }

  void add_peer(double speed) {
    SimPeer w;
    w.speed = speed;
    peers_.push_back(w);
  }
  void price(SimPeer& w) {
    std::vector<double> row(stages_);
    for (size_t k = 0; k < stages_; ++k) row[k] = rate_at(w.speed, k);
    w.priced = priced_rate(row.data(), prices_);
  }

  void schedule(double t, Kind kind, uint32_t peer = 0, uint64_t epoch = 0) {
    queue_.push(Event{t, seq_++, kind, peer, epoch});
  }
  double exponential(double mean) {
    return std::exponential_distribution<double>(1.0 / mean)(churn_rng_);
  }
  void schedule_failure(uint32_t i) {
    if (p_.failures_per_hour > 0)
      schedule(now_ + exponential(3600.0 / p_.failures_per_hour), Kind::fail, i);
  }
  void schedule_join() {
    if (p_.joins_per_hour > 0)
      schedule(now_ + exponential(3600.0 / (p_.joins_per_hour * static_cast<double>(p_.peers))),
               Kind::join);
  }
  double next_period() {
    std::uniform_real_distribution<double> u(-1.0, 1.0);
    return now_ + p_.period_s * (1.0 + p_.jitter * u(tick_rng_));
  }

  // The peers as the balancer sees them: serving ones measured, moving ones already at their
  // destination and not measured there yet. A worker measures its compute (samples/s over
  // the time it computes, as the live runtime's workers do) and, where links are modelled,
  // its link's bandwidth; each is off by the measurement noise.
  std::vector<Peer> view(bool measured = false) {
    std::vector<Peer> v;
    v.reserve(peers_.size());
    std::normal_distribution<double> gauss(0.0, 1.0);
    auto noisy = [&](double x) {
      return p_.noise > 0 ? x * std::max(0.05, 1.0 + p_.noise * gauss(noise_rng_)) : x;
    };
    for (uint32_t i = 0; i < peers_.size(); ++i) {
      const auto& w = peers_[i];
      if (w.state == State::down) continue;
      Peer peer{i, w.stage, 0, w.moved_at};
      if (measured && w.state == State::serving) {
        peer.speed = noisy(w.speed);
        if (!model_.bytes.empty()) peer.link = noisy(p_.link_bytes_per_s);
      }
      v.push_back(peer);
    }
    return v;
  }

  // A peer (re)enters: it picks a stage and downloads that stage's state first.
  void enter(uint32_t i) {
    auto v = view();
    auto& w = peers_[i];
    w.stage = p_.balancer ? place(v, model_, 0) : place_fewest(v, stages_);
    start_download(i);
  }
  void start_download(uint32_t i) {
    auto& w = peers_[i];
    const double bytes = p_.state_bytes.empty() ? 0 : p_.state_bytes[w.stage];
    int64_t holders = 0;
    for (uint32_t j = 0; j < peers_.size(); ++j)
      holders += j != i && peers_[j].state == State::serving && peers_[j].stage == w.stage;
    const double secs =
        transfer_seconds(bytes, p_.link_bytes_per_s, p_.donors, p_.donor_share, holders);
    w.state = State::moving;
    schedule(now_ + secs, Kind::arrive, i, w.epoch);
    dirty_ = true;
  }

  void handle(const Event& e) {
    switch (e.kind) {
      case Kind::fail: {
        auto& w = peers_[e.peer];
        if (w.state == State::down) return;
        w.state = State::down;
        ++w.epoch;
        ++result_.failures;
        result_.failure_times.push_back(now_);
        dirty_ = true;
        if (p_.recovery_s > 0) schedule(now_ + exponential(p_.recovery_s), Kind::recover, e.peer);
        return;
      }
      case Kind::recover:
        ++result_.recoveries;
        enter(e.peer);
        schedule_failure(e.peer);
        return;
      case Kind::join: {
        ++result_.joins;
        add_peer(draw_speed(churn_rng_));
        price(peers_.back());
        const auto i = static_cast<uint32_t>(peers_.size() - 1);
        enter(i);
        schedule_failure(i);
        schedule_join();
        return;
      }
      case Kind::arrive: {
        auto& w = peers_[e.peer];
        if (w.state != State::moving || w.epoch != e.epoch) return;
        w.state = State::serving;
        dirty_ = true;
        return;
      }
      case Kind::tick: {
        for (const auto& m : plan_moves(view(true), model_, p_.balance, now_)) {
          auto& w = peers_[m.worker];
          w.stage = m.to;
          w.moved_at = now_;
          start_download(m.worker);
          result_.moves.push_back({now_, m});
        }
        schedule(next_period(), Kind::tick);
        return;
      }
      case Kind::point:
        record_point();
        schedule(now_ + p_.sample_s, Kind::point);
        return;
    }
  }

  // P and the bound with the peers as they are now, DiLoCo rounds included.
  void refresh() {
    if (!dirty_) return;
    dirty_ = false;
    std::vector<double> rates(stages_, 0.0);
    std::vector<int64_t> serving(stages_, 0);
    double weighted = 0;
    alive_ = 0;
    for (const auto& w : peers_) {
      if (w.state == State::down) continue;
      ++alive_;
      weighted += w.priced;
      if (w.state != State::serving) continue;
      rates[w.stage] += rate_at(w.speed, w.stage);
      ++serving[w.stage];
    }
    rate_ = *std::min_element(rates.begin(), rates.end());
    bound_ = weighted;
    if (p_.inner_steps > 0 && p_.step_samples > 0) {
      double round_s = 0;
      for (size_t k = 0; k < stages_; ++k) {
        const double bytes = p_.round_bytes.empty() ? 0 : p_.round_bytes[k];
        const double n = static_cast<double>(std::max<int64_t>(serving[k], 1));
        round_s =
            std::max(round_s, (p_.link_bytes_per_s > 0 ? 2 * bytes / p_.link_bytes_per_s : 0) +
                                  2 * (n - 1) * p_.latency_s);
      }
      const double work = static_cast<double>(p_.inner_steps) * p_.step_samples;
      auto with_rounds = [&](double r) { return r > 0 ? work / (work / r + round_s) : 0.0; };
      rate_ = with_rounds(rate_);
      bound_ = with_rounds(bound_);
    }
  }

  void advance(double t) {
    refresh();
    const double dt = t - now_;
    if (dt > 0) {
      result_.samples += rate_ * dt;
      result_.bound_samples += bound_ * dt;
      window_samples_ += rate_ * dt;
      window_bound_ += bound_ * dt;
    }
    now_ = t;
  }

  void record_point() {
    refresh();
    result_.points.push_back(SimPoint{now_, alive_, rate_, bound_,
                                      window_bound_ > 0 ? window_samples_ / window_bound_ : 0});
    window_samples_ = window_bound_ = 0;
  }

  const SimParams& p_;
  const size_t stages_;
  const Stages model_;
  std::vector<double> prices_;
  std::mt19937_64 speed_rng_, churn_rng_, tick_rng_, noise_rng_;
  std::vector<SimPeer> peers_;
  std::priority_queue<Event, std::vector<Event>, std::greater<Event>> queue_;
  uint64_t seq_ = 0;
  double now_ = 0;
  bool dirty_ = true;
  double rate_ = 0, bound_ = 0;
  int64_t alive_ = 0;
  double window_samples_ = 0, window_bound_ = 0;
  SimResult result_;
};

}  // namespace

double transfer_seconds(double bytes, double link_bytes_per_s, int64_t donors, double donor_share,
                        int64_t holders) {
  if (link_bytes_per_s <= 0 || bytes <= 0) return 0;
  const double from = static_cast<double>(std::max<int64_t>(1, std::min(donors, holders)));
  return bytes / (link_bytes_per_s * std::min(1.0, from * donor_share));
}

SimResult simulate(const SimParams& p) {
  check(!p.cost.empty(), "at least one stage");
  for (double c : p.cost) check(c > 0 && std::isfinite(c), "every stage cost must be > 0");
  check(p.speeds.empty() ? p.peers >= 1 : true, "peers must be >= 1");
  for (double s : p.speeds) check(s > 0 && std::isfinite(s), "every speed must be > 0");
  check(p.duration_s > 0, "the duration must be > 0");
  check(p.min_rate > 0, "min_rate must be > 0");
  check(p.speed_spread >= 1, "speed_spread must be >= 1");
  check(p.failures_per_hour >= 0 && p.recovery_s >= 0 && p.joins_per_hour >= 0,
        "churn rates must be >= 0");
  check(p.link_bytes_per_s >= 0 && p.latency_s >= 0 && p.sample_bytes >= 0,
        "link figures must be >= 0");
  check(p.max_inflight >= 1 && p.microbatch > 0, "max_inflight and microbatch must be >= 1");
  check(p.state_bytes.empty() || p.state_bytes.size() == p.cost.size(),
        "state_bytes needs one value per stage");
  check(p.round_bytes.empty() || p.round_bytes.size() == p.cost.size(),
        "round_bytes needs one value per stage");
  check(p.period_s > 0 && p.sample_s > 0, "period_s and sample_s must be > 0");
  check(p.jitter >= 0 && p.jitter < 1, "jitter must be in [0, 1)");
  check(p.noise >= 0, "noise must be >= 0");
  check(p.donors >= 1 && p.donor_share > 0 && p.donor_share <= 1,
        "donors must be >= 1 and donor_share in (0, 1]");
  return Simulation(p).run();
}

}  // namespace swarmrt::policy
