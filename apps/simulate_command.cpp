// swarmrt simulate --config FILE [--set section.key=value ...] [--out FILE.json]
//
// A swarm of simulate.peers peers in simulated time (policy/simulator.hpp), run twice with the
// same churn: with the balancer (policy/balancer.hpp, the code the live runtime places workers
// with) and without. The stages, their costs and the bytes that cross links come from the
// config's model and swarm sections.
#include <spdlog/spdlog.h>
#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "apps/commands.hpp"
#include "apps/options.hpp"
#include "config/config.hpp"
#include "model/stage_cost.hpp"
#include "policy/goodput.hpp"
#include "policy/simulator.hpp"

namespace swarmrt::apps {
namespace {

policy::SimParams params_of(const config::RunConfig& c) {
  policy::SimParams p;
  const auto& s = c.simulate;
  // Costs relative to the average stage: min_rate is a slowest peer's on such a stage.
  p.cost = model::stage_costs(c);
  for (int64_t k = 0; k < c.swarm.stages; ++k) {
    const double bytes = 4 * model::stage_parameters(c, k);
    p.state_bytes.push_back(3 * bytes);  // parameters and AdamW's two moments, fp32
    p.round_bytes.push_back(bytes);      // one fp32 pseudo-gradient
  }
  p.peers = s.peers;
  p.duration_s = s.hours * 3600;
  p.min_rate = s.min_rate;
  p.speed_spread = s.speed_spread;
  p.failures_per_hour = s.failures_per_hour;
  p.recovery_s = s.recovery_s;
  p.joins_per_hour = s.joins_per_hour;
  p.link_bytes_per_s = s.link_mbit_s * 1e6 / 8;
  p.latency_s = s.latency_ms / 1000;
  p.sample_bytes = 4.0 * double(c.model.block_size * c.model.n_embd);
  p.max_inflight = c.swarm.max_inflight;
  p.microbatch = double(c.train.micro_batch);
  const bool diloco =
      c.swarm.mode == config::Mode::diloco || c.swarm.mode == config::Mode::diloco_swarm;
  p.inner_steps = diloco ? c.diloco.inner_steps : 0;
  p.step_samples = double(c.tokens_per_step() / c.model.block_size);
  p.balance.min_gain = c.balancer.min_gain;
  p.balance.min_workers = c.balancer.min_workers;
  p.balance.cooldown_s = c.balancer.cooldown_s;
  p.balance.max_moves = c.balancer.max_moves;
  p.period_s = c.balancer.period_s;
  p.noise = s.noise;
  p.sample_s = s.sample_s;
  p.seed = static_cast<uint64_t>(s.seed);
  p.donors = s.donors;
  p.donor_share = s.donor_share;
  return p;
}

nlohmann::json to_json(const policy::SimResult& r, double wall_s) {
  nlohmann::json points = nlohmann::json::array(), moves = nlohmann::json::array();
  for (const auto& p : r.points)
    points.push_back({{"t", p.t},
                      {"alive", p.alive},
                      {"samples_per_s", p.rate},
                      {"optimal_samples_per_s", p.bound},
                      {"fraction", p.window}});
  for (const auto& m : r.moves)
    moves.push_back({{"t", m.t},
                     {"worker", m.move.worker},
                     {"from", m.move.from},
                     {"to", m.move.to},
                     {"gain", m.move.gain},
                     {"reason", m.move.reason}});
  return {{"fraction_of_optimal", r.fraction()},
          {"samples", r.samples},
          {"optimal_samples", r.bound_samples},
          {"moves", r.moves.size()},
          {"failures", r.failures},
          {"recoveries", r.recoveries},
          {"joins", r.joins},
          {"events", r.events},
          {"wall_s", wall_s},
          {"points", points},
          {"move_log", moves}};
}

struct Timed {
  policy::SimResult result;
  double wall_s = 0;
};

Timed timed(const policy::SimParams& p) {
  const auto start = std::chrono::steady_clock::now();
  Timed t{policy::simulate(p)};
  t.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return t;
}

// The whole file or nothing: written beside the target, then renamed over it.
void write_json(const std::string& path, const nlohmann::json& j) {
  const std::filesystem::path target(path);
  const auto tmp = target.string() + ".tmp";
  {
    std::ofstream out(tmp);
    out << j.dump(1) << "\n";
    if (!out) throw std::runtime_error("cannot write " + tmp);
  }
  std::filesystem::rename(tmp, target);
}

int run_simulate(const std::string& config_path, const std::vector<std::string>& overrides,
                 const std::string& out) {
  const auto loaded = load_config_or_say(config_path, overrides);
  if (!loaded) return 2;
  const config::RunConfig& config = *loaded;
  try {
    auto p = params_of(config);
    std::printf(
        "simulating %lld peers, %lld stages, %.2f h: speeds %.0f-%.0f samples/s, "
        "%.0f%% failing per hour, links %.0f Mbit/s %.0f ms\n",
        static_cast<long long>(p.peers), static_cast<long long>(p.cost.size()),
        config.simulate.hours, p.min_rate, p.min_rate * p.speed_spread, 100 * p.failures_per_hour,
        config.simulate.link_mbit_s, config.simulate.latency_ms);
    p.balancer = true;
    const auto with = timed(p);
    p.balancer = false;
    const auto without = timed(p);
    // Goodput: what the run with the balancer completed ÷ what the same peers complete with
    // no failure and no join; the synchronous baseline keeps this much of the same failures.
    auto calm = p;
    calm.balancer = true;
    calm.failures_per_hour = 0;
    calm.joins_per_hour = 0;
    const auto unfaulted = timed(calm);
    const double goodput =
        unfaulted.result.samples > 0 ? with.result.samples / unfaulted.result.samples : 0;
    const policy::SyncBaseline baseline{config.simulate.sync_checkpoint_s,
                                        config.simulate.sync_restart_s};
    const double sync_goodput =
        policy::sync_goodput(with.result.failure_times, p.duration_s, baseline);
    std::printf("%10s %8s %22s %22s\n", "minute", "alive", "balancer (of optimal)", "no balancer");
    for (size_t i = 0; i < with.result.points.size(); ++i) {
      const auto& a = with.result.points[i];
      const auto& b = without.result.points[i];
      std::printf("%10.1f %8lld %15.0f (%4.1f%%) %15.0f (%4.1f%%)\n", a.t / 60,
                  static_cast<long long>(a.alive), a.rate, 100 * a.window, b.rate, 100 * b.window);
    }
    std::printf(
        "samples/s as a fraction of the optimal placement's over the run: balancer "
        "%.1f%% (%zu moves), no balancer %.1f%%; %lld failures, %lld recoveries, %lld "
        "joins; simulated in %.2f s + %.2f s\n",
        100 * with.result.fraction(), with.result.moves.size(), 100 * without.result.fraction(),
        static_cast<long long>(with.result.failures),
        static_cast<long long>(with.result.recoveries), static_cast<long long>(with.result.joins),
        with.wall_s, without.wall_s);
    std::printf(
        "goodput (samples completed / the same peers' without failures or joins): swarm "
        "%.3f (state from up to %lld donors sparing %.0f%% of their links); a synchronous job "
        "over the same %lld failures, restarting from a checkpoint every %.0f s in %.0f s: "
        "%.3f\n",
        goodput, static_cast<long long>(p.donors), 100 * p.donor_share,
        static_cast<long long>(with.result.failures), baseline.checkpoint_s, baseline.restart_s,
        sync_goodput);
    if (!out.empty()) {
      nlohmann::json stages = nlohmann::json::array();
      for (size_t k = 0; k < p.cost.size(); ++k)
        stages.push_back({{"cost", p.cost[k]}, {"state_bytes", p.state_bytes[k]}});
      write_json(out, {{"config", config_path},
                       {"peers", p.peers},
                       {"hours", config.simulate.hours},
                       {"stages", stages},
                       {"goodput", goodput},
                       {"sync_goodput", sync_goodput},
                       {"unfaulted_samples", unfaulted.result.samples},
                       {"failures_per_hour", p.failures_per_hour},
                       {"donors", p.donors},
                       {"donor_share", p.donor_share},
                       {"sync_checkpoint_s", baseline.checkpoint_s},
                       {"sync_restart_s", baseline.restart_s},
                       {"balancer", to_json(with.result, with.wall_s)},
                       {"no_balancer", to_json(without.result, without.wall_s)}});
      std::printf("wrote %s\n", out.c_str());
    }
    return 0;
  } catch (const std::exception& e) {
    spdlog::error("{}", e.what());
    return 1;
  }
}

}  // namespace

void add_simulate_command(CLI::App& app, int& exit_code) {
  struct Args {
    std::string config, out;
    std::vector<std::string> overrides;
  };
  auto args = std::make_shared<Args>();
  auto* cmd = app.add_subcommand(
      "simulate", "a swarm of many peers in simulated time, with and without the balancer");
  add_config_options(*cmd, args->config, args->overrides);
  cmd->add_option("--out,-o", args->out, "write the time series and moves here (JSON)");
  cmd->callback(
      [args, &exit_code] { exit_code = run_simulate(args->config, args->overrides, args->out); });
}

}  // namespace swarmrt::apps
