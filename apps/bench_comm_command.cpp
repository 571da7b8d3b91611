// swarmrt bench comm --config FILE [--set section.key=value ...] [--caps 0,1000,100,10]
//                    [--out FILE.json] [--markdown FILE.md]
//
// What each way of synchronizing a stage's replicas costs, on the same model and data:
//   swarm      gradients averaged every step (mode swarm)
//   diloco     DiLoCo: pseudo-gradients every diloco.inner_steps, one round for the stage,
//              float32 (diloco.fragments = 1, overlap_steps = 0, quantize = none)
//   streaming  Streaming DiLoCo as the config sets it (fragments, overlap, quantization)
// Each mode runs twice over. First the whole run in one process (`swarmrt train`): the bytes
// every actor sent, by kind, and the final validation loss. Sync bytes are those of gradients,
// pseudo-gradients and parameters; per worker and step they are the run's total over workers
// and steps, and the peak is the most that one step's synchronization moves, both ways: a
// round's contributions go in its step and the group's answers land up to overlap_steps (τ)
// steps later, so the peak sums τ + 1 steps' bytes from each step where a round starts for the
// streaming mode (one step for the others, whose answers come within it); the last step, where
// Streaming DiLoCo consolidates every fragment once, is left out. Then the tokens/s of
// `swarmrt launch --local W`, one node per worker, so every worker's sync crosses a process
// link, with chaos.link_mbit_s capping every link at each of --caps (0: no cap): H + 2 steps
// for the DiLoCo modes (so a round of every fragment is in), 8 for swarm, tokens/s over the
// steps after the first two and before the last.
#include <spdlog/spdlog.h>
#include <unistd.h>
#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "apps/commands.hpp"
#include "apps/options.hpp"
#include "config/config.hpp"
#include "launch/process.hpp"

namespace swarmrt::apps {
namespace {

namespace fs = std::filesystem;

struct Mode {
  std::string name;
  std::vector<std::string> overrides;  // on top of the config and --set
  int64_t throughput_steps = 0;
  int64_t peak_span = 1;  // steps over which one step's rounds and their answers are counted
};

struct Args {
  std::string config, out = "bench/results/comm.json", markdown;
  std::vector<std::string> overrides;
  std::vector<double> caps = {0, 1000, 100, 10};
  std::string work;  // run directories; a temporary one when empty
};

nlohmann::json machine() {
  std::string cpu = "unknown";
  std::ifstream info("/proc/cpuinfo");
  for (std::string line; std::getline(info, line);)
    if (line.rfind("model name", 0) == 0) {
      cpu = line.substr(line.find(':') + 2);
      break;
    }
  const double mem_gib = static_cast<double>(sysconf(_SC_PHYS_PAGES)) *
                         static_cast<double>(sysconf(_SC_PAGE_SIZE)) / (1 << 30);
  char host[256] = {0};
  gethostname(host, sizeof(host) - 1);
  return {{"cpu", cpu},
          {"cores", std::thread::hardware_concurrency()},
          {"memory_gib", std::round(mem_gib * 10) / 10},
          {"host", host},
          {"gpu", "none used (CPU workers)"}};
}

// Runs `argv` to its end, its output appended to `log`; its exit status.
int run_child(const std::string& label, const std::vector<std::string>& argv, const fs::path& log) {
  launch::Child child(label, argv);
  std::ofstream out(log, std::ios::app);
  while (true) {
    for (const auto& line : child.read_lines()) out << line << "\n";
    if (auto status = child.poll_exit()) {
      for (const auto& line : child.read_lines()) out << line << "\n";
      return *status;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

std::vector<nlohmann::json> records(const fs::path& metrics, const std::string& event) {
  std::vector<nlohmann::json> out;
  std::ifstream in(metrics);
  for (std::string line; std::getline(in, line);) {
    auto j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (j.is_object() && j.value("event", "") == event) out.push_back(std::move(j));
  }
  return out;
}

double sync_bytes(const nlohmann::json& bytes) {
  return bytes.value("gradients", 0.0) + bytes.value("pseudo_gradients", 0.0) +
         bytes.value("parameters", 0.0);
}

// Bytes and loss of a whole run in one process. The peak is what one step's rounds move: from
// each step where contributions (gradients or pseudo-gradients) go out, the sync bytes of
// `span` steps, because an overlapped round's answers are counted in the step they land in,
// up to τ steps later. Counting single steps would halve a streaming round's figure when the
// answers land in the next step, where a blocking round's holds both ways; starting only where
// a round starts keeps one round's late answers out of the next round's window (rounds of a
// stage start at least τ + 1 steps apart: the config refuses τ ≥ H/P).
nlohmann::json quality(const fs::path& dir, int64_t workers, int64_t span) {
  const auto steps = records(dir / "metrics.jsonl", "step");
  const auto evals = records(dir / "metrics.jsonl", "eval");
  if (steps.empty() || evals.empty())
    throw std::runtime_error(dir.string() + "/metrics.jsonl holds no step or eval record");
  std::vector<double> total, sent;  // by the end of each step: sync bytes, contributions
  for (const auto& s : steps) {
    const auto& b = s.at("bytes");
    total.push_back(sync_bytes(b));
    sent.push_back(b.value("gradients", 0.0) + b.value("pseudo_gradients", 0.0));
  }
  double peak = 0;
  const size_t width = static_cast<size_t>(std::max<int64_t>(span, 1));
  // windows that end before the last step, where Streaming DiLoCo consolidates every fragment
  for (size_t start = 0; start + width < total.size(); ++start) {
    const double before = start > 0 ? total[start - 1] : 0.0;
    const double sent_before = start > 0 ? sent[start - 1] : 0.0;
    if (sent[start] > sent_before) peak = std::max(peak, total[start + width - 1] - before);
  }
  const double sum = total.back();
  const auto n = static_cast<double>(steps.size());
  return {{"steps", steps.size()},
          {"sync_bytes_total", sum},
          {"bytes", steps.back().at("bytes")},
          {"sync_bytes_per_worker_step", sum / (n * static_cast<double>(workers))},
          {"peak_sync_bytes_per_worker_step", peak / static_cast<double>(workers)},
          {"peak_span_steps", width},
          {"val_loss", evals.back().at("val_loss")}};
}

// Tokens/s of a run across processes, over its steps after the first two and before the last.
nlohmann::json throughput(const fs::path& dir) {
  const auto steps = records(dir / "metrics.jsonl", "step");
  if (steps.size() < 4) throw std::runtime_error(dir.string() + ": fewer than 4 steps recorded");
  double tokens = 0, seconds = 0, slowest = 0;
  for (size_t i = 2; i + 1 < steps.size(); ++i) {
    const double tps = steps[i].at("tokens_per_s").get<double>();
    const double step_tokens =
        steps[i].at("tokens").get<double>() - steps[i - 1].at("tokens").get<double>();
    tokens += step_tokens;
    seconds += step_tokens / tps;
    slowest = std::max(slowest, step_tokens / tps);
  }
  return {{"tokens_per_s", tokens / seconds}, {"slowest_step_s", slowest}};
}

void progress(size_t done, size_t total, const std::string& what) {
  const int width = 30;
  const int filled = static_cast<int>(width * done / std::max<size_t>(total, 1));
  std::fprintf(stderr, "\r[%s%s] %zu/%zu %-40s", std::string(filled, '#').c_str(),
               std::string(width - filled, '.').c_str(), done, total, what.c_str());
  if (done == total) std::fprintf(stderr, "\n");
  std::fflush(stderr);
}

std::string human(double bytes) {
  char buf[32];
  if (bytes >= 1e6)
    std::snprintf(buf, sizeof buf, "%.2f MB", bytes / 1e6);
  else if (bytes >= 1e3)
    std::snprintf(buf, sizeof buf, "%.1f kB", bytes / 1e3);
  else
    std::snprintf(buf, sizeof buf, "%.0f B", bytes);
  return buf;
}

std::string cap_name(double cap) {
  if (cap <= 0) return "uncapped";
  std::ostringstream os;
  os << cap << " Mbit/s";
  return os.str();
}

std::string markdown(const nlohmann::json& result, const std::vector<double>& caps) {
  std::ostringstream md;
  const auto& modes = result.at("modes");
  const auto& swarm = modes.at(0).at("quality");
  const auto& diloco = modes.at(1).at("quality");
  md << "| mode | sync bytes / worker / step | ÷ swarm's | peak for one step's sync | ÷ diloco's "
        "| val loss | vs swarm |";
  for (double c : caps) md << " tok/s " << cap_name(c) << " |";
  md << "\n|---|---|---|---|---|---|---|";
  for (size_t i = 0; i < caps.size(); ++i) md << "---|";
  md << "\n";
  char buf[64];
  for (const auto& m : modes) {
    const auto& q = m.at("quality");
    const double per = q.at("sync_bytes_per_worker_step").get<double>();
    const double peak = q.at("peak_sync_bytes_per_worker_step").get<double>();
    md << "| " << m.at("label").get<std::string>() << " | " << human(per) << " | ";
    std::snprintf(buf, sizeof buf, "%.0f×",
                  swarm.at("sync_bytes_per_worker_step").get<double>() / std::max(per, 1.0));
    md << buf << " | " << human(peak) << " | ";
    std::snprintf(buf, sizeof buf, "%.2f",
                  peak / std::max(diloco.at("peak_sync_bytes_per_worker_step").get<double>(), 1.0));
    md << buf << " | ";
    const double loss = q.at("val_loss").get<double>();
    std::snprintf(buf, sizeof buf, "%.4f | %+.1f%% |", loss,
                  100 * (loss / swarm.at("val_loss").get<double>() - 1));
    md << buf;
    const auto& tput = m.at("throughput");
    const double base = tput.at(0).at("tokens_per_s").get<double>();
    for (const auto& t : tput) {
      const double v = t.at("tokens_per_s").get<double>();
      std::snprintf(buf, sizeof buf, " %.0f (%.2f×) |", v, v / base);
      md << buf;
    }
    md << "\n";
  }
  return md.str();
}

int run_bench(const Args& args) {
  const auto loaded = load_config_or_say(args.config, args.overrides);
  if (!loaded) return 2;
  const config::RunConfig& config = *loaded;
  const auto& d = config.diloco;
  if (d.whole_rounds()) {
    spdlog::error(
        "{}: the streaming mode needs diloco.fragments > 1, overlap_steps > 0, a quantize "
        "encoding or compress = topk",
        args.config);
    return 2;
  }
  const int64_t workers = config.swarm.stages * config.swarm.workers_per_stage;
  if (workers < 2) {
    spdlog::error("{}: swarm.workers_per_stage must be at least 2 for a stage to sync",
                  args.config);
    return 2;
  }
  const std::string diloco_mode = config.swarm.stages == 1 ? "diloco" : "diloco-swarm";
  char label[160];
  std::snprintf(label, sizeof label, "Streaming DiLoCo, H = %lld, P = %lld, τ = %lld, %s%s",
                static_cast<long long>(d.inner_steps), static_cast<long long>(d.fragments),
                static_cast<long long>(d.overlap_steps), d.encoding().c_str(),
                d.eager ? ", eager" : "");
  std::vector<std::pair<std::string, Mode>> modes = {
      {"swarm (gradients every step)", {"swarm", {"swarm.mode=swarm"}, 8}},
      {"DiLoCo, H = " + std::to_string(d.inner_steps),
       {"diloco",
        {"swarm.mode=" + diloco_mode, "diloco.fragments=1", "diloco.overlap_steps=0",
         "diloco.quantize=none", "diloco.compress=none", "diloco.eager=false"},
        d.inner_steps + 2}},
      {label, {"streaming", {"swarm.mode=" + diloco_mode}, d.inner_steps + 2, 1 + d.overlap_steps}},
  };
  const fs::path work = args.work.empty() ? fs::temp_directory_path() /
                                                ("swarmrt-bench-comm-" + std::to_string(getpid()))
                                          : fs::path(args.work);
  fs::create_directories(work);
  const fs::path log = work / "runs.log";
  const std::string self = fs::read_symlink("/proc/self/exe").string();
  const size_t total = modes.size() * (1 + args.caps.size());
  size_t done = 0;
  std::fprintf(stderr, "bench comm: %zu runs, their output in %s\n", total, log.c_str());
  nlohmann::json result{{"benchmark", "comm"},         {"config", args.config},
                        {"overrides", args.overrides}, {"workers", workers},
                        {"machine", machine()},        {"modes", nlohmann::json::array()}};
  for (const auto& [text, mode] : modes) {
    auto common = [&, &mode = mode](std::vector<std::string> argv) {
      for (const auto& o : args.overrides) argv.insert(argv.end(), {"--set", o});
      for (const auto& o : mode.overrides) argv.insert(argv.end(), {"--set", o});
      return argv;
    };
    nlohmann::json entry{
        {"mode", mode.name}, {"label", text}, {"throughput", nlohmann::json::array()}};
    progress(done, total, mode.name + ": whole run in one process");
    const auto dir = work / (mode.name + "-quality");
    auto argv = common({self, "train", "-c", args.config, "-o", dir.string(), "--overwrite"});
    if (int rc = run_child(mode.name, argv, log); rc != 0) {
      spdlog::error("{} run exited {}; see {}", mode.name, rc, log.string());
      return 1;
    }
    entry["quality"] = quality(dir, workers, mode.peak_span);
    ++done;
    for (double cap : args.caps) {
      progress(done, total,
               mode.name + ": " + cap_name(cap) + ", " + std::to_string(workers) + " nodes");
      const auto tdir = work / (mode.name + "-" + std::to_string(static_cast<int>(cap)));
      auto targv = common({self, "launch", "--local", std::to_string(workers), "-c", args.config,
                           "-o", tdir.string(), "--overwrite"});
      for (const auto& o : {"chaos.link_mbit_s=" + std::to_string(cap),
                            "train.steps=" + std::to_string(mode.throughput_steps),
                            std::string("train.eval_every=0"), std::string("train.eval_batches=1"),
                            std::string("checkpoint.every_steps=0")})
        targv.insert(targv.end(), {"--set", o});
      if (int rc = run_child(mode.name, targv, log); rc != 0) {
        spdlog::error("{} at {} exited {}; see {}", mode.name, cap_name(cap), rc, log.string());
        return 1;
      }
      auto t = throughput(tdir);
      t["link_mbit_s"] = cap;
      entry["throughput"].push_back(t);
      ++done;
    }
    result["modes"].push_back(entry);
  }
  progress(done, total, "done");
  const auto table = markdown(result, args.caps);
  std::printf("machine: %s, %s cores, %.1f GiB\n\n%s",
              result["machine"]["cpu"].get<std::string>().c_str(),
              result["machine"]["cores"].dump().c_str(),
              result["machine"]["memory_gib"].get<double>(), table.c_str());
  result["markdown"] = table;
  auto write = [](const fs::path& path, const std::string& text) {
    if (path.has_parent_path()) fs::create_directories(path.parent_path());
    const auto tmp = path.string() + ".tmp";
    {
      std::ofstream out(tmp);
      out << text;
      if (!out) throw std::runtime_error("cannot write " + tmp);
    }
    fs::rename(tmp, path);
  };
  write(args.out, result.dump(1) + "\n");
  std::printf("wrote %s\n", args.out.c_str());
  if (!args.markdown.empty()) {
    write(args.markdown, table);
    std::printf("wrote %s\n", args.markdown.c_str());
  }
  return 0;
}

}  // namespace

void add_bench_command(CLI::App& app, int& exit_code) {
  auto args = std::make_shared<Args>();
  auto* bench = app.add_subcommand("bench", "benchmarks that need whole runs");
  bench->require_subcommand(1);
  auto* comm = bench->add_subcommand(
      "comm", "per-step sync, DiLoCo and Streaming DiLoCo: sync bytes, loss, tokens/s under caps");
  add_config_options(*comm, args->config, args->overrides);
  comm->add_option("--caps", args->caps, "link caps in Mbit/s, 0 = none")->delimiter(',');
  comm->add_option("--out,-o", args->out, "JSON results (default bench/results/comm.json)");
  comm->add_option("--markdown", args->markdown, "also write the table here");
  comm->add_option("--work", args->work, "keep the runs' directories here");
  add_bench_state_command(*bench, exit_code);
  comm->callback([args, &exit_code] {
    try {
      exit_code = run_bench(*args);
    } catch (const std::exception& e) {
      spdlog::error("bench comm: {}", e.what());
      exit_code = 1;
    }
  });
}

}  // namespace swarmrt::apps
