#include "model/hop_codec.hpp"

#include <cmath>
#include <map>
#include <mutex>
#include <stdexcept>

#include "model/quantize.hpp"

namespace swarmrt::model {
namespace {

// x as rows of `block` values (zero-padded at the end), rotated: [blocks, block].
at::Tensor rotate(const at::Tensor& flat, int64_t block) {
  const int64_t n = flat.numel(), nb = (n + block - 1) / block;
  auto padded = at::zeros({nb * block}, at::kFloat);
  padded.narrow(0, 0, n).copy_(flat);
  return at::matmul(padded.view({nb, block}), hadamard(block));
}

// The width of the rotated codes, by encoding and direction (0: not a rotated encoding).
int rotated_bits(HopEncoding e, HopDirection d) {
  if (e == HopEncoding::int4) return 4;
  if (e == HopEncoding::int5_3) return d == HopDirection::forward ? 5 : 3;
  return 0;
}

}  // namespace

at::Tensor hadamard(int64_t n) {
  if (n < 1 || (n & (n - 1)) != 0)
    throw std::invalid_argument("a Hadamard matrix needs a power of two, not " + std::to_string(n));
  // Built once per size: every 4-bit hop rotates with it, in both directions.
  static std::mutex mutex;
  static std::map<int64_t, at::Tensor> built;
  std::lock_guard<std::mutex> lock(mutex);
  auto& cached = built[n];
  if (cached.defined()) return cached;
  // Sylvester's construction: H₂ₖ = [[Hₖ, Hₖ], [Hₖ, −Hₖ]], scaled by 1/√n to be orthonormal.
  auto h = at::ones({1, 1}, at::kFloat);
  while (h.size(0) < n) h = at::cat({at::cat({h, h}, 1), at::cat({h, -h}, 1)}, 0);
  cached = h / std::sqrt(static_cast<double>(n));
  return cached;
}

at::ScalarType hop_wire_dtype(HopEncoding e, at::ScalarType compute) {
  switch (e) {
    case HopEncoding::bf16:
      return at::kBFloat16;
    case HopEncoding::int8:
    case HopEncoding::int4:
    case HopEncoding::int5_3:
      return at::kByte;
    case HopEncoding::none:
      break;
  }
  return compute;
}

at::Tensor encode_hop(const at::Tensor& x, HopEncoding e, int64_t block, HopDirection d,
                      uint64_t seed) {
  at::NoGradGuard no_grad;
  switch (e) {
    case HopEncoding::none:
      return x;
    case HopEncoding::bf16:
      return x.to(at::kBFloat16);
    case HopEncoding::int8:
      return encode(x, Quantize::int8, block);
    case HopEncoding::int4:
    case HopEncoding::int5_3: {
      auto rotated = rotate(x.detach().to(at::kCPU, at::kFloat).reshape({-1}), block);
      std::optional<uint64_t> stochastic;
      if (d == HopDirection::backward) stochastic = seed;
      return encode_bits(rotated, rotated_bits(e, d), block, stochastic);
    }
  }
  return x;
}

at::Tensor decode_hop(const at::Tensor& device_wire, HopEncoding e, int64_t block, HopDirection d,
                      at::IntArrayRef shape, at::ScalarType dtype) {
  at::NoGradGuard no_grad;
  const auto wire = device_wire.to(at::kCPU);
  int64_t n = 1;
  for (auto d : shape) n *= d;
  const auto want = hop_wire_dtype(e, dtype);
  if (wire.scalar_type() != want)
    throw std::invalid_argument(std::string("a ") + name_of(e) + " hop carries " +
                                c10::toString(want) + ", not " + c10::toString(wire.scalar_type()));
  switch (e) {
    case HopEncoding::none:
    case HopEncoding::bf16:
      if (wire.numel() != n)
        throw std::invalid_argument("expected " + std::to_string(n) + " values, got " +
                                    std::to_string(wire.numel()));
      return wire.reshape(shape).to(dtype);
    case HopEncoding::int8:
      return decode(wire, Quantize::int8, block, shape).to(dtype);
    case HopEncoding::int4:
    case HopEncoding::int5_3: {
      const int64_t nb = (n + block - 1) / block;
      auto rotated = decode_bits(wire, rotated_bits(e, d), block, {nb, block});
      return at::matmul(rotated, hadamard(block))
          .reshape({-1})
          .narrow(0, 0, n)
          .reshape(shape)
          .to(dtype);
    }
  }
  return wire;
}

}  // namespace swarmrt::model
