// What bf16 buys on this CPU, measured where a transformer spends its time: the GEMMs of a
// linear layer's forward and backward ([tokens, d] x [d, 4d] and the two products of its
// backward), in float32 and in bfloat16, through the same LibTorch the trainer uses. Shapes are
// those of the presets (d = 128 tiny, 640 llama-small, 768 gpt2-small) at 2048 tokens.
// Prints a table and one JSON line: {"rows": [{"d", "fp32_gflops", "bf16_gflops", ...}]}.
// Usage: bench_gemm_dtype [THREADS] [REPS]
#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace {

// GFLOP/s of forward + backward of x[T, d] @ w[d, 4d] in `dtype`: three GEMMs of 2*T*d*4d.
double gflops(int64_t d, at::ScalarType dtype, int reps) {
  const int64_t T = 2048;
  auto x = at::randn({T, d}).to(dtype), w = at::randn({d, 4 * d}).to(dtype);
  auto g = at::randn({T, 4 * d}).to(dtype);
  auto step = [&] {
    auto y = at::mm(x, w);       // forward
    auto dx = at::mm(g, w.t());  // input gradient
    auto dw = at::mm(x.t(), g);  // weight gradient
    return y.sum().item<double>() + dx.sum().item<double>() + dw.sum().item<double>();
  };
  step();  // warm up
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < reps; ++i) step();
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return 3.0 * 2.0 * double(T) * double(d) * double(4 * d) * reps / s / 1e9;
}

}  // namespace

int main(int argc, char** argv) {
  const int threads = argc > 1 ? std::atoi(argv[1]) : 1;
  const int reps = argc > 2 ? std::atoi(argv[2]) : 5;
  at::set_num_threads(threads);
  std::printf("%6s %14s %14s %10s\n", "d", "fp32 GFLOP/s", "bf16 GFLOP/s", "bf16/fp32");
  std::string json = "{\"threads\": " + std::to_string(threads) + ", \"rows\": [";
  for (int64_t d : {128, 640, 768}) {
    const double f = gflops(d, at::kFloat, reps), b = gflops(d, at::kBFloat16, reps);
    std::printf("%6lld %14.2f %14.2f %10.3f\n", static_cast<long long>(d), f, b, b / f);
    char row[160];
    std::snprintf(row, sizeof row, "%s{\"d\": %lld, \"fp32_gflops\": %.3f, \"bf16_gflops\": %.3f}",
                  d == 128 ? "" : ", ", static_cast<long long>(d), f, b);
    json += row;
  }
  std::printf("%s]}\n", json.c_str());
}
