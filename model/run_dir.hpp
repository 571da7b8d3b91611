// A run directory: config.toml (the effective config), metrics.jsonl, checkpoints/.
#pragma once

#include <fstream>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "config/config.hpp"
#include "model/checkpoint.hpp"

namespace swarmrt::model {

// Seconds since the Unix epoch: the "wall" of every metrics.jsonl record, so events of several
// processes (a kill sent by a script, a fault noticed by the coordinator) line up.
double wall_clock_s();

// Append-only JSON-lines log; every line is flushed so a crash loses at most the line being
// written. A record without "wall" gets the time it is written.
class MetricsLog {
 public:
  explicit MetricsLog(const std::string& path, bool append);
  void write(const nlohmann::json& record);
  // Drops the step and eval records of steps after `step` (they run again), between two
  // writes; nothing when this process no longer leads (leader/fence.hpp).
  void drop_after(int64_t step);

 private:
  std::mutex mu_;
  std::string path_;
  std::ofstream out_;
};

// In the metrics log at `path`: drops the step and eval records of steps after `step` and any
// line torn by a kill (temp file, then rename); the latest "wall" of any record, 0 without one.
double drop_records_after(const std::string& path, int64_t step);
// The highest step of the log's records of `event` ("step", "eval"); 0 without one.
int64_t last_record_step(const std::string& path, const std::string& event);

// The step whose apply a leader sent and whose record it has not written yet (applying.json in
// the run directory, replaced whole each step; only a leader under a fence writes it): the
// leader taking over from it may find that the workers took that step.
void write_pending_step(const std::string& root, const nlohmann::json& record);
// The pending step record of the run at `root`; nullopt without a readable one.
std::optional<nlohmann::json> read_pending_step(const std::string& root);

enum class RunStart { fresh, resume, overwrite };

class RunDir {
 public:
  // fresh: refuses a directory that already holds a run; resume: requires one and keeps its
  // metrics; overwrite: clears the directory first.
  RunDir(std::string root, const config::RunConfig& config, RunStart start);

  const std::string& root() const { return root_; }
  MetricsLog& metrics() { return *metrics_; }
  CheckpointDir& checkpoints() { return checkpoints_; }
  // Copies the run's tokenizer into the run directory (tokenizer.model), so `swarmrt sample`
  // reads its checkpoints as text wherever the data went.
  void keep_tokenizer(const std::string& tokenizer_file) const;

 private:
  std::string root_;
  CheckpointDir checkpoints_;
  std::unique_ptr<MetricsLog> metrics_;
};

}  // namespace swarmrt::model
