// Byte-level text data: a corpus split into train and validation, cut into windows of
// block_size + 1 bytes (inputs and next-byte targets), served by shard loaders.
#pragma once

#include <ATen/core/Tensor.h>
#include <cstdint>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

namespace swarmrt::model {

struct DataError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// The bytes of a UTF-8 file, or of every regular file under a directory (sorted by path so the
// corpus is the same on every machine). The last `val_fraction` of the bytes is validation.
class TextCorpus {
 public:
  static TextCorpus load(const std::string& path, double val_fraction);
  static TextCorpus from_text(std::string text, double val_fraction);

  const std::string& train() const { return train_; }
  const std::string& val() const { return val_; }

 private:
  std::string train_, val_;
};

// Window i covers bytes [i*block, i*block + block + 1): inputs are its first block bytes,
// targets its last block bytes. Windows overlap by one byte so every byte is a target once.
class Windows {
 public:
  Windows(const std::string* text, int64_t block_size);
  int64_t count() const { return count_; }
  int64_t block_size() const { return block_; }
  // Fills row `row` of inputs/targets ([B, T] int64) with window `index`.
  void fill(int64_t index, int64_t row, at::Tensor& inputs, at::Tensor& targets) const;

 private:
  const std::string* text_;
  int64_t block_;
  int64_t count_;
};

struct Batch {
  at::Tensor inputs;   // [B, T] int64 token ids
  at::Tensor targets;  // [B, T] int64 next-token ids
  int64_t samples() const { return inputs.size(0); }
};

// Where a loader is in its stream; saved in checkpoints so a resumed run sees the same data.
struct LoaderPosition {
  int64_t epoch = 0;
  int64_t cursor = 0;
};

// Loader `shard` of `shards` serves the training windows i with i % shards == shard, in an
// order reshuffled every epoch from (seed, shard, epoch). Shards are disjoint and together
// cover every window.
class ShardLoader {
 public:
  ShardLoader(const Windows& windows, int64_t shard, int64_t shards, uint64_t seed);

  Batch next(int64_t batch_size);
  // The window indices the next `n` samples will come from (no state change); for tests.
  std::vector<int64_t> peek(int64_t n) const;

  int64_t shard_size() const { return static_cast<int64_t>(indices_.size()); }
  LoaderPosition position() const { return pos_; }
  void seek(LoaderPosition pos);

 private:
  void shuffle_for_epoch();
  const Windows& windows_;
  int64_t shard_, shards_;
  uint64_t seed_;
  std::vector<int64_t> base_;     // this shard's windows, ascending
  std::vector<int64_t> indices_;  // this epoch's order
  LoaderPosition pos_;
};

// The fixed validation batches of an evaluation: `batches` micro-batches of `batch_size`
// windows spread evenly over the validation text, the same at every evaluation.
std::vector<Batch> validation_batches(const Windows& val, int64_t batches, int64_t batch_size);

}  // namespace swarmrt::model
