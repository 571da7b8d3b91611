// Micro-batch headers and DiLoCo round headers: C++ mirrors of the Cap'n Proto schemas, and
// their encoding. Decoding never trusts its input: a frame that does not decode, or whose
// tensor metadata disagrees with the tensors beside it, is refused with a reason.
#pragma once

#include <ATen/core/Tensor.h>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

namespace swarmrt::messages {

struct DecodeError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// verify and verify_output carry a spot check (docs/security.md): the input of a checked stage
// again, to another worker of it, and that worker's output to the next-stage worker that holds
// the original; neither keeps autograd state nor counts as a hop of the micro-batch.
enum class Direction : uint8_t {
  forward = 0,
  backward = 1,
  eval = 2,
  verify = 3,
  verify_output = 4
};
const char* to_string(Direction d);

struct TensorMeta {
  at::ScalarType dtype = at::kFloat;
  std::vector<int64_t> shape;
  uint64_t byte_size = 0;
  bool operator==(const TensorMeta& o) const {
    return dtype == o.dtype && shape == o.shape && byte_size == o.byte_size;
  }
};

struct MicroBatchHeader {
  uint64_t run_id = 0;
  uint64_t step = 0;
  uint32_t micro_batch = 0;
  uint32_t attempt = 0;
  uint32_t stage = 0;  // the stage receiving this hop
  Direction direction = Direction::forward;
  std::vector<uint32_t> route;  // worker ids visited, stage 0 first
  uint32_t samples = 0;
  std::vector<TensorMeta> tensors;
  // Re-runs only: per stage, the worker that already took this micro-batch's gradient in this
  // step (kNoWorker: none). The re-run goes through it again, so each stage takes the
  // micro-batch's gradient once.
  std::vector<uint32_t> pin;
  // The step's loss scale (train.loss_scale, model/precision.hpp): the last stage seeds
  // backward with loss x loss_scale and every worker divides its gradient by it. 1: none.
  double loss_scale = 1.0;
  // How tensor 0 (hidden states or their gradient) is encoded: swarm.hop_encoding's value
  // (config::HopEncoding, model/hop_codec.hpp). A hop whose encoding is not the run's, or whose
  // tensor is not what its encoding writes, is refused.
  uint8_t hop_encoding = 0;
};
constexpr uint32_t kNoWorker = 0xFFFFFFFFu;

enum class RoundStatus : uint8_t { contribution = 0, applied = 1, rejected = 2 };

struct RoundHeader {
  uint64_t round_id = 0;
  uint32_t stage = 0;
  uint32_t fragment = 0;
  uint32_t contributor = 0;
  RoundStatus status = RoundStatus::contribution;
  uint64_t step = 0;
  std::string reason;
  std::vector<std::string> tensor_names;
  std::vector<TensorMeta> tensors;  // one per name
  // A mean over several workers (a group all-reduce): all of them. Empty: just contributor.
  std::vector<uint32_t> contributors;
  // An `applied` round of a quantized Streaming DiLoCo group: the tensors are the fragment's
  // θ(t) − θ(t−1) in diloco.quantize's encoding, not θ(t).
  bool update = false;
  // A contribution of the run's last step: an eager group answers it with θ(t) itself, in
  // float32.
  bool final = false;
  // An `applied` round of an eager group (diloco.eager): the tensors are the round's mean
  // pseudo-gradient Δ̄ in diloco.quantize's encoding; `contributors` lists who is in it.
  bool average = false;
  // The end of a synchronous warm-up (diloco.warmup_sync_steps): a contribution carries the
  // worker's θ at that step (every tensor of the stage), which the group's rounds start from;
  // the group's `applied` answer carries no tensors.
  bool warmup_end = false;
  // An `applied` round under diloco.all_gather: the tensors are the contributions of
  // `contributors` other than the receiver's own, as they were sent, in that order (each the
  // fragment's tensors, `tensor_names` repeating them); the receiver sums them with its own.
  bool gathered = false;
  // swarm.compression = auto under diloco.all_gather: on a contribution, the top-k density the
  // worker's link carries; on a gathered answer, the least of the round's, a cap on the
  // receiver's next contribution. 0: none.
  double density = 0;
};

// Limits that keep a hostile or corrupt header from costing more than a bounded amount.
constexpr size_t kMaxHeaderBytes = 1 << 20;
constexpr size_t kMaxRoute = 256;
constexpr size_t kMaxTensors = 4096;
constexpr size_t kMaxRank = 8;

// Encoded headers are word-aligned Cap'n Proto flat arrays.
std::vector<uint8_t> encode(const MicroBatchHeader& h);
std::vector<uint8_t> encode(const RoundHeader& h);
MicroBatchHeader decode_microbatch(const uint8_t* data, size_t size);
RoundHeader decode_round(const uint8_t* data, size_t size);
inline MicroBatchHeader decode_microbatch(const std::vector<uint8_t>& b) {
  return decode_microbatch(b.data(), b.size());
}
inline RoundHeader decode_round(const std::vector<uint8_t>& b) {
  return decode_round(b.data(), b.size());
}

TensorMeta meta_of(const at::Tensor& t);
std::vector<TensorMeta> metas_of(const std::vector<at::Tensor>& ts);
// Empty when `tensors` match the header's metadata one by one; otherwise why not.
std::string check_payload(const std::vector<TensorMeta>& metas,
                          const std::vector<at::Tensor>& tensors);

}  // namespace swarmrt::messages
