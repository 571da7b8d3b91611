#include "messages/frame.hpp"

namespace swarmrt::messages {

uint64_t payload_bytes(const std::vector<at::Tensor>& tensors) {
  uint64_t n = 0;
  for (const auto& t : tensors)
    if (t.defined()) n += static_cast<uint64_t>(t.numel()) * t.element_size();
  return n;
}

Frame make_frame(MicroBatchHeader header, std::vector<at::Tensor> tensors) {
  header.tensors = metas_of(tensors);
  return Frame{encode(header), std::move(tensors)};
}

MicroBatchHeader open_frame(const Frame& frame) {
  auto header = decode_microbatch(frame.header);
  if (auto why = check_payload(header.tensors, frame.tensors); !why.empty())
    throw DecodeError("micro-batch " + std::to_string(header.step) + "/" +
                      std::to_string(header.micro_batch) + ": " + why);
  return header;
}

Frame make_round_frame(RoundHeader header, std::vector<at::Tensor> tensors) {
  if (header.tensor_names.size() != tensors.size())
    throw DecodeError("round frame: " + std::to_string(header.tensor_names.size()) + " names for " +
                      std::to_string(tensors.size()) + " tensors");
  header.tensors = metas_of(tensors);
  return Frame{encode(header), std::move(tensors)};
}

RoundHeader open_round_frame(const Frame& frame) {
  auto header = decode_round(frame.header);
  if (header.tensor_names.size() != frame.tensors.size())
    throw DecodeError("round " + std::to_string(header.round_id) + ": header names " +
                      std::to_string(header.tensor_names.size()) + " tensors, frame carries " +
                      std::to_string(frame.tensors.size()));
  if (auto why = check_payload(header.tensors, frame.tensors); !why.empty())
    throw DecodeError("round " + std::to_string(header.round_id) + ": " + why);
  return header;
}

}  // namespace swarmrt::messages
