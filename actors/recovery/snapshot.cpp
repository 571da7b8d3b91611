#include "actors/recovery/snapshot.hpp"

#include <caf/binary_deserializer.hpp>
#include <caf/binary_serializer.hpp>
#include <cstring>

#include "messages/frame.hpp"
#include "model/crc.hpp"

namespace swarmrt::actors::recovery {

namespace {
constexpr const char* kChunkReason = "state chunk";
}

uint32_t crc_of(const char* data, size_t n) {
  return model::crc32_of(data, n);
}

std::shared_ptr<const Snapshot> make_snapshot(caf::actor_system& sys,
                                              const messages::WorkerState& st,
                                              uint32_t chunk_bytes) {
  auto snap = std::make_shared<Snapshot>();
  caf::binary_serializer sink{sys, snap->bytes};
  if (auto err = sink(const_cast<messages::WorkerState&>(st)))
    throw std::runtime_error("a state snapshot does not serialize: " + sys.render(err));
  auto& m = snap->manifest;
  m.step = st.step;
  m.total = snap->bytes.size();
  m.chunk_bytes = chunk_bytes;
  const uint64_t chunks = (m.total + chunk_bytes - 1) / chunk_bytes;
  m.crcs.reserve(chunks);
  for (uint64_t c = 0; c < chunks; ++c) {
    const auto [offset, length] = chunk_range(m, static_cast<uint32_t>(c));
    m.crcs.push_back(crc_of(snap->bytes.data() + offset, length));
  }
  return snap;
}

std::pair<uint64_t, uint64_t> chunk_range(const messages::StateManifest& m, uint32_t index) {
  const uint64_t offset = uint64_t{index} * m.chunk_bytes;
  return {offset, std::min<uint64_t>(m.chunk_bytes, m.total - std::min(offset, m.total))};
}

std::string check_manifest(const messages::StateManifest& m, uint64_t max_bytes) {
  if (m.total == 0 || m.chunk_bytes == 0) return "an empty state";
  if (m.total > max_bytes)
    return "a state of " + std::to_string(m.total) + " bytes exceeds the limit of " +
           std::to_string(max_bytes) + " (transport.max_message_mib)";
  if (m.crcs.size() != (m.total + m.chunk_bytes - 1) / m.chunk_bytes)
    return std::to_string(m.crcs.size()) + " checksums for " + std::to_string(m.total) +
           " bytes in chunks of " + std::to_string(m.chunk_bytes);
  return {};
}

caf::expected<messages::WorkerState> decode_state(caf::actor_system& sys,
                                                  const std::vector<char>& bytes) {
  messages::WorkerState st;
  caf::binary_deserializer source{sys, bytes.data(), bytes.size()};
  if (auto err = source(st))
    return caf::make_error(caf::sec::runtime_error,
                           "an assembled state does not decode: " + sys.render(err));
  for (const auto* list : {&st.params, &st.anchor, &st.moments, &st.residual})
    if (!list->error.empty())
      return caf::make_error(caf::sec::runtime_error,
                             "an assembled state was refused: " + list->error);
  return st;
}

messages::Frame chunk_frame(int64_t step, uint32_t index, const char* data, size_t n) {
  messages::RoundHeader h;
  h.round_id = index;
  h.step = static_cast<uint64_t>(step);
  h.reason = kChunkReason;
  h.tensor_names = {"bytes"};
  // Its own copy: the frame may be written to a link after the snapshot is gone.
  auto t = at::empty({static_cast<int64_t>(n)}, at::kByte);
  if (n > 0) std::memcpy(t.data_ptr(), data, n);
  return messages::make_round_frame(std::move(h), {t});
}

Chunk open_chunk_frame(const messages::Frame& frame) {
  const auto h = messages::open_round_frame(frame);
  if (h.reason != kChunkReason || frame.tensors.size() != 1 ||
      frame.tensors[0].scalar_type() != at::kByte || frame.tensors[0].dim() != 1 ||
      h.round_id > UINT32_MAX)
    throw messages::DecodeError("a frame that is not a state chunk");
  return Chunk{static_cast<int64_t>(h.step), static_cast<uint32_t>(h.round_id),
               frame.tensors[0].contiguous()};
}

void SnapshotStore::put(std::shared_ptr<const Snapshot> s) {
  std::lock_guard<std::mutex> lock(mutex_);
  snapshot_ = std::move(s);
}

std::shared_ptr<const Snapshot> SnapshotStore::get() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return snapshot_;
}

bool SnapshotStore::holds(int64_t step) const {
  std::lock_guard<std::mutex> lock(mutex_);
  return snapshot_ && snapshot_->manifest.step == step;
}

void SnapshotStore::drop(int64_t step) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (snapshot_ && snapshot_->manifest.step == step) snapshot_.reset();
}

}  // namespace swarmrt::actors::recovery
