#include "model/topk.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <stdexcept>
#include <tuple>

#include "model/quantize.hpp"
#include "policy/hop_choice.hpp"

namespace swarmrt::model {

namespace {

constexpr uint32_t kMagic = 0x4b504f54;  // "TOPK", little-endian
constexpr uint8_t kVersion = 1;
constexpr int64_t kHeader = 24;

struct Header {
  uint32_t magic = kMagic;
  uint8_t version = kVersion;
  uint8_t bits = 0;
  uint16_t reserved = 0;
  uint32_t chunk = 0;
  uint32_t k = 0;
  uint64_t numel = 0;
};
static_assert(sizeof(Header) == kHeader, "the header is 24 bytes on the wire");

// Where a tensor of `numel` values puts its chunks and kept values on the wire.
struct Layout {
  int64_t chunks = 0;
  int64_t width = 0;  // values a chunk row holds: `chunk`, or numel when it is one chunk
  int64_t last = 0;   // values of the last chunk
  int64_t k = 0;      // kept per full chunk
  int64_t k_last = 0;
  int64_t kept = 0;
  int index_bits = 0;
  uint64_t lohi = 0, indices = 0, codes = 0, bytes = 0;
};

Layout layout_of(int64_t numel, const TopK& t) {
  Layout l;
  l.chunks = (numel + t.chunk - 1) / t.chunk;
  l.width = l.chunks > 1 ? t.chunk : numel;
  l.last = numel - std::max<int64_t>(0, l.chunks - 1) * t.chunk;
  l.k = topk_kept(l.width, t.density);
  l.k_last = topk_kept(l.last, t.density);
  l.kept = std::max<int64_t>(0, l.chunks - 1) * l.k + l.k_last;
  while ((int64_t{1} << l.index_bits) < t.chunk) ++l.index_bits;
  l.lohi = 8 * static_cast<uint64_t>(l.chunks);
  l.indices = (static_cast<uint64_t>(l.kept) * l.index_bits + 7) / 8;
  l.codes = (static_cast<uint64_t>(l.kept) * t.bits + 7) / 8;
  l.bytes = kHeader + l.lohi + l.indices + l.codes;
  return l;
}

void check(const TopK& t) {
  if (t.bits != 2 && t.bits != 4) throw std::invalid_argument("top-k values are 2 or 4 bits");
  if (t.chunk < 2 || t.chunk > 65536) throw std::invalid_argument("top-k chunks are 2..65536");
  if (!(t.density > 0 && t.density <= 1)) throw std::invalid_argument("top-k density in (0, 1]");
}

// Indices below 2^16: the low byte of each, then the bits above it (pack_codes packs at most 8).
at::Tensor pack_indices(const at::Tensor& idx, int bits) {
  if (bits <= 8) return pack_codes(idx, bits);
  return at::cat(
      {pack_codes(idx.bitwise_and(255), 8), pack_codes(idx.bitwise_right_shift(8), bits - 8)});
}

at::Tensor unpack_indices(const at::Tensor& bytes, int bits, int64_t n) {
  if (bits <= 8) return unpack_codes(bytes, bits, n);
  const auto low = unpack_codes(bytes.narrow(0, 0, n), 8, n);
  const auto high = unpack_codes(bytes.narrow(0, n, bytes.numel() - n), bits - 8, n);
  return high.bitwise_left_shift(8).bitwise_or(low);
}

void put(at::Tensor& wire, uint64_t at, const at::Tensor& bytes) {
  auto b = bytes.contiguous();
  std::memcpy(wire.data_ptr<uint8_t>() + at, b.data_ptr(), b.numel() * b.element_size());
}

void refuse_header(const Header& h, const Header& want) {
  auto differs = [](const char* what, uint64_t got, uint64_t expected) {
    throw std::invalid_argument(std::string("top-k header: ") + what + " " + std::to_string(got) +
                                ", expected " + std::to_string(expected));
  };
  if (h.magic != want.magic) differs("magic", h.magic, want.magic);
  if (h.version != want.version) differs("version", h.version, want.version);
  if (h.bits != want.bits) differs("bits", h.bits, want.bits);
  if (h.chunk != want.chunk) differs("chunk", h.chunk, want.chunk);
  if (h.k != want.k) differs("kept per chunk", h.k, want.k);
  if (h.numel != want.numel) differs("values", h.numel, want.numel);
}

}  // namespace

TopK topk_of(const config::DilocoConfig& d) {
  return {d.topk_density, static_cast<int>(d.topk_bits), d.topk_chunk};
}

int64_t topk_kept(int64_t len, double density) {
  if (len <= 0) return 0;
  // A hair below the product, so that a density of exactly k/len keeps k despite its rounding.
  const auto k = static_cast<int64_t>(std::ceil(density * static_cast<double>(len) - 1e-9));
  return std::clamp<int64_t>(k, 1, len);
}

uint64_t topk_bytes(int64_t numel, const TopK& t) {
  check(t);
  return layout_of(numel, t).bytes;
}

int64_t topk_numel(const at::Tensor& wire) {
  if (wire.scalar_type() != at::kByte || wire.dim() != 1 || wire.numel() < kHeader)
    throw std::invalid_argument("not a top-k wire (" + std::to_string(wire.numel()) +
                                " values of " + std::string(c10::toString(wire.scalar_type())) +
                                ")");
  Header h;
  std::memcpy(&h, wire.contiguous().data_ptr<uint8_t>(), kHeader);
  if (h.numel > (uint64_t{1} << 40))
    throw std::invalid_argument("a top-k wire claims 2^40+ values");
  return static_cast<int64_t>(h.numel);
}

at::Tensor encode_topk(const at::Tensor& x, const TopK& t) {
  at::NoGradGuard no_grad;
  check(t);
  const auto flat = x.detach().to(at::kCPU).to(at::kFloat).reshape({-1}).contiguous();
  const int64_t n = flat.numel();
  const auto l = layout_of(n, t);
  auto wire = at::zeros({static_cast<int64_t>(l.bytes)}, at::kByte);
  Header h;
  h.bits = static_cast<uint8_t>(t.bits);
  h.chunk = static_cast<uint32_t>(t.chunk);
  h.k = static_cast<uint32_t>(l.k);
  h.numel = static_cast<uint64_t>(n);
  std::memcpy(wire.data_ptr<uint8_t>(), &h, kHeader);
  if (n == 0) return wire;
  // Padding sorts below every real magnitude, so that no chunk keeps a value past the end.
  auto mag = at::full({l.chunks * l.width}, -1.0f);
  mag.narrow(0, 0, n).copy_(flat.abs());
  at::Tensor top, idx;  // per chunk, largest magnitude first
  std::tie(top, idx) = at::topk(mag.view({l.chunks, l.width}), l.k, 1, true, true);
  // The last chunk keeps only its first k_last.
  auto keep = [&](const at::Tensor& m) {
    if (l.k_last == l.k) return m.reshape({-1});
    return at::cat(
        {m.narrow(0, 0, l.chunks - 1).reshape({-1}), m[l.chunks - 1].narrow(0, 0, l.k_last)});
  };
  const auto index = keep(idx);
  const auto row = at::arange(l.kept, at::kLong).div(l.k, "floor").clamp_max(l.chunks - 1);
  const auto values = flat.index_select(0, row * l.width + index);
  // A chunk holding NaN or Inf says so in its range, which every receiver refuses.
  const auto finite = at::isfinite(mag.view({l.chunks, l.width})).all(1);
  const auto hi = at::where(finite, top.select(1, 0), at::full({l.chunks}, NAN)).contiguous();
  auto lo = top.select(1, l.k - 1).clone();
  lo[l.chunks - 1].copy_(top[l.chunks - 1][l.k_last - 1]);
  const int64_t levels = int64_t{1} << (t.bits - 1);
  const auto span = (hi - lo).to(at::kDouble).index_select(0, row);
  const auto above = (values.abs().to(at::kDouble) - lo.to(at::kDouble).index_select(0, row));
  const auto level =
      at::where(span.gt(0), (above / span * (levels - 1)).round(), at::zeros_like(span))
          .clamp(0, levels - 1)
          .to(at::kLong);
  const auto codes = level + values.lt(0).to(at::kLong) * levels;
  put(wire, kHeader, at::stack({lo, hi}, 1));
  put(wire, kHeader + l.lohi, pack_indices(index, l.index_bits));
  put(wire, kHeader + l.lohi + l.indices, pack_codes(codes, t.bits));
  return wire;
}

at::Tensor decode_topk(const at::Tensor& wire, const TopK& t, at::IntArrayRef shape) {
  check(t);
  int64_t n = 1;
  for (auto d : shape) n *= d;
  const auto l = layout_of(n, t);
  if (wire.scalar_type() != at::kByte || wire.dim() != 1 ||
      static_cast<uint64_t>(wire.numel()) != l.bytes)
    throw std::invalid_argument("expected " + std::to_string(l.bytes) + " top-k bytes, got " +
                                std::to_string(wire.numel()));
  const auto bytes = wire.contiguous();
  Header h, want;
  std::memcpy(&h, bytes.data_ptr<uint8_t>(), kHeader);
  want.bits = static_cast<uint8_t>(t.bits);
  want.chunk = static_cast<uint32_t>(t.chunk);
  want.k = static_cast<uint32_t>(l.k);
  want.numel = static_cast<uint64_t>(n);
  refuse_header(h, want);
  auto out = at::zeros({n}, at::kFloat);
  if (n == 0) return out.reshape(shape);
  auto lohi = at::empty({l.chunks, 2}, at::kFloat);
  std::memcpy(lohi.data_ptr(), bytes.data_ptr<uint8_t>() + kHeader, l.lohi);
  const auto lo = lohi.select(1, 0), hi = lohi.select(1, 1);
  if (!at::isfinite(lohi).all().item<bool>() || lo.lt(0).any().item<bool>() ||
      hi.lt(lo).any().item<bool>())
    throw std::invalid_argument("a chunk's magnitude range is NaN, Inf, negative or reversed");
  const auto index =
      unpack_indices(bytes.narrow(0, kHeader + l.lohi, l.indices), l.index_bits, l.kept);
  const auto row = at::arange(l.kept, at::kLong).div(l.k, "floor").clamp_max(l.chunks - 1);
  const auto end =
      at::where(row.eq(l.chunks - 1), at::full_like(row, l.last), at::full_like(row, l.width));
  if (index.ge(end).any().item<bool>())
    throw std::invalid_argument("an index is past its chunk's end");
  const auto codes =
      unpack_codes(bytes.narrow(0, kHeader + l.lohi + l.indices, l.codes), t.bits, l.kept);
  const int64_t levels = int64_t{1} << (t.bits - 1);
  const auto low = lo.index_select(0, row);
  const auto step = ((hi - lo) / static_cast<double>(levels - 1)).index_select(0, row);
  const auto magnitude = low + codes.bitwise_and(levels - 1).to(at::kFloat) * step;
  const auto value = at::where(codes.ge(levels), -magnitude, magnitude);
  out.index_put_({row * l.width + index}, value);
  return out.reshape(shape);
}

at::Tensor encode_round(const at::Tensor& x, const config::DilocoConfig& d) {
  if (d.compress == config::Compress::topk) return encode_topk(x, topk_of(d));
  return encode(x, d.quantize, d.quant_block);
}

at::Tensor decode_round(const at::Tensor& wire, const config::DilocoConfig& d,
                        at::IntArrayRef shape) {
  if (d.compress == config::Compress::topk) return decode_topk(wire, topk_of(d), shape);
  return decode(wire, d.quantize, d.quant_block, shape);
}

at::Tensor decode_round(const at::Tensor& wire, const config::DilocoConfig& d,
                        at::IntArrayRef shape, const std::vector<double>& densities,
                        double* density) {
  if (density) *density = d.topk_density;
  if (d.compress != config::Compress::topk || densities.size() < 2)
    return decode_round(wire, d, shape);
  if (wire.scalar_type() != at::kByte || wire.dim() != 1 || wire.numel() < kHeader)
    throw std::invalid_argument("a top-k wire is one uint8 tensor of at least its header");
  Header h;
  std::memcpy(&h, wire.contiguous().data_ptr<uint8_t>(), kHeader);
  int64_t n = 1;
  for (auto v : shape) n *= v;
  auto t = topk_of(d);
  std::string kept;
  for (double rung : densities) {
    t.density = rung;
    const auto k = layout_of(n, t).k;
    if (static_cast<int64_t>(h.k) == k) {
      auto x = decode_topk(wire, t, shape);
      if (density) *density = rung;
      return x;
    }
    kept += (kept.empty() ? "" : ", ") + std::to_string(k);
  }
  throw std::invalid_argument("top-k header: kept per chunk " + std::to_string(h.k) +
                              ", expected one of " + kept);
}

std::vector<double> round_densities(const config::RunConfig& config) {
  if (config.swarm.compression != config::Compression::automatic ||
      config.diloco.compress != config::Compress::topk)
    return {};
  return policy::density_ladder(config.diloco.topk_density);
}

uint64_t round_bytes(int64_t numel, const config::DilocoConfig& d) {
  if (d.compress == config::Compress::topk) return topk_bytes(numel, topk_of(d));
  return encoded_bytes(numel, d.quantize, d.quant_block);
}

}  // namespace swarmrt::model
