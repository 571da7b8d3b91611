#include "policy/balancer.hpp"

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

std::vector<double> stage_rates(const std::vector<Peer>& peers, const std::vector<double>& cost) {
  std::vector<double> rates(cost.size(), 0.0);
  const double mean = mean_speed(peers);
  for (const auto& p : peers)
    if (p.stage < rates.size()) rates[p.stage] += (p.speed > 0 ? p.speed : mean) / cost[p.stage];
  return rates;
}

double pipeline_rate(const std::vector<Peer>& peers, const std::vector<double>& cost) {
  const auto rates = stage_rates(peers, cost);
  return rates.empty() ? 0.0 : *std::min_element(rates.begin(), rates.end());
}

double optimal_bound(const std::vector<Peer>& peers, const std::vector<double>& cost) {
  const double mean = mean_speed(peers);
  double speed = 0;
  for (const auto& p : peers) speed += p.speed > 0 ? p.speed : mean;
  const double total_cost = std::accumulate(cost.begin(), cost.end(), 0.0);
  return total_cost > 0 ? speed / total_cost : 0.0;
}

namespace {

// The three slowest stage rates, ascending (padded with infinity): what a step improves, in
// this order (leximin), so that a tie at the minimum does not stall a plan.
using Score = std::array<double, 3>;

struct Step {
  size_t peer = 0;  // index into the plan's peers
  size_t to = 0;
  Score score{};
};

Score score_of(const std::vector<double>& rates) {
  Score sc{kInf, kInf, kInf};
  std::vector<double> sorted = rates;
  std::sort(sorted.begin(), sorted.end());
  for (size_t i = 0; i < std::min<size_t>(3, sorted.size()); ++i) sc[i] = sorted[i];
  return sc;
}

// The best single move from `rates`, strictly better than `current`; nullopt when none is.
std::optional<Step> best_step(const std::vector<Peer>& peers, const std::vector<double>& rates,
                              const std::vector<int64_t>& count, const std::vector<double>& cost,
                              const BalancerParams& params, double now, const Score& current) {
  const size_t stages = cost.size();
  // The slowest stages: the three slowest other than a move's two ends are among the five.
  std::vector<size_t> order(stages);
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(),
            [&](size_t x, size_t y) { return rates[x] != rates[y] ? rates[x] < rates[y] : x < y; });
  order.resize(std::min<size_t>(5, stages));
  std::optional<Step> best;
  for (size_t i = 0; i < peers.size(); ++i) {
    const Peer& p = peers[i];
    const size_t a = p.stage;
    if (a >= stages || p.speed <= 0) continue;
    if (now - p.moved_at < params.cooldown_s) continue;
    if (count[a] <= params.min_workers) continue;
    for (size_t b = 0; b < stages; ++b) {
      if (b == a) continue;
      double v[7];
      size_t n = 0;
      v[n++] = rates[a] - p.speed / cost[a];
      v[n++] = rates[b] + p.speed / cost[b];
      for (size_t k : order)
        if (k != a && k != b) v[n++] = rates[k];
      std::partial_sort(v, v + std::min<size_t>(3, n), v + n);
      Score sc{kInf, kInf, kInf};
      for (size_t j = 0; j < std::min<size_t>(3, n); ++j) sc[j] = v[j];
      if (sc > (best ? best->score : current)) best = Step{i, b, sc};
    }
  }
  return best;
}

}  // namespace

std::vector<Move> plan_moves(const std::vector<Peer>& peers, const std::vector<double>& cost,
                             const BalancerParams& params, double now) {
  const size_t stages = cost.size();
  if (stages < 2) return {};
  std::vector<Peer> plan = peers;  // the placement as the plan changes it, by id
  std::sort(plan.begin(), plan.end(), [](const Peer& x, const Peer& y) { return x.id < y.id; });
  const double mean = mean_speed(plan);
  auto rates = stage_rates(plan, cost);
  std::vector<int64_t> count(stages, 0);
  for (const auto& p : plan)
    if (p.stage < stages) ++count[p.stage];
  const double first = *std::min_element(rates.begin(), rates.end());
  const auto start_rates = rates;
  std::vector<Move> moves;
  Score current = score_of(rates);
  while (static_cast<int64_t>(moves.size()) < params.max_moves) {
    auto step = best_step(plan, rates, count, cost, params, now, current);
    if (!step) break;
    Peer& p = plan[step->peer];
    const size_t a = p.stage, b = step->to;
    const double speed = p.speed > 0 ? p.speed : mean;
    Move m;
    m.worker = p.id;
    m.from = static_cast<uint32_t>(a);
    m.to = static_cast<uint32_t>(b);
    m.before = current[0];
    rates[a] -= speed / cost[a];
    rates[b] += speed / cost[b];
    --count[a];
    ++count[b];
    p.stage = static_cast<uint32_t>(b);
    p.moved_at = now;  // not twice in one plan
    current = step->score;
    m.after = current[0];
    moves.push_back(std::move(m));
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

std::optional<Move> best_move(const std::vector<Peer>& peers, const std::vector<double>& cost,
                              BalancerParams params, double now) {
  params.max_moves = 1;
  auto moves = plan_moves(peers, cost, params, now);
  if (moves.empty()) return std::nullopt;
  return moves.front();
}

uint32_t place(const std::vector<Peer>& peers, const std::vector<double>& cost, double speed) {
  const auto rates = stage_rates(peers, cost);
  if (speed <= 0) speed = mean_speed(peers);
  size_t pick = 0;
  double pick_after = -kInf;
  for (size_t b = 0; b < rates.size(); ++b) {
    double after = kInf;
    for (size_t k = 0; k < rates.size(); ++k)
      after = std::min(after, k == b ? rates[k] + speed / cost[k] : rates[k]);
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
