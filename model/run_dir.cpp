#include "model/run_dir.hpp"

#include <spdlog/spdlog.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <stdexcept>

#include "leader/fence.hpp"
#include "model/record_hook.hpp"

namespace swarmrt::model {
namespace fs = std::filesystem;

MetricsLog::MetricsLog(const std::string& path, bool append)
    : path_(path), out_(path, append ? std::ios::app : std::ios::trunc) {
  if (!out_) throw std::runtime_error(path + ": cannot open metrics log");
}

void MetricsLog::drop_after(int64_t step) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!leader::write_fenced().empty()) return;
  out_.close();
  // Reopened whatever happens: the log goes on after a failed rewrite.
  struct Reopen {
    MetricsLog& log;
    ~Reopen() { log.out_.open(log.path_, std::ios::app); }
  } reopen{*this};
  drop_records_after(path_, step);
}

double drop_records_after(const std::string& path, int64_t step) {
  std::ifstream in(path);
  if (!in) return 0;
  const auto tmp = path + ".takeover";
  std::ofstream out(tmp, std::ios::trunc);
  std::string line;
  double last_wall = 0;
  size_t dropped = 0;
  while (std::getline(in, line)) {
    const auto r = nlohmann::json::parse(line, nullptr, false);
    if (!r.is_object()) {
      ++dropped;  // torn by a kill
      continue;
    }
    // The previous leader's last sign of life, whether its record stays or goes.
    last_wall = std::max(last_wall, r.value("wall", 0.0));
    const auto event = r.value("event", "");
    if ((event == "step" || event == "eval") && r.value("step", int64_t{0}) > step) {
      ++dropped;
      continue;
    }
    out << line << '\n';
  }
  out.close();
  if (!out) throw std::runtime_error(tmp + ": cannot write it");
  fs::rename(tmp, path);
  if (dropped > 0)
    spdlog::info("{}: {} records after step {} dropped: those steps run again", path, dropped,
                 step);
  return last_wall;
}

int64_t last_record_step(const std::string& path, const std::string& event) {
  std::ifstream in(path);
  std::string line;
  int64_t last = 0;
  while (std::getline(in, line)) {
    const auto r = nlohmann::json::parse(line, nullptr, false);
    if (r.is_object() && r.value("event", "") == event)
      last = std::max(last, r.value("step", int64_t{0}));
  }
  return last;
}

void write_pending_step(const std::string& root, const nlohmann::json& record) {
  // One file per run, written every step: only where a takeover may read it.
  if (leader::write_epoch() == 0 || !leader::write_fenced().empty()) return;
  const auto path = fs::path(root) / "applying.json";
  const auto tmp = path.string() + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << record.dump() << '\n';
    if (!out) return;  // a record missed costs a takeover its step, not the run
  }
  std::error_code ec;
  fs::rename(tmp, path, ec);
}

std::optional<nlohmann::json> read_pending_step(const std::string& root) {
  std::ifstream in(fs::path(root) / "applying.json");
  std::string line;
  if (!in || !std::getline(in, line)) return std::nullopt;
  auto r = nlohmann::json::parse(line, nullptr, false);
  if (!r.is_object() || !r.contains("step") || !r["step"].is_number_unsigned()) return std::nullopt;
  return r;
}

double wall_clock_s() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

namespace {

struct FollowUp {
  std::mutex mu;
  std::string event;
  std::function<nlohmann::json(const nlohmann::json&)> follow;
};

FollowUp& follow_up() {
  static FollowUp* f = new FollowUp;  // outlives every writer, static destruction included
  return *f;
}

// The follow-up record for `record`, or null; taken once.
nlohmann::json take_follow_up(const nlohmann::json& record) {
  auto& f = follow_up();
  std::lock_guard<std::mutex> lock(f.mu);
  if (!f.follow || !record.is_object() || record.value("event", "") != f.event) return nullptr;
  auto follow = std::move(f.follow);
  f.follow = nullptr;
  return follow(record);
}

}  // namespace

void follow_next_record(const std::string& event,
                        std::function<nlohmann::json(const nlohmann::json&)> follow) {
  auto& f = follow_up();
  std::lock_guard<std::mutex> lock(f.mu);
  f.event = event;
  f.follow = std::move(follow);
}

void MetricsLog::write(const nlohmann::json& record) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    // A replaced leader adds nothing to the run's history (leader/fence.hpp).
    if (const auto why = leader::write_fenced(); !why.empty()) {
      static std::atomic<bool> told{false};
      if (!told.exchange(true)) spdlog::error("metrics records are no longer written: {}", why);
      return;
    }
    const int64_t epoch = leader::write_epoch();
    if (record.is_object() && (!record.contains("wall") || epoch != 0)) {
      auto stamped = record;
      if (!record.contains("wall")) stamped["wall"] = wall_clock_s();
      if (epoch != 0) stamped["epoch"] = epoch;
      out_ << stamped.dump() << '\n';
    } else {
      out_ << record.dump() << '\n';
    }
    out_.flush();
  }
  // Outside the lock: the follow-up is written like any record (and taken only once).
  if (auto more = take_follow_up(record); !more.is_null()) write(more);
}

RunDir::RunDir(std::string root, const config::RunConfig& config, RunStart start)
    : root_(std::move(root)), checkpoints_((fs::path(root_) / "checkpoints").string()) {
  const fs::path dir(root_);
  const bool has_run = fs::exists(dir / "config.toml") || fs::exists(dir / "metrics.jsonl");
  if (start == RunStart::fresh && has_run)
    throw std::runtime_error(root_ +
                             " already holds a run; pass --resume to continue it or "
                             "--overwrite to start over");
  if (start == RunStart::resume && !has_run)
    throw std::runtime_error(root_ + " holds no run to resume");
  if (start == RunStart::overwrite && has_run) {
    fs::remove_all(dir / "checkpoints");
    fs::remove(dir / "metrics.jsonl");
    fs::remove(dir / "config.toml");
  }
  fs::create_directories(dir / "checkpoints");
  if (const auto n = checkpoints_.remove_stale_temporaries(); n > 0)
    spdlog::warn("{}: removed {} unfinished checkpoint file(s) of an earlier run", root_, n);
  {
    // The effective config, written like a checkpoint: temp file then rename.
    const auto tmp = dir / "config.toml.tmp";
    std::ofstream out(tmp);
    out << config::to_toml(config);
    out.close();
    if (!out) throw std::runtime_error((dir / "config.toml").string() + ": cannot write it");
    fs::rename(tmp, dir / "config.toml");
  }
  metrics_ =
      std::make_unique<MetricsLog>((dir / "metrics.jsonl").string(), start == RunStart::resume);
}

void RunDir::keep_tokenizer(const std::string& tokenizer_file) const {
  if (tokenizer_file.empty()) return;
  const auto dest = std::filesystem::path(root_) / "tokenizer.model";
  const auto tmp = dest.string() + ".tmp";
  std::filesystem::copy_file(tokenizer_file, tmp,
                             std::filesystem::copy_options::overwrite_existing);
  std::filesystem::rename(tmp, dest);
}

}  // namespace swarmrt::model
