// Training data: a corpus of token ids split into train and validation, cut into windows of
// block_size + 1 ids (inputs and next-token targets), served by shard loaders. The ids are the
// bytes of UTF-8 text (data.format = "bytes") or the ids of token shards ("tokens").
#pragma once

#include <ATen/core/Tensor.h>
#include <cstdint>
#include <memory>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "config/config.hpp"

namespace swarmrt::model {

struct DataError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// A run of token ids in memory: the bytes of a text (one byte an id) or the ids of a mapped
// shard (2 or 4 little-endian bytes an id).
struct TokenSpan {
  const unsigned char* data = nullptr;
  int64_t size = 0;  // ids
  int width = 1;     // bytes an id
  int64_t operator[](int64_t i) const {
    const unsigned char* p = data + i * width;
    if (width == 1) return p[0];
    if (width == 2) return int64_t(p[0]) | int64_t(p[1]) << 8;
    return int64_t(p[0]) | int64_t(p[1]) << 8 | int64_t(p[2]) << 16 | int64_t(p[3]) << 24;
  }
};
using TokenParts = std::vector<TokenSpan>;
// One part over the bytes of `text`, which must outlive it.
inline TokenParts text_parts(const std::string& text) {
  return {
      {reinterpret_cast<const unsigned char*>(text.data()), static_cast<int64_t>(text.size()), 1}};
}

// The training and validation ids of a run, and what it needs to read them as text.
class Corpus {
 public:
  // data.format decides: bytes of data.path (a file, or a directory's files in path order,
  // the last data.val_fraction held out), or the .bin shards of directory data.path (files
  // named *val* are validation; every id must be below `vocab_size`).
  static Corpus load(const config::DataConfig& data, int64_t vocab_size);
  static Corpus load_text(const std::string& path, double val_fraction);
  static Corpus from_text(std::string text, double val_fraction);
  static Corpus load_shards(const std::string& dir, int64_t vocab_size);

  const TokenParts& train() const { return train_; }
  const TokenParts& val() const { return val_; }
  int64_t train_tokens() const;
  int64_t val_tokens() const;
  // A validation loss in nats per token as bits per byte of text, comparable across
  // tokenizers; NaN where the text's size is unknown (shards without data.json).
  double bits_per_byte(double nats_per_token) const;
  // The same for a training loss, with the training text's bytes per token.
  double train_bits_per_byte(double nats_per_token) const;
  // The tokenizer that reads these ids as text: empty for bytes; tokenizer.model of a shard
  // directory, or empty where it has none.
  const std::string& tokenizer_file() const { return tokenizer_file_; }

 private:
  std::shared_ptr<const void> storage_;  // the text, or the mapped shards
  TokenParts train_, val_;
  double val_bytes_per_token_ = 1, train_bytes_per_token_ = 1;
  std::string tokenizer_file_;
};

// Bits per byte as a log shows it: four decimals, or "n/a" where unknown (NaN).
std::string format_bpb(double bits_per_byte);

// Windows of each part: window i of a part covers ids [i*block, i*block + block + 1): inputs
// are its first block ids, targets its last block ids. Windows overlap by one id so every id
// is a target once; no window spans two parts. Windows are numbered part after part.
class Windows {
 public:
  Windows(const TokenParts& parts, int64_t block_size);
  int64_t count() const { return count_; }
  int64_t block_size() const { return block_; }
  // Fills row `row` of inputs/targets ([B, T] int64) with window `index`.
  void fill(int64_t index, int64_t row, at::Tensor& inputs, at::Tensor& targets) const;

 private:
  TokenParts parts_;
  std::vector<int64_t> first_;  // first window of each part
  int64_t block_;
  int64_t count_ = 0;
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
