// diloco-swarm 2x2 on the Brown corpus against the single-process trainer on the same tokens
// (labelled slow: two 300-step trainings of the tiny model).
#include <gtest/gtest.h>

#include "../../model/test_util.hpp"
#include "actors/runtime/runtime.hpp"
#include "model/trainer.hpp"

using namespace swarmrt;

TEST(Quality, DilocoSwarmWithinFivePercentOfSingle) {
  auto corpus = model::Corpus::load_text(swarmrt::testing::test_data_path(), 0.05);
  config::RunConfig c;  // the tiny preset
  c.train.steps = 300;
  c.train.micro_batch = 2;
  c.train.micro_batches = 4;
  c.train.lr = 2e-3;
  c.train.min_lr = 2e-4;
  c.train.schedule = config::Schedule::cosine;
  c.train.eval_every = 0;
  c.train.eval_batches = 16;
  c.diloco.inner_steps = 25;

  model::TrainOptions o;
  o.progress = false;
  const double single = model::train_single(c, corpus, o).val_loss;

  c.swarm.mode = config::Mode::diloco_swarm;
  c.swarm.stages = 2;
  c.swarm.workers_per_stage = 2;
  actors::RuntimeOptions ro;
  ro.progress = false;
  const double swarm = actors::run_in_process(c, corpus, ro).report.val_loss;
  std::printf("val loss after 300 steps: single %.4f, diloco-swarm 2x2 %.4f (%+.2f%%)\n", single,
              swarm, 100 * (swarm - single) / single);
  EXPECT_LT(swarm, single * 1.05);
}
