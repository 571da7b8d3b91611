// How fast the best placement of a set of peers could run: the figure a placement is judged
// against (the balancer's benchmark, `swarmrt simulate`).
//
// Peer w serving stage k alone does r_wk samples/s. Any placement, and any split of each
// peer's time between stages (which contains every placement), reaches at most
//   P = min_k sum_w x_wk r_wk   with   sum_k x_wk = 1, x >= 0.
// LP duality gives an upper bound for every price vector y >= 0 with sum_k y_k = 1:
//   P <= f(y) = sum_w max_k y_k r_wk
// (the stages' weighted mean rate, y.R, is at least their minimum, and each peer's time is
// worth at most its best priced rate), and min_y f(y) is the LP's optimum. When r_wk =
// s_w / c_k (no link caps) y = c / sum c gives sum s / sum c, the optimum itself. With caps
// f is convex and piecewise linear in y: exponentiated-gradient descent from y = c / sum c
// lowers it, keeping the lowest value seen, so the result is an upper bound however few
// iterations it runs (and a tight one: tests/policy/bound_test.cpp).
#pragma once

#include <cstddef>
#include <vector>

namespace swarmrt::policy {

struct PlacementBound {
  double value = 0;            // f(prices) >= the best placement's P
  std::vector<double> prices;  // y, summing to 1
};

// rate: row w holds r_w0 .. r_w(K-1) for K = cost.size() stages; cost is where the descent
// starts. Iterations: 0 gives f(c / sum c).
PlacementBound placement_bound(const std::vector<double>& rate, const std::vector<double>& cost,
                               int iterations = 2000);

// f(prices) for one peer's row: max_k y_k r_wk (what a peer adds to the bound).
double priced_rate(const double* row, const std::vector<double>& prices);

}  // namespace swarmrt::policy
