// All-reduce of float32 tensors among R members on 127.0.0.1: swarmrt's TCP communicator
// (transport/tcp_comm.cpp: the credential handshake, then a gather to rank 0 and a broadcast)
// against Gloo's ring all-reduce over its TCP transport (Debian's libgloo), the collective
// library PyTorch and torchft use on CPU. One thread per member, both in the same run.
// Usage: bench_allreduce MIB RANKS REPEATS  -> one JSON line per library: median seconds.
#include <gloo/allreduce_ring.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/hash_store.h>
#include <gloo/transport/tcp/device.h>

#include <ATen/ATen.h>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "transport/comm.hpp"

namespace {

using Clock = std::chrono::steady_clock;

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Runs `body(rank)` on every member at once, `repeats` + 1 times (the first warms up); the
// median of the slowest member's seconds per repeat.
template <class F>
double timed(int ranks, int repeats, F body) {
  std::vector<double> per_repeat;
  for (int r = 0; r <= repeats; ++r) {
    std::vector<double> seconds(static_cast<size_t>(ranks));
    std::vector<std::thread> threads;
    for (int k = 0; k < ranks; ++k)
      threads.emplace_back([&, k] {
        const auto start = Clock::now();
        body(k);
        seconds[static_cast<size_t>(k)] =
            std::chrono::duration<double>(Clock::now() - start).count();
      });
    for (auto& t : threads) t.join();
    if (r > 0) per_repeat.push_back(*std::max_element(seconds.begin(), seconds.end()));
  }
  return median(per_repeat);
}

double swarmrt_tcp(int64_t numel, int ranks, int repeats) {
  swarmrt::transport::CommOptions o;
  o.timeout_s = 120;
  auto [root, id] = swarmrt::transport::create_comm("tcp", ranks, o);
  std::vector<std::unique_ptr<swarmrt::transport::Comm>> comms;
  comms.push_back(std::move(root));
  for (int k = 1; k < ranks; ++k)
    comms.push_back(swarmrt::transport::join_comm("tcp", id, ranks, k, o));
  std::vector<at::Tensor> x;
  for (int k = 0; k < ranks; ++k) x.push_back(at::full({numel}, 1.0f));
  const double s = timed(ranks, repeats, [&](int k) { comms[k]->all_reduce_sum(x[k]); });
  if (x[0][0].item<float>() <= 1.0f) std::fprintf(stderr, "swarmrt all-reduce did not sum\n");
  return s;
}

double gloo_ring(int64_t numel, int ranks, int repeats) {
  gloo::transport::tcp::attr attr;
  attr.hostname = "127.0.0.1";
  auto device = gloo::transport::tcp::CreateDevice(attr);
  gloo::rendezvous::HashStore store;
  std::vector<std::shared_ptr<gloo::rendezvous::Context>> contexts(static_cast<size_t>(ranks));
  {
    std::vector<std::thread> threads;
    for (int k = 0; k < ranks; ++k)
      threads.emplace_back([&, k] {
        auto c = std::make_shared<gloo::rendezvous::Context>(k, ranks);
        c->connectFullMesh(store, device);
        contexts[static_cast<size_t>(k)] = c;
      });
    for (auto& t : threads) t.join();
  }
  std::vector<std::vector<float>> x(static_cast<size_t>(ranks),
                                    std::vector<float>(static_cast<size_t>(numel), 1.0f));
  std::vector<std::unique_ptr<gloo::AllreduceRing<float>>> ops;
  for (int k = 0; k < ranks; ++k)
    ops.push_back(std::make_unique<gloo::AllreduceRing<float>>(
        contexts[static_cast<size_t>(k)], std::vector<float*>{x[static_cast<size_t>(k)].data()},
        static_cast<int>(numel)));
  const double s = timed(ranks, repeats, [&](int k) { ops[static_cast<size_t>(k)]->run(); });
  if (x[0][0] <= 1.0f) std::fprintf(stderr, "gloo all-reduce did not sum\n");
  return s;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: %s MIB RANKS REPEATS\n", argv[0]);
    return 2;
  }
  const int64_t mib = std::stoll(argv[1]);
  const int ranks = std::stoi(argv[2]), repeats = std::stoi(argv[3]);
  const int64_t numel = mib * (1 << 20) / 4;
  const double ours = swarmrt_tcp(numel, ranks, repeats);
  const double gloo = gloo_ring(numel, ranks, repeats);
  for (auto [name, s] : {std::pair<const char*, double>{"swarmrt-tcp", ours}, {"gloo-ring", gloo}})
    std::printf("{\"library\":\"%s\",\"mib\":%lld,\"ranks\":%d,\"seconds\":%.6f}\n", name,
                static_cast<long long>(mib), ranks, s);
  return 0;
}
