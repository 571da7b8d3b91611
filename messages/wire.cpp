#include "messages/wire.hpp"

#include <ATen/ATen.h>
#include <cstring>
#include <limits>

#include "messages/frame.hpp"

namespace swarmrt::messages {
namespace {

constexpr char kMagic[4] = {'S', 'W', 'T', 'C'};
constexpr uint32_t kVersion = 1;
constexpr size_t kMessagePrefix = 8;  // u8 kind, 3 zero bytes, u32 header length

template <class T>
void put(std::vector<uint8_t>& out, T v) {
  const auto* p = reinterpret_cast<const uint8_t*>(&v);
  out.insert(out.end(), p, p + sizeof(T));
}

template <class T>
T get(const uint8_t* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}

// The message as a list of byte ranges, so chunks are cut without first copying the tensors
// into one buffer.
struct Piece {
  const uint8_t* data;
  size_t size;
};

}  // namespace

std::unique_ptr<ChunkPlan> plan_chunks(const Frame& frame, FrameKind kind, uint64_t message_id,
                                       size_t max_chunk) {
  if (max_chunk <= kChunkPrefix) throw DecodeError("chunk limit leaves no room for data");
  auto plan = std::make_unique<ChunkPlan>();
  auto& prefix = plan->message_prefix;
  put<uint8_t>(prefix, static_cast<uint8_t>(kind));
  put<uint8_t>(prefix, 0);
  put<uint16_t>(prefix, 0);
  put<uint32_t>(prefix, static_cast<uint32_t>(frame.header.size()));
  plan->header = frame.header;
  std::vector<Piece> pieces = {{prefix.data(), prefix.size()},
                               {plan->header.data(), plan->header.size()}};
  for (const auto& t : frame.tensors) {
    plan->tensors.push_back(t.detach().to(at::kCPU).contiguous());
    const auto& c = plan->tensors.back();
    pieces.push_back({static_cast<const uint8_t*>(c.data_ptr()),
                      static_cast<size_t>(c.numel()) * c.element_size()});
  }
  uint64_t total = 0;
  for (const auto& p : pieces) total += p.size;
  const size_t slice_max = max_chunk - kChunkPrefix;
  const uint64_t count64 = total == 0 ? 1 : (total + slice_max - 1) / slice_max;
  if (count64 > UINT32_MAX) throw DecodeError("message too large to chunk");
  const auto count = static_cast<uint32_t>(count64);

  size_t piece = 0, within = 0;
  uint64_t offset = 0;
  for (uint32_t index = 0; index < count; ++index) {
    const auto len = static_cast<uint32_t>(std::min<uint64_t>(slice_max, total - offset));
    ChunkPlan::Chunk chunk;
    auto& head = chunk.prefix;
    head.reserve(kChunkPrefix);
    head.insert(head.end(), kMagic, kMagic + 4);
    put<uint32_t>(head, kVersion);
    put<uint64_t>(head, message_id);
    put<uint32_t>(head, index);
    put<uint32_t>(head, count);
    put<uint64_t>(head, total);
    put<uint64_t>(head, offset);
    put<uint32_t>(head, len);
    put<uint32_t>(head, 0);
    size_t left = len;
    while (left > 0) {
      const auto& p = pieces[piece];
      const size_t take = std::min(left, p.size - within);
      chunk.slices.push_back({p.data + within, take});
      within += take;
      left -= take;
      if (within == p.size) ++piece, within = 0;
    }
    while (piece < pieces.size() && pieces[piece].size == 0) ++piece;
    offset += len;
    chunk.bytes = kChunkPrefix + len;
    plan->chunks.push_back(std::move(chunk));
  }
  return plan;
}

std::vector<std::vector<uint8_t>> to_chunks(const Frame& frame, FrameKind kind, uint64_t message_id,
                                            size_t max_chunk) {
  auto plan = plan_chunks(frame, kind, message_id, max_chunk);
  std::vector<std::vector<uint8_t>> chunks;
  for (const auto& c : plan->chunks) {
    std::vector<uint8_t> chunk;
    chunk.reserve(c.bytes);
    chunk.insert(chunk.end(), c.prefix.begin(), c.prefix.end());
    for (const auto& s : c.slices) chunk.insert(chunk.end(), s.data, s.data + s.size);
    chunks.push_back(std::move(chunk));
  }
  return chunks;
}

ChunkPrefix parse_chunk_prefix(const uint8_t* data) {
  if (std::memcmp(data, kMagic, 4) != 0) throw DecodeError("chunk has a bad magic");
  if (const auto v = get<uint32_t>(data + 4); v != kVersion)
    throw DecodeError("chunk format version " + std::to_string(v) + ", this build speaks " +
                      std::to_string(kVersion));
  ChunkPrefix p;
  p.message_id = get<uint64_t>(data + 8);
  p.index = get<uint32_t>(data + 16);
  p.count = get<uint32_t>(data + 20);
  p.total = get<uint64_t>(data + 24);
  p.offset = get<uint64_t>(data + 32);
  p.length = get<uint32_t>(data + 40);
  return p;
}

std::optional<Reassembler::Complete> Reassembler::add(const uint8_t* data, size_t size) {
  if (size < kChunkPrefix)
    throw DecodeError("chunk of " + std::to_string(size) + " bytes is shorter than its " +
                      std::to_string(kChunkPrefix) + "-byte prefix");
  if (std::memcmp(data, kMagic, 4) != 0) throw DecodeError("chunk has a bad magic");
  if (const auto v = get<uint32_t>(data + 4); v != kVersion)
    throw DecodeError("chunk format version " + std::to_string(v) + ", this build speaks " +
                      std::to_string(kVersion));
  const auto id = get<uint64_t>(data + 8);
  const auto index = get<uint32_t>(data + 16);
  const auto count = get<uint32_t>(data + 20);
  const auto total = get<uint64_t>(data + 24);
  const auto offset = get<uint64_t>(data + 32);
  const auto len = get<uint32_t>(data + 40);
  auto fail = [&](const std::string& why) -> std::optional<Complete> {
    partial_.erase(id);
    throw DecodeError("message " + std::to_string(id) + " chunk " + std::to_string(index) + ": " +
                      why);
  };
  if (len != size - kChunkPrefix)
    return fail("declares " + std::to_string(len) + " bytes, carries " +
                std::to_string(size - kChunkPrefix));
  if (total > max_message_)
    return fail("message of " + std::to_string(total) + " bytes exceeds the limit of " +
                std::to_string(max_message_));
  if (count == 0 || index >= count) return fail("index out of range of " + std::to_string(count));
  if (offset > total || len > total - offset) return fail("slice lies outside the message");

  auto it = partial_.find(id);
  if (it == partial_.end()) {
    if (index != 0) return fail("first chunk seen is not chunk 0");
    if (partial_.size() >= max_pending_) return fail("too many messages in progress");
    it = partial_.emplace(id, Partial{}).first;
    it->second.count = count;
    it->second.total = total;
    it->second.bytes.reserve(static_cast<size_t>(std::min<uint64_t>(total, 64u << 20)));
  }
  auto& p = it->second;
  if (count != p.count || total != p.total) return fail("disagrees with earlier chunks");
  if (index != p.next_index || offset != p.received) return fail("out of order");
  p.bytes.insert(p.bytes.end(), data + kChunkPrefix, data + size);
  p.received += len;
  ++p.next_index;
  if (p.next_index < p.count) return std::nullopt;
  if (p.received != p.total) return fail("chunks end before the message does");
  auto bytes = std::move(p.bytes);
  partial_.erase(it);
  return decode_message(bytes.data(), bytes.size());
}

Reassembler::Complete decode_message(const uint8_t* data, size_t size) {
  return decode_message(data, size, nullptr);
}

Reassembler::Complete decode_message(const uint8_t* data, size_t size,
                                     const std::shared_ptr<void>& owner) {
  if (size < kMessagePrefix) throw DecodeError("message shorter than its prefix");
  const auto kind = data[0];
  if (kind > static_cast<uint8_t>(FrameKind::round))
    throw DecodeError("unknown frame kind " + std::to_string(kind));
  const auto header_len = get<uint32_t>(data + 4);
  if (header_len > size - kMessagePrefix)
    throw DecodeError("header of " + std::to_string(header_len) + " bytes overruns the message");
  Reassembler::Complete out;
  out.kind = static_cast<FrameKind>(kind);
  out.frame.header.assign(data + kMessagePrefix, data + kMessagePrefix + header_len);
  const auto metas = out.kind == FrameKind::microbatch ? decode_microbatch(out.frame.header).tensors
                                                       : decode_round(out.frame.header).tensors;
  // read_metas has checked each byte size against dtype and shape; now they must add up to
  // exactly the payload that came.
  uint64_t need = 0;
  for (const auto& m : metas) need += m.byte_size;
  const uint64_t have = size - kMessagePrefix - header_len;
  if (need != have)
    throw DecodeError("tensors need " + std::to_string(need) + " payload bytes, message has " +
                      std::to_string(have));
  const uint8_t* cursor = data + kMessagePrefix + header_len;
  for (const auto& m : metas) {
    const auto options = at::TensorOptions().dtype(m.dtype);
    const auto align = static_cast<uintptr_t>(c10::elementSize(m.dtype));
    if (owner && reinterpret_cast<uintptr_t>(cursor) % align == 0 && m.byte_size > 0) {
      // A view of the received bytes: the buffer lives as long as the last tensor on it.
      out.frame.tensors.push_back(at::from_blob(
          const_cast<uint8_t*>(cursor), m.shape, [owner](void*) {}, options));
    } else {
      auto t = at::empty(m.shape, options);
      if (m.byte_size > 0) std::memcpy(t.data_ptr(), cursor, m.byte_size);
      out.frame.tensors.push_back(std::move(t));
    }
    cursor += m.byte_size;
  }
  if (out.kind == FrameKind::microbatch)
    open_frame(out.frame);
  else
    open_round_frame(out.frame);
  return out;
}

std::vector<uint8_t> encode_tensor_list(const TensorList& list) {
  RoundHeader h;
  h.status = RoundStatus::applied;
  h.tensor_names = list.names;
  h.tensor_names.resize(list.tensors.size());  // unnamed lists (gradient sums) get "" names
  auto chunks = to_chunks(make_round_frame(std::move(h), list.tensors), FrameKind::round, 0,
                          std::numeric_limits<uint32_t>::max());
  if (chunks.size() != 1) throw DecodeError("tensor list larger than 4 GiB");
  return std::move(chunks.front());
}

TensorList decode_tensor_list(const std::vector<uint8_t>& bytes) {
  Reassembler one(kDefaultMaxMessage, 1);
  auto complete = one.add(bytes);
  if (!complete || complete->kind != FrameKind::round)
    throw DecodeError("tensor list bytes are not one whole round-style frame");
  TensorList out;
  out.names = decode_round(complete->frame.header).tensor_names;
  out.tensors = std::move(complete->frame.tensors);
  return out;
}

}  // namespace swarmrt::messages
