// The GPU paths against the CPU's, on a CUDA device (tests/gpu/CMakeLists.txt): attention,
// the fused AdamW step, the one-read gradient norm and overflow check, the hop codecs on the
// device, and the pinned staging of hops. Tolerances are stated per test.
#include <gtest/gtest.h>
#include <torch/cuda.h>
#include <chrono>
#include <thread>

#include "model/checkpoint.hpp"
#include "model/hop_codec.hpp"
#include "model/optim.hpp"
#include "model/precision.hpp"
#include "model/quantize.hpp"
#include "model/stage_model.hpp"
#include "transport/staging.hpp"

using namespace swarmrt::model;
using namespace swarmrt::config;

namespace {

const at::Device kCuda("cuda:0");

bool no_cuda() {
  return !torch::cuda::is_available();
}

ModelConfig small() {
  ModelConfig m;
  m.n_layer = 2, m.n_head = 4, m.n_embd = 64, m.block_size = 64;
  return m;
}

void seeded_grads(torch::nn::Module& m, uint64_t seed) {
  torch::manual_seed(seed);
  for (auto& p : m.parameters()) p.mutable_grad() = (torch::randn(p.sizes()) * 0.1).to(p.device());
}

}  // namespace

// bf16 attention on the GPU (flash or memory-efficient kernels) against the float32 math on
// the CPU: within bf16's rounding (2e-2), values and gradients.
TEST(GpuAttention, ScaledDotProductAttentionComputesTheMath) {
  if (no_cuda()) GTEST_SKIP() << "no CUDA device";
  EXPECT_STREQ(attention_kernel(), "scaled_dot_product_attention");
  torch::manual_seed(1);
  auto q = torch::randn({2, 4, 128, 64}), k = torch::randn({2, 4, 128, 64});
  auto v = torch::randn({2, 4, 128, 64});
  auto on_gpu = [&](const at::Tensor& t) {
    return t.to(kCuda, at::kBFloat16).detach().requires_grad_(true);
  };
  auto gq = on_gpu(q), gk = on_gpu(k), gv = on_gpu(v);
  auto y = causal_attention(gq, gk, gv, future_mask(128));
  const auto future = torch::ones({128, 128}, torch::kBool).triu(1);
  auto cq = q.requires_grad_(true), ck = k.requires_grad_(true), cv = v.requires_grad_(true);
  auto ref = causal_attention_math(cq, ck, cv, future);
  EXPECT_TRUE(torch::allclose(y.to(at::kCPU, at::kFloat), ref, 2e-2, 2e-2));
  auto seed = torch::randn_like(ref);
  y.backward(seed.to(kCuda, at::kBFloat16));
  ref.backward(seed);
  EXPECT_TRUE(torch::allclose(gq.grad().to(at::kCPU, at::kFloat), cq.grad(), 5e-2, 5e-2));
  EXPECT_TRUE(torch::allclose(gv.grad().to(at::kCPU, at::kFloat), cv.grad(), 5e-2, 5e-2));
}

// The fused AdamW step on the GPU is torch::optim::AdamW's update within float32 rounding
// (1e-5 relative) over five steps, with the same state (step count, moments) kept.
TEST(GpuOptim, FusedAdamwIsAdamW) {
  if (no_cuda()) GTEST_SKIP() << "no CUDA device";
  EXPECT_TRUE(adamw_is_fused(kCuda));
  auto reference = make_stage_model(small(), {}, 3);
  auto fused = make_stage_model(small(), {}, 3);
  reference->to(kCuda);
  fused->to(kCuda);
  TrainConfig t;
  t.lr = 1e-2;
  auto ref_opt = make_adamw(*reference, t);
  auto opt = make_adamw(*fused, t);
  for (uint64_t step = 1; step <= 5; ++step) {
    seeded_grads(*reference, step);
    seeded_grads(*fused, step);
    ref_opt->step();
    adamw_step(*opt);
  }
  auto ref = reference->named_parameters();
  for (const auto& p : fused->named_parameters())
    EXPECT_TRUE(torch::allclose(p.value(), ref[p.key()], 1e-5, 1e-6)) << p.key();
  // Its state is AdamW's own: saved and read back by a CPU optimizer, the same moments.
  EXPECT_EQ(optimizer_bytes(*opt).size(), optimizer_bytes(*ref_opt).size());
}

// One read for the norm and one for the overflow check; the same values as on the CPU.
TEST(GpuOptim, GradNormAndOverflowCheckReadOnce) {
  if (no_cuda()) GTEST_SKIP() << "no CUDA device";
  auto cpu = make_stage_model(small(), {}, 5);
  auto gpu = make_stage_model(small(), {}, 5);
  gpu->to(kCuda);
  seeded_grads(*cpu, 7);
  seeded_grads(*gpu, 7);
  const double a = grad_sqnorm(cpu->parameters()), b = grad_sqnorm(gpu->parameters());
  EXPECT_NEAR(a, b, 1e-5 * a);
  EXPECT_TRUE(unscale_grads(gpu->parameters(), 4.0));
  EXPECT_NEAR(grad_sqnorm(gpu->parameters()), a / 16, 1e-5 * a);
  gpu->parameters()[3].mutable_grad()[0].fill_(std::numeric_limits<float>::infinity());
  EXPECT_FALSE(unscale_grads(gpu->parameters(), 1.0));
}

// Hop codecs on the GPU write the wire the CPU writes: the same scales, codes at most one
// step apart (division and rounding are IEEE on both; the rotation's sums may round apart),
// and each side decodes the other's wire to the same values (1e-5).
TEST(GpuHopCodec, TheDeviceWritesTheHostsWire) {
  if (no_cuda()) GTEST_SKIP() << "no CUDA device";
  torch::manual_seed(3);
  auto x = torch::randn({4, 256, 64});
  x.view({-1}).slice(0, 0, x.numel(), 512).mul_(40);
  const int64_t n = x.numel(), nb = n / 128;
  for (auto e : {HopEncoding::int8, HopEncoding::int4, HopEncoding::int5_3}) {
    const int bits = e == HopEncoding::int8 ? 8 : e == HopEncoding::int4 ? 4 : 5;
    auto device =
        encode_hop(x.to(kCuda, at::kBFloat16).to(at::kFloat), e, 128, HopDirection::forward, 0);
    auto host_bf = encode_hop(x.to(at::kBFloat16).to(at::kFloat), e, 128, HopDirection::forward, 0);
    ASSERT_TRUE(device.is_cuda()) << name_of(e);
    auto d = device.to(at::kCPU);
    EXPECT_TRUE(torch::equal(d.narrow(0, 0, 4 * nb), host_bf.narrow(0, 0, 4 * nb))) << name_of(e);
    auto codes = unpack_codes(d.narrow(0, 4 * nb, d.numel() - 4 * nb), bits, n);
    auto host_codes = unpack_codes(host_bf.narrow(0, 4 * nb, host_bf.numel() - 4 * nb), bits, n);
    EXPECT_LE((codes - host_codes).abs().max().item<int64_t>(), 1) << name_of(e);
    auto read_device =
        decode_hop(device, e, 128, HopDirection::forward, x.sizes(), at::kFloat, false);
    ASSERT_TRUE(read_device.is_cuda());
    auto read_host = decode_hop(d, e, 128, HopDirection::forward, x.sizes(), at::kFloat);
    EXPECT_TRUE(torch::allclose(read_device.to(at::kCPU), read_host, 1e-5, 1e-5)) << name_of(e);
  }
  // An entropy wire (host memory, as it arrives) decoded onto the device: only its codes and
  // scales go there, and the values are the host's decoding of the same wire.
  auto entropy = encode_hop(x, HopEncoding::entropy, 128, HopDirection::forward, 0);
  ASSERT_TRUE(entropy.is_cpu());
  auto onto = decode_hop(entropy, HopEncoding::entropy, 128, HopDirection::forward, x.sizes(),
                         at::kFloat, true, kCuda);
  ASSERT_TRUE(onto.is_cuda());
  EXPECT_TRUE(torch::allclose(
      onto.to(at::kCPU),
      decode_hop(entropy, HopEncoding::entropy, 128, HopDirection::forward, x.sizes(), at::kFloat),
      1e-5, 1e-5));
  // Stochastic rounding on the device: the same seed, the same wire; another, another.
  auto g = x.to(kCuda);
  auto w1 = encode_hop(g, HopEncoding::int4, 128, HopDirection::backward, 11);
  EXPECT_TRUE(torch::equal(w1, encode_hop(g, HopEncoding::int4, 128, HopDirection::backward, 11)));
  EXPECT_FALSE(torch::equal(w1, encode_hop(g, HopEncoding::int4, 128, HopDirection::backward, 12)));
  // A checked device wire is read back and refused when a scale is NaN.
  auto nan = g.clone();
  nan[0][0][0] = NAN;
  EXPECT_THROW(decode_hop(encode_hop(nan, HopEncoding::int8, 128, HopDirection::forward, 0),
                          HopEncoding::int8, 128, HopDirection::forward, x.sizes(), at::kFloat),
               std::invalid_argument);
}

// Hops to and from host memory: staged through pinned memory on a side stream, the bytes
// arrive whole once the fence is ready; a host tensor reaches the device unchanged.
TEST(GpuStaging, HostAndDeviceRoundTrip) {
  if (no_cuda()) GTEST_SKIP() << "no CUDA device";
  torch::manual_seed(4);
  auto x = torch::randn({8, 1024, 768}).to(kCuda, at::kBFloat16);
  auto y = x * 2;  // queued behind x: the staging must wait for it
  auto staged = swarmrt::transport::stage_to_host({y, torch::ones({3})});
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (!staged.done.ready() && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::microseconds(50));
  ASSERT_TRUE(staged.done.ready());
  ASSERT_EQ(staged.host.size(), 2u);
  EXPECT_TRUE(staged.host[0].is_pinned());
  EXPECT_TRUE(torch::equal(staged.host[0], (x * 2).to(at::kCPU)));
  EXPECT_TRUE(torch::equal(staged.host[1], torch::ones({3})));
  auto back = swarmrt::transport::to_device(staged.host[0], kCuda);
  EXPECT_TRUE(back.is_cuda());
  EXPECT_TRUE(torch::equal(back, y));
  EXPECT_TRUE(swarmrt::transport::DeviceFence::after_queued(at::kCPU).ready());
}

// A small GPT trains on the GPU in bf16 with the fused step: the loss falls over 30 steps on a
// repeated batch.
TEST(GpuTraining, BlocksLearnWithTheFusedStep) {
  if (no_cuda()) GTEST_SKIP() << "no CUDA device";
  auto model = make_stage_model(small(), {}, 1);
  model->to(kCuda);
  TrainConfig t;
  t.lr = 3e-3;
  auto opt = make_adamw(*model, t);
  torch::manual_seed(2);
  auto ids = torch::randint(0, 256, {4, 64}, torch::kLong).to(kCuda);
  double first = 0, last = 0;
  for (int step = 0; step < 30; ++step) {
    torch::Tensor loss;
    {
      Autocast autocast(Precision::bf16, kCuda);
      loss = lm_loss(model->forward(ids), ids);
    }
    loss.backward();
    clip_grad_norm(model->parameters(), 1.0);
    adamw_step(*opt);
    zero_grads(*opt);
    (step == 0 ? first : last) = loss.item<double>();
  }
  EXPECT_LT(last, first * 0.8) << "first " << first << " last " << last;
}
