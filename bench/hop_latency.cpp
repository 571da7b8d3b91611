// Per-hop cost of the runtime, as Google Benchmark cases:
//  - HeaderEncodeDecode: a micro-batch header with two tensors' metadata, encoded to a
//    Cap'n Proto frame and decoded and checked against the tensors.
//  - ActorHop: the same, plus one CAF message hop to an actor on the runtime's scheduler (as
//    configured by the runtime): the clock starts before encoding at the sender and stops
//    after decoding at the receiver.
//  - HopReceive/ENCODING: what a stage worker does with an encoded hop that arrives from
//    another process: the wire checked whole (model::check_hop with its values), then decoded
//    (model::decode_hop), for gpt2-small's hidden state of a micro-batch of 4 (4 x 1024 x 768).
// Each reports p50_us and p99_us over its iterations.
#include <ATen/ATen.h>
#include <benchmark/benchmark.h>
#include <algorithm>
#include <caf/all.hpp>
#include <chrono>

#include "actors/runtime/runtime.hpp"
#include "messages/frame.hpp"
#include "model/hop_codec.hpp"

using namespace swarmrt;
using Clock = std::chrono::steady_clock;

namespace {
messages::MicroBatchHeader header() {
  messages::MicroBatchHeader h;
  h.run_id = 1;
  h.step = 100;
  h.micro_batch = 3;
  h.stage = 1;
  h.route = {0, 1000};
  h.samples = 16;
  return h;
}

void report(benchmark::State& state, std::vector<double>& us) {
  std::sort(us.begin(), us.end());
  if (us.empty()) return;
  state.counters["p50_us"] = us[us.size() / 2];
  state.counters["p99_us"] = us[std::min(us.size() - 1, us.size() * 99 / 100)];
}

void HeaderEncodeDecode(benchmark::State& state) {
  std::vector<at::Tensor> tensors = {at::zeros({16, 128, 128}), at::zeros({16, 128}, at::kLong)};
  std::vector<double> us;
  for (auto _ : state) {
    const auto t0 = Clock::now();
    auto frame = messages::make_frame(header(), tensors);
    auto h = messages::open_frame(frame);
    benchmark::DoNotOptimize(h);
    us.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count());
  }
  report(state, us);
}
BENCHMARK(HeaderEncodeDecode);

using hop_atom = caf::atom_constant<caf::atom("hop")>;

caf::behavior receiver(caf::event_based_actor*) {
  return {
      [](hop_atom, int64_t t0_ns, const messages::Frame& frame) {
        auto h = messages::open_frame(frame);
        benchmark::DoNotOptimize(h);
        return Clock::now().time_since_epoch().count() - t0_ns;
      },
  };
}

void ActorHop(benchmark::State& state) {
  caf::actor_system_config cfg;
  actors::configure_actor_system(cfg);  // exactly the runtime's scheduler settings
  caf::actor_system sys{cfg};
  auto actor = sys.spawn(receiver);
  caf::scoped_actor self{sys};
  std::vector<at::Tensor> tensors = {at::zeros({16, 128, 128}), at::zeros({16, 128}, at::kLong)};
  std::vector<double> us;
  for (auto _ : state) {
    const int64_t t0 = Clock::now().time_since_epoch().count();
    self->request(actor, caf::infinite, hop_atom::value, t0,
                  messages::make_frame(header(), tensors))
        .receive([&](int64_t ns) { us.push_back(static_cast<double>(ns) / 1000.0); },
                 [&](const caf::error&) { state.SkipWithError("hop failed"); });
  }
  report(state, us);
  self->send_exit(actor, caf::exit_reason::user_shutdown);
}
BENCHMARK(ActorHop)->UseRealTime();

void HopReceive(benchmark::State& state) {
  const auto e = static_cast<config::HopEncoding>(state.range(0));
  const int64_t block = 128;
  const auto d = model::HopDirection::forward;
  at::manual_seed(0);
  const auto x = at::randn({4, 1024, 768});
  const auto wire = model::encode_hop(x, e, block, d, 0);
  std::vector<double> us;
  for (auto _ : state) {
    const auto t0 = Clock::now();
    model::check_hop(wire, e, block, d, x.sizes(), at::kFloat, /*values=*/true);
    auto back = model::decode_hop(wire, e, block, d, x.sizes(), at::kFloat, /*check_values=*/false);
    benchmark::DoNotOptimize(back);
    us.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count());
  }
  state.SetLabel(config::name_of(e));
  report(state, us);
}
BENCHMARK(HopReceive)
    ->Arg(static_cast<int>(config::HopEncoding::int8))
    ->Arg(static_cast<int>(config::HopEncoding::int4))
    ->Arg(static_cast<int>(config::HopEncoding::entropy))
    ->Unit(benchmark::kMillisecond);
}  // namespace

BENCHMARK_MAIN();
