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

double stage_rate(const std::vector<double>& worker_rates, int64_t micro_batches) {
  double sum = 0;
  for (double r : worker_rates) sum += std::max(r, 0.0);
  if (micro_batches <= 0 || !(sum > 0)) return sum;
  std::vector<int64_t> n(worker_rates.size(), 0);
  double makespan = 0;
  for (int64_t j = 0; j < micro_batches; ++j) {
    size_t pick = 0;
    double done = kInf;
    for (size_t w = 0; w < worker_rates.size(); ++w)
      if (worker_rates[w] > 0 && static_cast<double>(n[w] + 1) / worker_rates[w] < done)
        done = static_cast<double>(n[w] + 1) / worker_rates[w], pick = w;
    ++n[pick];
    makespan = std::max(makespan, done);
  }
  return static_cast<double>(micro_batches) / makespan;
}

namespace {

// Each stage's workers' rates there (r_wk; unmeasured: the mean speed).
std::vector<std::vector<double>> crews(const std::vector<Peer>& peers, const Stages& stages,
                                       double mean) {
  std::vector<std::vector<double>> crew(stages.size());
  for (const auto& p : peers)
    if (p.stage < crew.size()) crew[p.stage].push_back(rate_at(p, stages, p.stage, mean));
  return crew;
}

}  // namespace

std::vector<double> stage_rates(const std::vector<Peer>& peers, const Stages& stages) {
  const auto crew = crews(peers, stages, mean_speed(peers));
  std::vector<double> rates;
  for (const auto& c : crew) rates.push_back(stage_rate(c, stages.micro_batches));
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
// Without links, an exchange needs its two workers' speeds this far apart: no more sensitive
// to noise than a single move out of a balanced 2 + 2, which needs one worker measured faster
// than two others together.
constexpr double kDistinctSpeeds = 2.0;

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
  // Stage k's rate once a worker of rate `out` there has gone and one of rate `in` has come
  // (0: none): additive without steps, else from its crew again.
  std::vector<std::vector<double>> crew;
  if (model.micro_batches > 0) crew = crews(peers, model, mean_speed(peers));
  auto changed = [&](size_t k, double out, double in) {
    if (model.micro_batches <= 0) return rates[k] - out + in;
    auto c = crew[k];
    if (auto it = std::find(c.begin(), c.end(), out); out > 0 && it != c.end()) c.erase(it);
    if (in > 0) c.push_back(in);
    return stage_rate(c, model.micro_batches);
  };
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
        consider(a, b, changed(a, rate_at(p, model, a, p.speed), 0),
                 changed(b, 0, rate_at(p, model, b, p.speed)), Step{i, b, std::nullopt, {}});
  }
  if (!exchange) return best;
  // Exchanges: when links cap workers unequally across stages (a fast worker capped in a
  // middle stage, a slow one at an end stage that would not be), every single move from a
  // balanced placement slows the stage it leaves below P, but exchanging the two raises both.
  // Without links the same holds for speeds: a fast worker beside a slow one in a stage that
  // limits P, and only fast ones in the other (3 + 1 with the lone worker 4x slow is balanced
  // best by moving two fast workers over and the slow one back; the single moves stop after
  // the first).
  // Candidates: per stage pair (a, b), the few workers of a whose rate gains most, relatively,
  // by serving b (comparative advantage) when links are modelled, and without links (every
  // worker of a stage gains alike) a's fastest and slowest few: an exchange pairs one of a's
  // with one of b's.
  const bool links = !model.bytes.empty();
  struct Candidate {
    double advantage;
    size_t peer;
  };
  // Kept sorted by advantage, then by index: the first of equals stays first.
  auto keep = [](std::vector<Candidate>& t, Candidate c) {
    auto at = std::find_if(t.begin(), t.end(),
                           [&](const Candidate& o) { return c.advantage > o.advantage; });
    if (static_cast<size_t>(at - t.begin()) >= kExchangeCandidates) return;
    t.insert(at, c);
    if (t.size() > kExchangeCandidates) t.pop_back();
  };
  std::vector<std::vector<Candidate>> top(stages * stages), slowest(stages);
  for (size_t i = 0; i < peers.size(); ++i) {
    const Peer& p = peers[i];
    if (!movable(p)) continue;
    const size_t a = p.stage;
    const double here = rate_at(p, model, a, p.speed);
    if (!links) keep(slowest[a], {-p.speed, i});
    for (size_t b = 0; b < stages; ++b)
      if (b != a)
        keep(top[a * stages + b], {links ? rate_at(p, model, b, p.speed) / here : p.speed, i});
  }
  auto candidates = [&](size_t a, size_t b) {
    auto c = top[a * stages + b];
    if (!links)
      for (const auto& x : slowest[a])
        if (std::none_of(c.begin(), c.end(), [&](const Candidate& y) { return y.peer == x.peer; }))
          c.push_back(x);
    return c;
  };
  for (size_t a = 0; a < stages; ++a)
    for (size_t b = a + 1; b < stages; ++b) {
      const auto from_b = candidates(b, a);
      for (const auto& x : candidates(a, b))
        for (const auto& y : from_b) {
          const Peer &p = peers[x.peer], &q = peers[y.peer];
          // Without links, speeds closer than kDistinctSpeeds are as likely noise (equal
          // workers on 2 busy cores measured up to 30% apart, and an exchange of two of them
          // "gained" 9%: two moves for nothing).
          if (!links && std::max(p.speed, q.speed) < kDistinctSpeeds * std::min(p.speed, q.speed))
            continue;
          consider(a, b, changed(a, rate_at(p, model, a, p.speed), rate_at(q, model, a, q.speed)),
                   changed(b, rate_at(q, model, b, q.speed), rate_at(p, model, b, p.speed)),
                   Step{x.peer, b, y.peer, {}});
        }
    }
  return best;
}

// The plan from these speeds, all taken as they are (plan_moves decides which to trust).
std::vector<Move> greedy_plan(const std::vector<Peer>& peers, const Stages& model,
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
    if (model.micro_batches <= 0) {
      rates[from] -= rate_at(p, model, from, mean);
      rates[to] += rate_at(p, model, to, mean);
    }
    --count[from];
    ++count[to];
    p.stage = static_cast<uint32_t>(to);
    if (model.micro_batches > 0) rates = stage_rates(plan, model);  // not additive: again
    p.moved_at = now;                                               // not twice in one plan
    current = score_of(rates);
    m.after = current[0];
    moves.push_back(std::move(m));
  };
  while (static_cast<int64_t>(moves.size()) < params.max_moves) {
    const bool exchange = static_cast<int64_t>(moves.size()) + 2 <= params.max_moves;
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

}  // namespace

std::vector<Move> plan_moves(const std::vector<Peer>& peers, const Stages& model,
                             const BalancerParams& params, double now) {
  std::vector<Peer> trusted = peers;
  bool provisional = false;
  for (auto& p : trusted)
    if (p.provisional) p.speed = 0, provisional = true;
  auto moves = greedy_plan(trusted, model, params, now);
  if (!moves.empty() || !provisional) return moves;
  BalancerParams bold = params;
  bold.min_gain = std::max(params.min_gain, params.provisional_gain);
  return greedy_plan(peers, model, bold, now);
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
  const auto crew = crews(peers, stages, mean_speed(peers));
  Peer newcomer;
  newcomer.speed = speed > 0 ? speed : mean_speed(peers);
  newcomer.link = link;
  size_t pick = 0;
  double pick_after = -kInf;
  for (size_t b = 0; b < rates.size(); ++b) {
    double after = kInf;
    auto joined = crew[b];
    joined.push_back(rate_at(newcomer, stages, b, 0));
    for (size_t k = 0; k < rates.size(); ++k)
      after = std::min(after, k == b ? stage_rate(joined, stages.micro_batches) : rates[k]);
    if (after > pick_after || (after == pick_after && rates[b] < rates[pick])) {
      pick = b;
      pick_after = after;
    }
  }
  return static_cast<uint32_t>(pick);
}

std::vector<Peer> serving_peers(const std::vector<Peer>& measured,
                                const std::vector<std::pair<uint32_t, uint32_t>>& serving) {
  std::vector<Peer> peers;
  peers.reserve(serving.size());
  for (const auto& [id, stage] : serving) {
    auto it = std::find_if(measured.begin(), measured.end(),
                           [id = id](const Peer& p) { return p.id == id; });
    Peer p = it != measured.end() ? *it : Peer{id, stage, 0};
    p.stage = stage;
    peers.push_back(p);
  }
  return peers;
}

uint32_t place_fewest(const std::vector<Peer>& peers, size_t stages) {
  std::vector<size_t> count(stages, 0);
  for (const auto& p : peers)
    if (p.stage < stages) ++count[p.stage];
  return static_cast<uint32_t>(std::min_element(count.begin(), count.end()) - count.begin());
}

std::vector<uint32_t> fill_empty_stages(std::vector<uint32_t> placed,
                                        const std::vector<uint32_t>& assigned) {
  std::vector<uint32_t> after = assigned;
  for (auto k : placed)
    if (k < after.size()) ++after[k];
  for (size_t empty = 0; empty < after.size(); ++empty) {
    if (after[empty] > 0) continue;
    for (size_t i = placed.size(); i-- > 0;) {
      const auto from = placed[i];
      if (from >= after.size() || after[from] < 2) continue;
      --after[from];
      ++after[empty];
      placed[i] = static_cast<uint32_t>(empty);
      break;
    }
  }
  return placed;
}

}  // namespace swarmrt::policy
