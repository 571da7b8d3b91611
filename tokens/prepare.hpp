// `swarmrt data prepare`: text files in, a directory a run trains on out: the tokenizer, token
// shards in llm.c's layout (shard.hpp) and data.json, which records what bits per byte needs.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace swarmrt::tokens {

struct PrepareOptions {
  std::vector<std::string> inputs;     // files, or directories read whole in path order
  int64_t vocab_size = 8192;           // of a tokenizer trained here
  std::string tokenizer;               // an existing tokenizer.model instead of training one
  std::string out;                     // must be absent or empty
  double val_fraction = 0.05;          // tail of the text held out, cut at a line break
  int64_t shard_tokens = 100'000'000;  // tokens per training shard (llm.c's size)
  int threads = 2;
};

struct PrepareResult {
  int64_t train_tokens = 0, val_tokens = 0;
  int64_t train_bytes = 0, val_bytes = 0;
  int64_t vocab_size = 0;  // the tokenizer's pieces
  std::vector<std::string> shards;
};

// The text of a file, or of every regular file under a directory in path order (so a corpus
// reads the same on every machine). Throws TokenizerError naming a file it cannot open. Byte
// corpora (model/data.cpp) are read with it too.
std::string read_text(const std::string& path);

// Throws TokenizerError or ShardError naming what is wrong; writes nothing into `out` before
// its inputs are read and its tokenizer trained, and every file through a rename.
PrepareResult prepare(const PrepareOptions& options);

// data.json of a prepared directory: the validation shard's bytes of text and tokens.
struct DataInfo {
  int64_t val_bytes = 0, val_tokens = 0, train_bytes = 0, train_tokens = 0, vocab_size = 0;
};
constexpr const char* kDataInfo = "data.json";
constexpr const char* kTokenizerFile = "tokenizer.model";

// The vocabulary `dir` was prepared with (its data.json's vocab_size), or nothing where `dir`
// holds no data.json. Throws TokenizerError naming the file when it holds no usable one.
std::optional<int64_t> prepared_vocab_size(const std::string& dir);

}  // namespace swarmrt::tokens
