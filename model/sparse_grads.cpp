#include "model/sparse_grads.hpp"

#include <cmath>
#include <stdexcept>

namespace swarmrt::model {

TopK warmup_topk(const config::DilocoConfig& d) {
  return {d.warmup_density, static_cast<int>(d.topk_bits), d.topk_chunk};
}

std::vector<at::Tensor> encode_sparse_grads(const std::vector<at::Tensor>& grads,
                                            std::vector<at::Tensor>& residual, const TopK& t) {
  at::NoGradGuard no_grad;
  residual.resize(grads.size());
  std::vector<at::Tensor> wires;
  wires.reserve(grads.size());
  for (size_t i = 0; i < grads.size(); ++i) {
    auto g = grads[i].detach().to(at::kCPU).to(at::kFloat).reshape({-1});
    if (residual[i].defined()) g = g + residual[i];
    auto wire = encode_topk(g, t);
    // A non-finite gradient is refused whole; carrying it would poison every later step.
    if (at::isfinite(g).all().item<bool>()) residual[i] = g - decode_topk(wire, t, {g.numel()});
    wires.push_back(std::move(wire));
  }
  return wires;
}

std::string check_sparse_grads(const std::vector<at::Tensor>& wires, const TopK& t,
                               std::vector<int64_t>& numels) {
  if (!numels.empty() && wires.size() != numels.size())
    return std::to_string(wires.size()) + " sparse gradients, expected " +
           std::to_string(numels.size());
  std::vector<int64_t> mine;
  try {
    for (size_t i = 0; i < wires.size(); ++i) {
      const int64_t n = numels.empty() ? topk_numel(wires[i]) : numels[i];
      decode_topk(wires[i], t, {n});  // every check: size, header, ranges, indices
      mine.push_back(n);
    }
  } catch (const std::exception& e) {
    return "sparse gradient #" + std::to_string(mine.size()) + ": " + e.what();
  }
  if (numels.empty()) numels = std::move(mine);
  return "";
}

std::vector<at::Tensor> sparse_answer(double scale,
                                      const std::vector<const std::vector<at::Tensor>*>& wires) {
  std::vector<at::Tensor> out{at::full({1}, scale, at::kFloat)};
  for (const auto* w : wires) out.insert(out.end(), w->begin(), w->end());
  return out;
}

std::vector<at::Tensor> sum_sparse_answer(const std::vector<at::Tensor>& answer, const TopK& t,
                                          const std::vector<at::Tensor>& like) {
  at::NoGradGuard no_grad;
  const size_t P = like.size();
  if (answer.empty() || P == 0 || (answer.size() - 1) % P != 0 || answer[0].numel() != 1)
    throw std::invalid_argument("a sparse answer is a scale and P = " + std::to_string(P) +
                                " wires per worker, got " + std::to_string(answer.size()) +
                                " tensors");
  const double scale = answer[0].to(at::kDouble).item<double>();
  if (!std::isfinite(scale) || scale < 0)
    throw std::invalid_argument("a sparse answer's scale is " + std::to_string(scale));
  std::vector<at::Tensor> sum;
  for (size_t i = 0; i < P; ++i) sum.push_back(at::zeros(like[i].sizes(), at::kFloat));
  for (size_t w = 1; w < answer.size(); w += P)
    for (size_t i = 0; i < P; ++i) sum[i].add_(decode_topk(answer[w + i], t, like[i].sizes()));
  for (auto& s : sum) s.mul_(scale);
  return sum;
}

}  // namespace swarmrt::model
