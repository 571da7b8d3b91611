#include "actors/loader/data_loader.hpp"

namespace swarmrt::actors {
using namespace swarmrt::atoms;

namespace {

// Where micro-batch `mb` of `step` starts in this loader's stream. Loader k serves the
// micro-batches with mb % shards == k, in order, so the position is a function of (step, mb):
// a restarted loader, a re-requested micro-batch and a resumed run all read the same samples
// an uninterrupted run reads.
model::LoaderPosition position_of(const loader_state& s, uint64_t step, uint32_t mb) {
  const int64_t per_step =
      (s.micro_batches - s.shard + s.shards - 1) / s.shards;  // mbs of one step served here
  const int64_t served = (static_cast<int64_t>(step) - 1) * per_step +
                         static_cast<int64_t>(mb) / s.shards;  // batches before this one
  const int64_t samples = served * s.micro_batch;
  const int64_t size = s.loader->shard_size();
  return {samples / size, samples % size};
}

}  // namespace

loader_actor::behavior_type data_loader(loader_actor::stateful_pointer<loader_state> self,
                                        LoaderSetup setup) {
  auto& s = self->state;
  s.corpus = setup.corpus;
  s.windows = std::make_unique<model::Windows>(s.corpus->train(), setup.block_size);
  s.loader =
      std::make_unique<model::ShardLoader>(*s.windows, setup.shard, setup.shards, setup.seed);
  s.micro_batch = setup.micro_batch;
  s.micro_batches = setup.micro_batches;
  s.shard = setup.shard;
  s.shards = setup.shards;
  return {
      [=](batch_atom, uint64_t step, uint32_t mb) -> messages::TensorList {
        auto& s = self->state;
        const auto want = position_of(s, step, mb);
        const auto at = s.loader->position();
        // (epoch e, cursor size) and (e + 1, 0) are the same place in the stream.
        const bool same =
            (at.epoch == want.epoch && at.cursor == want.cursor) ||
            (at.cursor == s.loader->shard_size() && at.epoch + 1 == want.epoch && want.cursor == 0);
        if (!same) s.loader->seek(want);
        auto b = s.loader->next(s.micro_batch);
        return messages::TensorList{{"inputs", "targets"}, {b.inputs, b.targets}, {}};
      },
  };
}

}  // namespace swarmrt::actors
