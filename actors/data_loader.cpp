#include "actors/data_loader.hpp"

namespace swarmrt::actors {
using namespace swarmrt::atoms;

caf::behavior data_loader(caf::stateful_actor<loader_state>* self, LoaderSetup setup) {
  auto& s = self->state;
  s.corpus = setup.corpus;
  s.windows = std::make_unique<model::Windows>(&s.corpus->train(), setup.block_size);
  s.loader =
      std::make_unique<model::ShardLoader>(*s.windows, setup.shard, setup.shards, setup.seed);
  s.micro_batch = setup.micro_batch;
  return {
      [=](batch_atom, uint64_t, uint32_t) {
        auto b = self->state.loader->next(self->state.micro_batch);
        return messages::TensorList{{"inputs", "targets"}, {b.inputs, b.targets}, {}};
      },
  };
}

}  // namespace swarmrt::actors
