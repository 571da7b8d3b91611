// What the DiLoCo group tests send: a worker's contribution to a round of stage 0, one tensor
// "w" (the group's θ in these tests).
#pragma once

#include <ATen/ATen.h>

#include "messages/frame.hpp"

namespace swarmrt::testing {

// `step`: the step the round started after (its outer learning rate's).
inline messages::Frame contribution(uint64_t round, uint32_t worker, at::Tensor delta,
                                    uint64_t step = 0) {
  messages::RoundHeader h;
  h.round_id = round;
  h.step = step;
  h.stage = 0;
  h.contributor = worker;
  h.status = messages::RoundStatus::contribution;
  h.tensor_names = {"w"};
  return messages::make_round_frame(h, {std::move(delta)});
}

}  // namespace swarmrt::testing
