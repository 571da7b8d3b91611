// Checkpoint files: named tensors, opaque blobs (optimizer state) and JSON metadata in one
// checksummed file. Writes go to a temporary file that is renamed into place, so a crash
// leaves either the old file or the complete new one; reads verify size and CRC-32 and name
// the file and the problem when they refuse one.
#pragma once

#include <ATen/core/Tensor.h>
#include <functional>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace torch::nn {
class Module;
}
namespace torch::optim {
class Optimizer;
}

namespace swarmrt::model {

struct CheckpointError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

using NamedTensors = std::vector<std::pair<std::string, at::Tensor>>;

struct Checkpoint {
  std::string meta_json = "{}";  // step, loader positions, effective config, ...
  NamedTensors tensors;          // CPU tensors by name
  std::map<std::string, std::string> blobs;

  const at::Tensor* find(const std::string& name) const;
};

void write_checkpoint(const std::string& path, const Checkpoint& ckpt);
Checkpoint read_checkpoint(const std::string& path);

// Parameters of a module as CPU copies; and loading them back, refusing missing, unexpected
// or differently shaped entries with their names.
NamedTensors parameters_of(const torch::nn::Module& module);
void load_parameters(torch::nn::Module& module, const Checkpoint& ckpt, const std::string& origin);

std::string optimizer_bytes(torch::optim::Optimizer& opt);
// The state's tensors are put on `device`, where the optimizer's parameters are.
void load_optimizer_bytes(torch::optim::Optimizer& opt, const std::string& bytes,
                          const at::Device& device = at::kCPU);

// A run's checkpoints/ folder of step_XXXXXXXX.ckpt files.
class CheckpointDir {
 public:
  explicit CheckpointDir(std::string dir) : dir_(std::move(dir)) {}
  const std::string& path() const { return dir_; }

  // Writes the checkpoint of `step` and removes all but the newest `keep`.
  std::string save(int64_t step, const Checkpoint& ckpt, int64_t keep);
  // Paths of the checkpoint files, newest first.
  std::vector<std::string> list() const;
  // The newest checkpoint that reads back intact and passes `check` (which throws to refuse
  // one, e.g. when its optimizer state does not deserialize); each refused file is reported
  // through `on_refused(path, reason)` and skipped. Empty when none is usable.
  std::optional<std::pair<std::string, Checkpoint>> newest_valid(
      const std::function<void(const std::string&, const std::string&)>& on_refused,
      const std::function<void(const std::string&, const Checkpoint&)>& check = {}) const;
  bool has(int64_t step) const;
  // Removes the temporary files of writes that never finished (a crash); returns how many.
  size_t remove_stale_temporaries() const;

 private:
  std::string dir_;
};

}  // namespace swarmrt::model
