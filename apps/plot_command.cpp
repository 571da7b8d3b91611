// swarmrt plot RUN_DIR [RUN_DIR ...] --out FILE.png|FILE.svg: several runs' loss, bytes by
// kind and tokens/s against tokens on one chart, their events marked (report/chart.hpp).
// gnuplot draws it into a temporary file beside the output, renamed over it only when gnuplot
// succeeded: a failed plot leaves no half-written chart.
#include <signal.h>
#include <spdlog/spdlog.h>
#include <unistd.h>
#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <thread>

#include "apps/commands.hpp"
#include "apps/plot.hpp"
#include "launch/process.hpp"
#include "report/chart.hpp"

namespace swarmrt::apps {
namespace fs = std::filesystem;

namespace {

// gnuplot on PATH, or empty.
std::string find_gnuplot() {
  const char* path = std::getenv("PATH");
  std::string dirs = path ? path : "/usr/bin:/bin";
  size_t start = 0;
  while (start <= dirs.size()) {
    const auto end = std::min(dirs.find(':', start), dirs.size());
    const fs::path candidate = fs::path(dirs.substr(start, end - start)) / "gnuplot";
    if (access(candidate.c_str(), X_OK) == 0) return candidate.string();
    start = end + 1;
  }
  return "";
}

// The legend's name of each run: its directory's name, or the path as given where two share it.
std::vector<std::string> run_names(const std::vector<std::string>& paths) {
  std::vector<std::string> names;
  std::map<std::string, int> count;
  for (const auto& p : paths) {
    auto name = fs::path(p).lexically_normal().filename().string();
    if (name.empty() || name == ".") name = fs::path(p).lexically_normal().parent_path().filename();
    if (name.empty()) name = p;
    names.push_back(name);
    ++count[name];
  }
  for (size_t i = 0; i < names.size(); ++i)
    if (count[names[i]] > 1) names[i] = paths[i];
  return names;
}

// Runs gnuplot on `script_path`; its output (errors) in `log`. False on failure or timeout.
bool run_gnuplot(const std::string& gnuplot, const std::string& script_path, double timeout_s,
                 std::string& log) {
  launch::Child child("gnuplot", {gnuplot, script_path});
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::milliseconds(int64_t(timeout_s * 1000));
  for (;;) {
    for (const auto& line : child.read_lines()) log += line + "\n";
    if (auto code = child.poll_exit()) {
      for (const auto& line : child.read_lines()) log += line + "\n";
      if (*code != 0) log += "gnuplot exited with " + std::to_string(*code) + "\n";
      return *code == 0;
    }
    if (std::chrono::steady_clock::now() > deadline) {
      child.signal(SIGKILL);
      log += "gnuplot did not finish within " + std::to_string(int(timeout_s)) + " s\n";
      return false;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

}  // namespace

std::string render_chart(const std::vector<report::RunSeries>& series,
                         const report::ChartOptions& options, const std::string& out,
                         const std::string& script_out) {
  const fs::path target = fs::absolute(out);
  if (!fs::is_directory(target.parent_path()))
    return "--out " + out + ": the directory " + target.parent_path().string() + " does not exist";
  const std::string gnuplot = find_gnuplot();
  if (gnuplot.empty())
    return "gnuplot is not installed (Debian: apt-get install gnuplot-nox; ./scripts/test.sh "
           "and ./scripts/demo.sh install it)";
  const std::string stem = target.string() + ".tmp-" + std::to_string(getpid());
  const std::string drawing = stem + target.extension().string();
  const std::string script_path = stem + ".gp";
  {
    std::ofstream f(script_path);
    f << report::chart_script(series, options, drawing);
    if (!f) return "cannot write " + script_path;
  }
  std::string log;
  const bool ok = run_gnuplot(gnuplot, script_path, 120, log);
  std::error_code ec;
  if (!script_out.empty())
    fs::copy_file(script_path, script_out, fs::copy_options::overwrite_existing, ec);
  fs::remove(script_path, ec);
  if (!ok || !fs::exists(drawing) || fs::file_size(drawing) == 0) {
    fs::remove(drawing, ec);
    return "gnuplot failed; " + out + " is left as it was:\n" + log;
  }
  fs::rename(drawing, target, ec);
  if (ec) {
    fs::remove(drawing, ec);
    return "cannot write " + out + ": " + ec.message();
  }
  return "";
}

namespace {

int plot(const std::vector<std::string>& runs, const std::string& out, report::ChartOptions options,
         const std::string& script_out) {
  try {
    options.format = report::chart_format(out);
  } catch (const std::invalid_argument& e) {
    spdlog::error("{}", e.what());
    return 2;
  }
  std::vector<report::RunSeries> series;
  const auto names = run_names(runs);
  try {
    for (size_t i = 0; i < runs.size(); ++i) series.push_back(report::read_run(runs[i], names[i]));
  } catch (const report::MetricsError& e) {
    spdlog::error("{}", e.what());
    return 1;
  }
  for (const auto& s : series)
    for (const auto& line : s.skipped) spdlog::warn("{}: skipped", line);
  if (const auto error = render_chart(series, options, out, script_out); !error.empty()) {
    spdlog::error("{}", error);
    return 1;
  }
  size_t events = 0, skipped = 0;
  for (const auto& s : series) events += s.events.size(), skipped += s.skipped.size();
  std::printf("wrote %s: %zu run(s), %zu event(s) marked", out.c_str(), series.size(), events);
  if (skipped > 0) std::printf(", %zu line(s) that are no record skipped", skipped);
  std::printf("\n");
  return 0;
}

}  // namespace

void add_plot_command(CLI::App& app, int& exit_code) {
  struct Args {
    std::vector<std::string> runs;
    std::string out, script;
    report::ChartOptions options;
  };
  auto args = std::make_shared<Args>();
  auto* cmd = app.add_subcommand(
      "plot", "draw runs' loss, bytes by kind and tokens/s against tokens, events marked");
  cmd->add_option("runs", args->runs, "run directories (or metrics.jsonl files)")->required();
  cmd->add_option("--out,-o", args->out, "the chart: FILE.png or FILE.svg")->required();
  cmd->add_option("--title", args->options.title, "the chart's title");
  cmd->add_option("--width", args->options.width, "pixels")->check(CLI::Range(300, 8000));
  cmd->add_option("--height", args->options.height, "pixels")->check(CLI::Range(300, 8000));
  cmd->add_option("--smooth", args->options.smooth_steps, "steps averaged in tokens/s")
      ->check(CLI::Range(1, 100000));
  cmd->add_option("--script", args->script, "also keep the gnuplot script here");
  cmd->callback(
      [args, &exit_code] { exit_code = plot(args->runs, args->out, args->options, args->script); });
}

}  // namespace swarmrt::apps
