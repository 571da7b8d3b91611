#include "model/robust_mean.hpp"

#include <ATen/ATen.h>

#include <algorithm>
#include <stdexcept>
#include <string>

namespace swarmrt::model {

namespace {

// Each contribution as one float32 row: [n, numel of the stage].
at::Tensor stacked(const std::vector<const NamedTensors*>& deltas) {
  const auto& first = *deltas.front();
  std::vector<at::Tensor> rows;
  for (const auto* d : deltas) {
    if (d->size() != first.size())
      throw std::invalid_argument("a contribution has " + std::to_string(d->size()) +
                                  " tensors, the first " + std::to_string(first.size()));
    std::vector<at::Tensor> flat;
    for (size_t k = 0; k < first.size(); ++k) {
      if ((*d)[k].first != first[k].first ||
          !(*d)[k].second.sizes().equals(first[k].second.sizes()))
        throw std::invalid_argument("contribution entry '" + (*d)[k].first + "' does not match '" +
                                    first[k].first + "'");
      flat.push_back((*d)[k].second.to(at::kFloat).reshape({-1}));
    }
    rows.push_back(at::cat(flat));
  }
  return at::stack(rows);
}

// A row back into the contributions' names and shapes.
NamedTensors unflattened(const at::Tensor& row, const NamedTensors& like) {
  NamedTensors out;
  int64_t offset = 0;
  for (const auto& [name, t] : like) {
    const auto n = t.numel();
    out.emplace_back(name, row.narrow(0, offset, n).view(t.sizes()).to(t.scalar_type()).clone());
    offset += n;
  }
  return out;
}

// The median of a vector's values (the mean of the middle two for an even count).
double median_of(const at::Tensor& v) {
  auto sorted = std::get<0>(v.sort());
  const auto n = sorted.size(0);
  return n % 2 == 1 ? sorted[n / 2].item<double>()
                    : 0.5 * (sorted[n / 2 - 1].item<double>() + sorted[n / 2].item<double>());
}

at::Tensor coordinate_median(const at::Tensor& x) {
  const auto n = x.size(0);
  auto sorted = std::get<0>(x.sort(0));
  return n % 2 == 1 ? sorted[n / 2] : 0.5 * (sorted[n / 2 - 1] + sorted[n / 2]);
}

at::Tensor centered_clip(const at::Tensor& x, const config::DilocoConfig& d) {
  auto v = coordinate_median(x);
  for (int64_t l = 0; l < d.clip_iterations; ++l) {
    auto diff = x - v;                              // [n, D]
    auto dist = diff.norm(2, {1}).to(at::kDouble);  // [n]
    const double tau = d.clip_radius > 0 ? d.clip_radius : median_of(dist);
    if (tau <= 0) break;  // most contributions sit on v: it is their value
    auto scale = at::clamp_max(tau / at::clamp_min(dist, 1e-30), 1.0).to(x.scalar_type());
    v = v + (diff * scale.unsqueeze(1)).mean(0);
  }
  if (d.clip_drop <= 0) return v;
  const auto dist = (x - v).norm(2, {1}).to(at::kDouble);
  const auto keep = dist <= d.clip_drop * median_of(dist);  // at least half, as c >= 1
  return x.index({keep}).mean(0);
}

at::Tensor trimmed_mean(const at::Tensor& x, int64_t trim) {
  const auto n = x.size(0);
  const int64_t k = std::min(trim, (n - 1) / 2);  // at least one value stays
  auto sorted = std::get<0>(x.sort(0));
  return sorted.narrow(0, k, n - 2 * k).mean(0);
}

}  // namespace

NamedTensors aggregate(const std::vector<const NamedTensors*>& deltas,
                       const config::DilocoConfig& d) {
  if (deltas.empty()) throw std::invalid_argument("a round needs a contribution");
  at::NoGradGuard no_grad;
  const auto x = stacked(deltas);
  at::Tensor v;
  switch (d.aggregate) {
    case config::Aggregate::mean:
      v = x.mean(0);
      break;
    case config::Aggregate::centered_clip:
      v = centered_clip(x, d);
      break;
    case config::Aggregate::trimmed_mean:
      v = trimmed_mean(x, d.trim);
      break;
  }
  return unflattened(v, *deltas.front());
}

}  // namespace swarmrt::model
