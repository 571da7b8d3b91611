// A data loader: serves micro-batches of token windows from its shard of the training text.
#pragma once

#include <caf/all.hpp>
#include <memory>

#include "messages/atoms.hpp"
#include "messages/types.hpp"
#include "model/data.hpp"

namespace swarmrt::actors {

struct LoaderSetup {
  std::shared_ptr<const model::Corpus> corpus;
  int64_t shard = 0;
  int64_t shards = 1;
  int64_t block_size = 128;
  int64_t micro_batch = 16;
  uint64_t seed = 0;
  int64_t micro_batches = 1;  // per step
};

struct loader_state {
  std::shared_ptr<const model::Corpus> corpus;
  std::unique_ptr<model::Windows> windows;
  std::unique_ptr<model::ShardLoader> loader;
  int64_t micro_batch = 0;
  int64_t micro_batches = 1;
  int64_t shard = 0, shards = 1;
  static inline const char* name = "data_loader";
};

// A loader's whole interface, checked by the compiler where it is asked: (batch_atom, step,
// micro_batch) -> TensorList {inputs, targets}; steps count from 1. Loaders live on the
// coordinator and only its tracker asks them, so the typed handle never crosses a process.
using loader_actor = caf::typed_actor<
    caf::replies_to<atoms::batch_atom, uint64_t, uint32_t>::with<messages::TensorList>>;

loader_actor::behavior_type data_loader(loader_actor::stateful_pointer<loader_state> self,
                                        LoaderSetup setup);

}  // namespace swarmrt::actors
