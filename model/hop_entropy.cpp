#include "model/hop_entropy.hpp"

#include <zlib.h>

#include <cstring>
#include <stdexcept>
#include <string>

namespace swarmrt::model {
namespace {

// The wire's frame after the scales (a checked size).
std::pair<uint8_t*, size_t> frame_of(const at::Tensor& wire, int64_t nb) {
  return {wire.data_ptr<uint8_t>() + 2 * nb, static_cast<size_t>(wire.numel() - 2 * nb)};
}

// Inflates the frame into `codes` (exactly nb · block bytes) or throws naming what is wrong.
void inflate_codes(const at::Tensor& wire, int64_t nb, int64_t block, uint8_t* codes) {
  if (wire.scalar_type() != at::kByte || wire.dim() != 1)
    throw std::invalid_argument("an entropy hop is one uint8 tensor");
  const int64_t n = nb * block;
  const auto bytes = static_cast<uint64_t>(wire.numel());
  if (bytes <= static_cast<uint64_t>(2 * nb) || bytes > entropy_wire_bound(nb, block))
    throw std::invalid_argument("an entropy hop of " + std::to_string(n) + " values takes more " +
                                "than " + std::to_string(2 * nb) + " and at most " +
                                std::to_string(entropy_wire_bound(nb, block)) + " bytes, got " +
                                std::to_string(bytes));
  auto [frame, size] = frame_of(wire, nb);
  z_stream z{};
  if (inflateInit(&z) != Z_OK) throw std::runtime_error("zlib: no inflate state");
  z.next_in = frame;
  z.avail_in = static_cast<uInt>(size);
  z.next_out = codes;
  z.avail_out = static_cast<uInt>(n);
  const int rc = inflate(&z, Z_FINISH);
  const bool whole = rc == Z_STREAM_END && z.avail_out == 0 && z.avail_in == 0;
  const std::string why = z.msg ? z.msg : "";
  const auto out = static_cast<int64_t>(z.total_out);
  const auto left = static_cast<int64_t>(z.avail_in);
  inflateEnd(&z);
  if (whole) return;
  if (rc == Z_DATA_ERROR) throw std::invalid_argument("an entropy hop's frame is corrupt: " + why);
  if (rc == Z_STREAM_END && out < n)
    throw std::invalid_argument("an entropy hop's frame holds " + std::to_string(out) +
                                " values, the shape needs " + std::to_string(n));
  if (rc == Z_STREAM_END)
    throw std::invalid_argument("an entropy hop's frame does not end where the wire does (" +
                                std::to_string(left) + " bytes after it)");
  throw std::invalid_argument("an entropy hop's frame holds more than the " + std::to_string(n) +
                              " values the shape needs, or is cut short");
}

at::Tensor checked_scales(const at::Tensor& wire, int64_t nb) {
  auto scales = wire.narrow(0, 0, 2 * nb).clone().view(at::kBFloat16).to(at::kFloat);
  if (!at::isfinite(scales).all().item<bool>() || scales.lt(0).any().item<bool>())
    throw std::invalid_argument("a block scale is NaN, Inf or negative");
  return scales;
}

}  // namespace

uint64_t entropy_wire_bound(int64_t nb, int64_t block) {
  return 2 * static_cast<uint64_t>(nb) + compressBound(static_cast<uLong>(nb * block));
}

at::Tensor pack_entropy(const at::Tensor& scales, const at::Tensor& codes) {
  const auto s = scales.to(at::kCPU, at::kBFloat16).contiguous();
  const auto c = codes.to(at::kCPU, at::kByte).contiguous();
  const int64_t nb = s.numel(), n = c.numel();
  auto wire = at::empty({static_cast<int64_t>(entropy_wire_bound(nb, n / nb))}, at::kByte);
  std::memcpy(wire.data_ptr<uint8_t>(), s.data_ptr(), 2 * nb);
  // Huffman codes alone (Z_HUFFMAN_ONLY): the codes' entropy is what makes them small, and
  // repeats of a few likely values found as matches cost more than they save (zstd, which
  // looks for them, measured 20% over the entropy on gradients' codes; Huffman 5%). The zlib
  // format's Adler-32 lets the receiver refuse a corrupt frame.
  z_stream z{};
  if (deflateInit2(&z, 1, Z_DEFLATED, 15, 9, Z_HUFFMAN_ONLY) != Z_OK)
    throw std::runtime_error("zlib: no deflate state");
  z.next_in = c.data_ptr<uint8_t>();
  z.avail_in = static_cast<uInt>(n);
  z.next_out = wire.data_ptr<uint8_t>() + 2 * nb;
  z.avail_out = static_cast<uInt>(wire.numel() - 2 * nb);
  const int rc = deflate(&z, Z_FINISH);
  const auto size = z.total_out;
  deflateEnd(&z);
  if (rc != Z_STREAM_END) throw std::runtime_error("zlib: a hop's codes did not fit their bound");
  return wire.narrow(0, 0, static_cast<int64_t>(2 * nb + size)).clone();
}

std::pair<at::Tensor, at::Tensor> unpack_entropy(const at::Tensor& wire, int64_t nb,
                                                 int64_t block) {
  const auto host = wire.is_cpu() ? wire.contiguous() : wire.to(at::kCPU).contiguous();
  auto codes = at::empty({nb * block}, at::kByte);
  inflate_codes(host, nb, block, codes.data_ptr<uint8_t>());
  return {checked_scales(host, nb), codes};
}

}  // namespace swarmrt::model
