// Named tensors (model/) as a message element (messages/) and back.
#pragma once

#include "messages/types.hpp"
#include "model/checkpoint.hpp"

namespace swarmrt::actors {

// Shares the tensors; `clone` copies them, for a receiver that must not alias the sender's.
// Lists hold host memory: a CUDA worker's tensors are copied to the CPU (a copy already).
inline messages::TensorList to_list(const model::NamedTensors& named, bool clone = false) {
  messages::TensorList out;
  for (const auto& [name, t] : named) {
    out.names.push_back(name);
    out.tensors.push_back(t.is_cuda() ? t.to(at::kCPU) : clone ? t.clone() : t);
  }
  return out;
}

inline model::NamedTensors to_named(const messages::TensorList& list) {
  model::NamedTensors out;
  for (size_t i = 0; i < list.tensors.size() && i < list.names.size(); ++i)
    out.emplace_back(list.names[i], list.tensors[i]);
  return out;
}

}  // namespace swarmrt::actors
