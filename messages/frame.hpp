// Building and checking micro-batch frames: a header whose tensor metadata is taken from the
// tensors themselves, and the receiver's check that what arrived is what the header says.
#pragma once

#include "messages/header.hpp"
#include "messages/types.hpp"

namespace swarmrt::messages {

Frame make_frame(MicroBatchHeader header, std::vector<at::Tensor> tensors);
// Decodes the header and checks the tensors against it; throws DecodeError with the reason.
MicroBatchHeader open_frame(const Frame& frame);

Frame make_round_frame(RoundHeader header, std::vector<at::Tensor> tensors);
RoundHeader open_round_frame(const Frame& frame);

uint64_t payload_bytes(const std::vector<at::Tensor>& tensors);

}  // namespace swarmrt::messages
