#include "policy/bound.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace swarmrt::policy {

double priced_rate(const double* row, const std::vector<double>& prices) {
  double best = 0;
  for (size_t k = 0; k < prices.size(); ++k) best = std::max(best, prices[k] * row[k]);
  return best;
}

PlacementBound placement_bound(const std::vector<double>& rate, const std::vector<double>& cost,
                               int iterations) {
  const size_t stages = cost.size();
  PlacementBound out;
  if (stages == 0) return out;
  const size_t peers = rate.size() / stages;
  const double total = std::accumulate(cost.begin(), cost.end(), 0.0);
  std::vector<double> y(stages);
  for (size_t k = 0; k < stages; ++k) y[k] = cost[k] / total;
  // f(y) and its subgradient: each peer's rate at the stage that prices it highest.
  std::vector<double> g(stages);
  auto evaluate = [&](const std::vector<double>& prices) {
    std::fill(g.begin(), g.end(), 0.0);
    double f = 0;
    for (size_t w = 0; w < peers; ++w) {
      const double* row = &rate[w * stages];
      size_t arg = 0;
      double best = -1;
      for (size_t k = 0; k < stages; ++k)
        if (prices[k] * row[k] > best) best = prices[k] * row[k], arg = k;
      f += best;
      g[arg] += row[arg];
    }
    return f;
  };
  out.value = evaluate(y);
  out.prices = y;
  for (int t = 1; t <= iterations; ++t) {
    // A step in the subgradient's direction, scaled by its mean so that the step does not
    // depend on the units of r, shrinking as 1/sqrt(t) (the rate that converges for a
    // non-smooth convex f).
    const double mean = std::accumulate(g.begin(), g.end(), 0.0) / static_cast<double>(stages);
    if (!(mean > 0)) break;
    const double eta = 0.5 / std::sqrt(static_cast<double>(t));
    double sum = 0;
    for (size_t k = 0; k < stages; ++k) sum += (y[k] *= std::exp(-eta * g[k] / mean));
    for (auto& v : y) v /= sum;
    const double f = evaluate(y);
    // Lower by more than rounding: an exact optimum at the start stays exactly what it was.
    if (f < out.value * (1 - 1e-12)) {
      out.value = f;
      out.prices = y;
    }
  }
  return out;
}

}  // namespace swarmrt::policy
