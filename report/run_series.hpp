// A run directory's metrics.jsonl read as series against the tokens trained so far: what
// `swarmrt plot` draws. Step records give the training loss, tokens/s and the bytes sent by
// kind (cumulative); eval records the validation loss; fault, recovered, rejected and
// rebalance records the events, placed at the tokens of the last step before them.
#pragma once

#include <map>
#include <stdexcept>
#include <string>
#include <vector>

namespace swarmrt::report {

struct Point {
  double tokens = 0;  // trained so far
  double value = 0;
};

struct Event {
  double tokens = 0;
  std::string event;  // fault, recovered, rejected, rebalance
  std::string what;   // its kind or actor, for the reader
};

struct RunSeries {
  std::string name;                                 // shown in the legend
  std::vector<Point> loss, val_loss, tokens_per_s;  // losses in nats per token
  std::vector<Point> loss_bpb, val_bpb;             // the same in bits per byte, where known
  std::map<std::string, std::vector<Point>> bytes;  // kind -> cumulative bytes
  std::vector<Event> events;
  std::vector<std::string> skipped;  // "file:line: why" of each line that is no record
};

// A metrics file that cannot be read: the message names the file and, for a bad record, its
// line.
struct MetricsError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Reads RUN_DIR/metrics.jsonl (or a metrics file given directly). Records of a run resumed
// from an earlier step replace the ones they repeat. A line that is not a JSON object, or a step
// record without a numeric step, is skipped and named in `skipped` (a process killed mid-write
// leaves a torn last line; the records before it still count); records of other events are
// ignored. A file that cannot be read, or holds no step record, is a MetricsError.
RunSeries read_run(const std::string& path, const std::string& name);

}  // namespace swarmrt::report
