#include "policy/balancer.hpp"

#include "policy/bound.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <iomanip>
#include <numeric>
#include <sstream>

namespace swarmrt::policy {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// The speed an unmeasured peer is assumed to have: the mean of the measured ones (1 if none).
double mean_speed(const std::vector<Peer>& peers) {
  double sum = 0;
  size_t n = 0;
  for (const auto& p : peers)
    if (p.speed > 0) sum += p.speed, ++n;
  return n ? sum / static_cast<double>(n) : 1.0;
}

std::string describe(const Move& m, const std::vector<double>& rates) {
  std::ostringstream os;
  os << std::fixed << std::setprecision(1);
  if (std::isinf(m.gain))
    os << "stage " << m.to << " had no worker";
  else
    os << "stage " << m.to << " at " << rates[m.to] << " samples/s, stage " << m.from << " at "
       << rates[m.from] << ": the pipeline goes from " << m.before << " to " << m.after;
  return os.str();
}

}  // namespace

double rate_at(const Peer& p, const Stages& stages, size_t k, double mean) {
  double r = (p.speed > 0 ? p.speed : mean) / stages.cost[k];
  if (p.link > 0 && k < stages.bytes.size() && stages.bytes[k] > 0)
    r = std::min(r, p.link / stages.bytes[k]);
  return r;
}

std::vector<double> stage_rates(const std::vector<Peer>& peers, const Stages& stages) {
  std::vector<double> rates(stages.size(), 0.0);
  const double mean = mean_speed(peers);
  for (const auto& p : peers)
    if (p.stage < rates.size()) rates[p.stage] += rate_at(p, stages, p.stage, mean);
  return rates;
}

double pipeline_rate(const std::vector<Peer>& peers, const Stages& stages) {
  const auto rates = stage_rates(peers, stages);
  return rates.empty() ? 0.0 : *std::min_element(rates.begin(), rates.end());
}

double optimal_bound(const std::vector<Peer>& peers, const Stages& stages) {
  const double mean = mean_speed(peers);
  std::vector<double> rate;
  rate.reserve(peers.size() * stages.size());
  for (const auto& p : peers)
    for (size_t k = 0; k < stages.size(); ++k) rate.push_back(rate_at(p, stages, k, mean));
  return placement_bound(rate, stages.cost).value;
}

namespace {

// The three slowest stage rates, ascending (padded with infinity): what a step improves, in
// this order (leximin), so that a tie at the minimum does not stall a plan.
using Score = std::array<double, 3>;

struct Step {
  size_t peer = 0;  // index into the plan's peers
  size_t to = 0;
  std::optional<size_t> partner;  // a peer of `to` that takes `peer`'s place: an exchange
  Score score{};
};

constexpr size_t kExchangeCandidates = 3;

Score score_of(const std::vector<double>& rates) {
  Score sc{kInf, kInf, kInf};
  std::vector<double> sorted = rates;
  std::sort(sorted.begin(), sorted.end());
  for (size_t i = 0; i < std::min<size_t>(3, sorted.size()); ++i) sc[i] = sorted[i];
  return sc;
}

// The best single move, or exchange of two workers when `exchange`, from `rates`, strictly
// better than `current`; nullopt when none is.
std::optional<Step> best_step(const std::vector<Peer>& peers, const std::vector<double>& rates,
                              const std::vector<int64_t>& count, const Stages& model,
                              const BalancerParams& params, double now, const Score& current,
                              bool exchange) {
  const size_t stages = model.size();
  // The slowest stages: the three slowest other than a move's two ends are among the five.
  std::vector<size_t> order(stages);
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(),
            [&](size_t x, size_t y) { return rates[x] != rates[y] ? rates[x] < rates[y] : x < y; });
  order.resize(std::min<size_t>(5, stages));
  std::optional<Step> best;
  // Stage a's rate becomes ra and stage b's rb: a step when that beats the best so far.
  auto consider = [&](size_t a, size_t b, double ra, double rb, Step step) {
    double v[7];
    size_t n = 0;
    v[n++] = ra;
    v[n++] = rb;
    for (size_t k : order)
      if (k != a && k != b) v[n++] = rates[k];
    std::partial_sort(v, v + std::min<size_t>(3, n), v + n);
    Score sc{kInf, kInf, kInf};
    for (size_t j = 0; j < std::min<size_t>(3, n); ++j) sc[j] = v[j];
    if (sc > (best ? best->score : current)) {
      step.score = sc;
      best = step;
    }
  };
  auto movable = [&](const Peer& p) {
    return p.stage < stages && p.speed > 0 && now - p.moved_at >= params.cooldown_s;
  };
  for (size_t i = 0; i < peers.size(); ++i) {
    const Peer& p = peers[i];
    const size_t a = p.stage;
    if (!movable(p) || count[a] <= params.min_workers) continue;
    for (size_t b = 0; b < stages; ++b)
      if (b != a)
        consider(a, b, rates[a] - rate_at(p, model, a, p.speed),
                 rates[b] + rate_at(p, model, b, p.speed), Step{i, b, std::nullopt, {}});
  }
  if (!exchange) return best;
  // Exchanges: when links cap workers unequally across stages (a fast worker capped in a
  // middle stage, a slow one at an end stage that would not be), every single move from a
  // balanced placement slows the stage it leaves below P, but exchanging the two raises both.
  // Candidates: per stage pair (a, b), the few workers of a whose rate gains most, relatively,
  // by serving b (comparative advantage): an exchange pairs one of a's with one of b's.
  struct Candidate {
    double advantage;
    size_t peer;
  };
  std::vector<std::vector<Candidate>> top(stages * stages);
  for (size_t i = 0; i < peers.size(); ++i) {
    const Peer& p = peers[i];
    if (!movable(p)) continue;
    const size_t a = p.stage;
    const double here = rate_at(p, model, a, p.speed);
    for (size_t b = 0; b < stages; ++b) {
      if (b == a) continue;
      auto& t = top[a * stages + b];
      const Candidate c{rate_at(p, model, b, p.speed) / here, i};
      // Kept sorted by advantage, then by index: the first of equals stays first.
      auto at = std::find_if(t.begin(), t.end(),
                             [&](const Candidate& o) { return c.advantage > o.advantage; });
      if (static_cast<size_t>(at - t.begin()) >= kExchangeCandidates) continue;
      t.insert(at, c);
      if (t.size() > kExchangeCandidates) t.pop_back();
    }
  }
  for (size_t a = 0; a < stages; ++a)
    for (size_t b = a + 1; b < stages; ++b)
      for (const auto& x : top[a * stages + b])
        for (const auto& y : top[b * stages + a]) {
          const Peer &p = peers[x.peer], &q = peers[y.peer];
          consider(a, b, rates[a] - rate_at(p, model, a, p.speed) + rate_at(q, model, a, q.speed),
                   rates[b] - rate_at(q, model, b, q.speed) + rate_at(p, model, b, p.speed),
                   Step{x.peer, b, y.peer, {}});
        }
  return best;
}

}  // namespace

std::vector<Move> plan_moves(const std::vector<Peer>& peers, const Stages& model,
                             const BalancerParams& params, double now) {
  const size_t stages = model.size();
  if (stages < 2) return {};
  std::vector<Peer> plan = peers;  // the placement as the plan changes it, by id
  std::sort(plan.begin(), plan.end(), [](const Peer& x, const Peer& y) { return x.id < y.id; });
  const double mean = mean_speed(plan);
  auto rates = stage_rates(plan, model);
  std::vector<int64_t> count(stages, 0);
  for (const auto& p : plan)
    if (p.stage < stages) ++count[p.stage];
  const double first = *std::min_element(rates.begin(), rates.end());
  const auto start_rates = rates;
  std::vector<Move> moves;
  Score current = score_of(rates);
  // Moves one worker of the plan to stage `to`; P after it is the stages' minimum then (for
  // the first half of an exchange, the minimum in between).
  auto apply = [&](Peer& p, size_t to) {
    const size_t from = p.stage;
    Move m;
    m.worker = p.id;
    m.from = static_cast<uint32_t>(from);
    m.to = static_cast<uint32_t>(to);
    m.before = current[0];
    rates[from] -= rate_at(p, model, from, mean);
    rates[to] += rate_at(p, model, to, mean);
    --count[from];
    ++count[to];
    p.stage = static_cast<uint32_t>(to);
    p.moved_at = now;  // not twice in one plan
    current = score_of(rates);
    m.after = current[0];
    moves.push_back(std::move(m));
  };
  while (static_cast<int64_t>(moves.size()) < params.max_moves) {
    // Exchanges only where links are modelled: they free link-capped workers. Without links
    // an exchange fine-tunes stages by differences between workers' speeds, which live
    // measurements blur (equal workers sharing 2 cores measured up to 30% apart, and the
    // balancer exchanged two of them for a "gain" of 9%: two moves for nothing).
    const bool exchange =
        !model.bytes.empty() && static_cast<int64_t>(moves.size()) + 2 <= params.max_moves;
    auto step = best_step(plan, rates, count, model, params, now, current, exchange);
    if (!step) break;
    const size_t a = plan[step->peer].stage;
    apply(plan[step->peer], step->to);
    if (step->partner) apply(plan[*step->partner], a);
  }
  if (moves.empty()) return {};
  const double last = current[0];
  const bool worth = first > 0 ? last > first * (1.0 + params.min_gain) : last > 0;
  if (!worth) return {};
  const double gain = first > 0 ? last / first - 1.0 : kInf;
  for (auto& m : moves) {
    m.gain = gain;
    m.reason = describe(m, start_rates);
  }
  return moves;
}

std::optional<Move> best_move(const std::vector<Peer>& peers, const Stages& stages,
                              BalancerParams params, double now) {
  params.max_moves = 1;
  auto moves = plan_moves(peers, stages, params, now);
  if (moves.empty()) return std::nullopt;
  return moves.front();
}

uint32_t place(const std::vector<Peer>& peers, const Stages& stages, double speed, double link) {
  const auto rates = stage_rates(peers, stages);
  Peer newcomer;
  newcomer.speed = speed > 0 ? speed : mean_speed(peers);
  newcomer.link = link;
  size_t pick = 0;
  double pick_after = -kInf;
  for (size_t b = 0; b < rates.size(); ++b) {
    double after = kInf;
    for (size_t k = 0; k < rates.size(); ++k)
      after = std::min(after, k == b ? rates[k] + rate_at(newcomer, stages, k, 0) : rates[k]);
    if (after > pick_after || (after == pick_after && rates[b] < rates[pick])) {
      pick = b;
      pick_after = after;
    }
  }
  return static_cast<uint32_t>(pick);
}

uint32_t place_fewest(const std::vector<Peer>& peers, size_t stages) {
  std::vector<size_t> count(stages, 0);
  for (const auto& p : peers)
    if (p.stage < stages) ++count[p.stage];
  return static_cast<uint32_t>(std::min_element(count.begin(), count.end()) - count.begin());
}

}  // namespace swarmrt::policy
