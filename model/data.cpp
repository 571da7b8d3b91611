#include "model/data.hpp"

#include <ATen/ATen.h>
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <sstream>

#include "policy/splitmix.hpp"
#include "tokens/prepare.hpp"
#include "tokens/shard.hpp"
#include "tokens/tokenizer.hpp"

namespace swarmrt::model {
namespace fs = std::filesystem;

namespace {
std::string read_file(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  if (!in) throw DataError(p.string() + ": cannot open data file");
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Owns a byte corpus's text; spans point into it, and it does not move while shared.
struct TextStorage {
  std::string train, val;
};
struct ShardStorage {
  std::vector<std::shared_ptr<const tokens::MappedShard>> shards;
};

int64_t total(const TokenParts& parts) {
  int64_t n = 0;
  for (const auto& p : parts) n += p.size;
  return n;
}

// data.json's count `key`, or -1 where it is missing or no integer.
int64_t count_of(const nlohmann::json& info, const char* key) {
  const auto it = info.find(key);
  return it != info.end() && it->is_number_integer() ? it->get<int64_t>() : -1;
}
}  // namespace

Corpus Corpus::load(const config::DataConfig& data, int64_t vocab_size) {
  if (data.format == config::DataFormat::tokens) return load_shards(data.path, vocab_size);
  return load_text(data.path, data.val_fraction);
}

Corpus Corpus::load_text(const std::string& path, double val_fraction) {
  std::error_code ec;
  if (!fs::exists(path, ec))
    throw DataError(path +
                    ": data path does not exist (run ./scripts/fetch_data.sh for the "
                    "Brown corpus, or set data.path)");
  std::string text;
  try {
    text = tokens::read_text(path);
  } catch (const tokens::TokenizerError& e) {
    throw DataError(e.what());
  }
  try {
    return from_text(std::move(text), val_fraction);
  } catch (const DataError& e) {
    throw DataError(path + ": " + e.what());
  }
}

Corpus Corpus::from_text(std::string text, double val_fraction) {
  if (!(val_fraction > 0 && val_fraction < 1)) throw DataError("val_fraction must be in (0, 1)");
  const auto n = static_cast<int64_t>(text.size());
  const auto n_val = static_cast<int64_t>(static_cast<double>(n) * val_fraction);
  if (n_val < 2 || n - n_val < 2)
    throw DataError("corpus of " + std::to_string(n) + " bytes is too small to split");
  auto storage = std::make_shared<TextStorage>();
  storage->val = text.substr(static_cast<size_t>(n - n_val));
  text.resize(static_cast<size_t>(n - n_val));
  storage->train = std::move(text);
  Corpus c;
  c.train_ = text_parts(storage->train);
  c.val_ = text_parts(storage->val);
  c.storage_ = std::move(storage);
  return c;
}

Corpus Corpus::load_shards(const std::string& dir, int64_t vocab_size) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec))
    throw DataError(dir +
                    ": data.format = \"tokens\" reads a directory of .bin shards (make one "
                    "with `swarmrt data prepare`), and this is none");
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.is_regular_file() && e.path().extension() == ".bin") files.push_back(e.path());
  std::sort(files.begin(), files.end());
  auto storage = std::make_shared<ShardStorage>();
  Corpus c;
  for (const auto& f : files) {
    auto shard = tokens::MappedShard::open(f.string(), vocab_size);
    const TokenSpan span{shard->ids(), shard->count(), shard->width()};
    (f.filename().string().find("val") != std::string::npos ? c.val_ : c.train_).push_back(span);
    storage->shards.push_back(std::move(shard));
  }
  if (c.train_.empty() || c.val_.empty())
    throw DataError(dir +
                    ": needs training shards and a validation shard (a .bin file whose "
                    "name contains \"val\"); found " +
                    std::to_string(c.train_.size()) + " and " + std::to_string(c.val_.size()));
  c.storage_ = std::move(storage);

  const fs::path tokenizer = fs::path(dir) / tokens::kTokenizerFile;
  if (fs::exists(tokenizer, ec)) {
    const auto pieces = tokens::load_sentencepiece(tokenizer.string())->size();
    if (pieces > vocab_size)
      throw DataError(tokenizer.string() + ": the tokenizer has " + std::to_string(pieces) +
                      " pieces, more than model.vocab_size (" + std::to_string(vocab_size) +
                      "): set model.vocab_size >= " + std::to_string(pieces));
    c.tokenizer_file_ = tokenizer.string();
  }
  // Bits per byte needs the validation text's size, which data prepare records.
  c.val_bytes_per_token_ = c.train_bytes_per_token_ = std::numeric_limits<double>::quiet_NaN();
  const fs::path info = fs::path(dir) / tokens::kDataInfo;
  if (fs::exists(info, ec)) {
    nlohmann::json json;
    try {
      json = nlohmann::json::parse(read_file(info));
    } catch (const nlohmann::json::exception& e) {
      throw DataError(info.string() + ": not JSON: " + e.what());
    }
    const int64_t bytes = count_of(json, "val_bytes"), ids = count_of(json, "val_tokens");
    if (bytes <= 0 || ids != c.val_tokens())
      throw DataError(info.string() + ": counts " + std::to_string(ids) + " validation tokens (" +
                      std::to_string(bytes) + " bytes) but the validation shards hold " +
                      std::to_string(c.val_tokens()) + " tokens");
    c.val_bytes_per_token_ = static_cast<double>(bytes) / static_cast<double>(ids);
    const int64_t train_bytes = count_of(json, "train_bytes");
    const int64_t train_ids = count_of(json, "train_tokens");
    if (train_bytes > 0 && train_ids == c.train_tokens())
      c.train_bytes_per_token_ = static_cast<double>(train_bytes) / static_cast<double>(train_ids);
  }
  return c;
}

int64_t Corpus::train_tokens() const {
  return total(train_);
}
int64_t Corpus::val_tokens() const {
  return total(val_);
}

double Corpus::bits_per_byte(double nats_per_token) const {
  return nats_per_token / std::log(2.0) / val_bytes_per_token_;
}
double Corpus::train_bits_per_byte(double nats_per_token) const {
  return nats_per_token / std::log(2.0) / train_bytes_per_token_;
}

std::string format_bpb(double bpb) {
  if (!std::isfinite(bpb)) return "n/a";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.4f", bpb);
  return buf;
}

Windows::Windows(const TokenParts& parts, int64_t block_size) : parts_(parts), block_(block_size) {
  for (const auto& p : parts_) {
    first_.push_back(count_);
    count_ += std::max<int64_t>(0, (p.size - 1) / block_size);
  }
  if (count_ < 1)
    throw DataError("a text of " + std::to_string(total(parts_)) + " tokens holds no window of " +
                    std::to_string(block_size + 1) + " tokens");
}

void Windows::fill(int64_t index, int64_t row, at::Tensor& inputs, at::Tensor& targets) const {
  const size_t part =
      static_cast<size_t>(std::upper_bound(first_.begin(), first_.end(), index) - first_.begin()) -
      1;
  const TokenSpan& span = parts_[part];
  const int64_t start = (index - first_[part]) * block_;
  auto* in = inputs.data_ptr<int64_t>() + row * block_;
  auto* out = targets.data_ptr<int64_t>() + row * block_;
  if (span.width == 1) {  // bytes: the common case, kept a plain loop
    const auto* bytes = span.data + start;
    for (int64_t t = 0; t < block_; ++t) {
      in[t] = bytes[t];
      out[t] = bytes[t + 1];
    }
    return;
  }
  for (int64_t t = 0; t < block_; ++t) {
    in[t] = span[start + t];
    out[t] = span[start + t + 1];
  }
}

ShardLoader::ShardLoader(const Windows& windows, int64_t shard, int64_t shards, uint64_t seed)
    : windows_(windows), shard_(shard), shards_(shards), seed_(seed) {
  if (shards < 1 || shard < 0 || shard >= shards)
    throw DataError("loader shard " + std::to_string(shard) + " of " + std::to_string(shards));
  for (int64_t i = shard; i < windows.count(); i += shards) base_.push_back(i);
  if (base_.empty())
    throw DataError("shard " + std::to_string(shard) + " of " + std::to_string(shards) +
                    " holds no window (" + std::to_string(windows.count()) + " windows)");
  shuffle_for_epoch();
}

void ShardLoader::shuffle_for_epoch() {
  indices_ = base_;
  // A fixed, portable mixing of (seed, shard, epoch) into one RNG seed.
  using policy::splitmix64;
  std::mt19937_64 rng(
      splitmix64(seed_ ^ splitmix64(static_cast<uint64_t>(shard_) ^ splitmix64(pos_.epoch))));
  // Fisher-Yates with our own index draw, so the order does not depend on the standard
  // library's distribution implementation.
  for (size_t i = indices_.size(); i > 1; --i) std::swap(indices_[i - 1], indices_[rng() % i]);
}

void ShardLoader::seek(LoaderPosition pos) {
  if (pos.epoch < 0 || pos.cursor < 0 || pos.cursor > shard_size())
    throw DataError("loader position (epoch " + std::to_string(pos.epoch) + ", cursor " +
                    std::to_string(pos.cursor) + ") out of range for a shard of " +
                    std::to_string(shard_size()) + " windows");
  pos_ = pos;
  shuffle_for_epoch();
}

std::vector<int64_t> ShardLoader::peek(int64_t n) const {
  ShardLoader copy = *this;
  std::vector<int64_t> out;
  for (int64_t i = 0; i < n; ++i) {
    if (copy.pos_.cursor == copy.shard_size()) {
      ++copy.pos_.epoch;
      copy.pos_.cursor = 0;
      copy.shuffle_for_epoch();
    }
    out.push_back(copy.indices_[static_cast<size_t>(copy.pos_.cursor++)]);
  }
  return out;
}

Batch ShardLoader::next(int64_t batch_size) {
  Batch b{at::empty({batch_size, windows_.block_size()}, at::kLong),
          at::empty({batch_size, windows_.block_size()}, at::kLong)};
  for (int64_t r = 0; r < batch_size; ++r) {
    if (pos_.cursor == shard_size()) {
      ++pos_.epoch;
      pos_.cursor = 0;
      shuffle_for_epoch();
    }
    windows_.fill(indices_[static_cast<size_t>(pos_.cursor++)], r, b.inputs, b.targets);
  }
  return b;
}

std::vector<Batch> validation_batches(const Windows& val, int64_t batches, int64_t batch_size) {
  std::vector<Batch> out;
  const int64_t total = batches * batch_size;
  int64_t k = 0;
  for (int64_t b = 0; b < batches; ++b) {
    Batch batch{at::empty({batch_size, val.block_size()}, at::kLong),
                at::empty({batch_size, val.block_size()}, at::kLong)};
    for (int64_t r = 0; r < batch_size; ++r, ++k) {
      const int64_t index = total <= val.count() ? k * val.count() / total : k % val.count();
      val.fill(index, r, batch.inputs, batch.targets);
    }
    out.push_back(std::move(batch));
  }
  return out;
}

}  // namespace swarmrt::model
