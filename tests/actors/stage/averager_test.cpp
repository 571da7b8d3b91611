// A real grad averager fed the gradients of 4 workers, one of which lies (sign-flipped x10):
// under the mean the stage's gradient follows the liar; under swarm.grad_aggregate =
// centered_clip or trimmed_mean it stays by the honest workers' mean, whatever order the
// gradients come in, and a worker that backpropagated nothing is left out.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include "../actor_test_util.hpp"
#include "actors/stage/grad_averager.hpp"

using namespace swarmrt;
using namespace swarmrt::atoms;

namespace {

constexpr int kWorkers = 4;

std::shared_ptr<actors::SwarmContext> dp_context(config::Aggregate rule) {
  auto ctx = std::make_shared<actors::SwarmContext>();
  ctx->config.swarm.mode = config::Mode::dp;
  ctx->config.swarm.workers_per_stage = kWorkers;
  ctx->config.train.micro_batch = 4;
  ctx->config.train.micro_batches = kWorkers;  // a micro-batch a worker: 16 samples a step
  ctx->config.swarm.grad_aggregate = rule;
  ctx->config.diloco.clip_drop = 3.0;
  return ctx;
}

// The true mean gradient every honest worker estimates, and worker i's estimate of it.
at::Tensor truth() {
  return at::linspace(-1.0, 1.0, 64).reshape({8, 8});
}
at::Tensor estimate(int i) {
  auto gen = at::detail::createCPUGenerator(100 + i);
  return truth() + 0.01 * at::randn({8, 8}, gen, at::kFloat);
}

// The stage's gradient the averager sends back for step 1, with worker `samples[i]` samples
// each, worker 0 lying when `liar`, the gradients sent in `order`.
at::Tensor stage_gradient(config::Aggregate rule, bool liar, const std::vector<int>& order,
                          const std::vector<int64_t>& samples) {
  swarmrt::testing::TestSystem ts;
  auto ctx = dp_context(rule);
  caf::scoped_actor workers{*ts.sys};
  auto averager = ts.sys->spawn(actors::grad_averager, ctx, 0u, caf::actor{});
  messages::Membership m;
  m.stages.resize(1);
  for (uint32_t i = 0; i < kWorkers; ++i)
    m.stages[0].push_back({i, 0, caf::actor_cast<caf::actor>(workers), {}});
  workers->send(averager, members_atom::value, m);
  const double want = static_cast<double>(ctx->step_samples());
  for (int i : order) {
    // Each worker sends its gradient scaled by its share of the step's samples.
    auto g = estimate(i) * (static_cast<double>(samples[i]) / want);
    if (liar && i == 0) g = g * -10.0;
    messages::GradsReport r{1, static_cast<uint32_t>(i), samples[i], {{}, {g}, {}}};
    workers->send(averager, grads_atom::value, r);
  }
  at::Tensor out;
  for (int k = 0; k < kWorkers; ++k)
    workers->receive(
        [&](grad_sum_atom, uint64_t step, const messages::TensorList& sum) {
          EXPECT_EQ(step, 1u);
          ASSERT_EQ(sum.tensors.size(), 1u);
          out = sum.tensors[0].clone();
        },
        caf::after(std::chrono::seconds(10)) >> [&] { FAIL() << "no stage gradient"; });
  workers->send_exit(averager, caf::exit_reason::user_shutdown);
  return out;
}

// How far `g` is from the honest workers' mean, relative to its size.
double off(const at::Tensor& g, const at::Tensor& honest) {
  return (g - honest).norm().item<double>() / honest.norm().item<double>();
}

const std::vector<int> kInOrder{0, 1, 2, 3};
const std::vector<int64_t> kEven{4, 4, 4, 4};

}  // namespace

TEST(GradAverager, TheMeanFollowsALiar) {
  const auto honest = stage_gradient(config::Aggregate::mean, false, kInOrder, kEven);
  EXPECT_LT(off(honest, truth()), 0.02);
  const auto attacked = stage_gradient(config::Aggregate::mean, true, kInOrder, kEven);
  // (3 honest - 10 flipped) / 4: the stage climbs the loss.
  EXPECT_LT((attacked * truth()).sum().item<double>(), 0.0);
  EXPECT_GT(off(attacked, honest), 2.0);
}

TEST(GradAverager, RobustAggregatesStayByTheHonestWorkers) {
  // The honest workers' mean: workers 1..3, each its own mean gradient.
  const auto honest = (estimate(1) + estimate(2) + estimate(3)) / 3.0;
  for (auto rule : {config::Aggregate::centered_clip, config::Aggregate::trimmed_mean}) {
    SCOPED_TRACE(config::name_of(rule));
    const auto g = stage_gradient(rule, true, kInOrder, kEven);
    EXPECT_LT(off(g, honest), 0.02);
    EXPECT_GT((g * truth()).sum().item<double>(), 0.0);
    // Without the liar it is the honest mean of all four, as the mean's.
    const auto all = stage_gradient(rule, false, kInOrder, kEven);
    EXPECT_LT(off(all, stage_gradient(config::Aggregate::mean, false, kInOrder, kEven)), 0.02);
  }
}

TEST(GradAverager, RobustAggregateDoesNotDependOnArrival) {
  const auto a = stage_gradient(config::Aggregate::centered_clip, true, kInOrder, kEven);
  const auto b = stage_gradient(config::Aggregate::centered_clip, true, {3, 1, 0, 2}, kEven);
  EXPECT_TRUE(at::equal(a, b));
}

TEST(GradAverager, RobustAggregateLeavesOutAWorkerWithoutSamples) {
  // Worker 3 took no micro-batch (its gradient is zeros); the others' are their means.
  const auto g = stage_gradient(config::Aggregate::trimmed_mean, false, kInOrder, {6, 5, 5, 0});
  const auto honest = (estimate(0) + estimate(1) + estimate(2)) / 3.0;
  EXPECT_LT(off(g, honest), 0.02);
}
