#include "model/data.hpp"

#include <ATen/ATen.h>
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

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

// splitmix64: a fixed, portable mixing of (seed, shard, epoch) into one RNG seed.
uint64_t mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}
}  // namespace

TextCorpus TextCorpus::load(const std::string& path, double val_fraction) {
  std::error_code ec;
  if (!fs::exists(path, ec))
    throw DataError(path +
                    ": data path does not exist (run ./scripts/fetch_data.sh for the "
                    "Brown corpus, or set data.path)");
  std::string text;
  if (fs::is_directory(path)) {
    std::vector<fs::path> files;
    for (const auto& e : fs::recursive_directory_iterator(path))
      if (e.is_regular_file()) files.push_back(e.path());
    std::sort(files.begin(), files.end());
    for (const auto& f : files) text += read_file(f);
  } else {
    text = read_file(path);
  }
  try {
    return from_text(std::move(text), val_fraction);
  } catch (const DataError& e) {
    throw DataError(path + ": " + e.what());
  }
}

TextCorpus TextCorpus::from_text(std::string text, double val_fraction) {
  if (!(val_fraction > 0 && val_fraction < 1)) throw DataError("val_fraction must be in (0, 1)");
  const auto n = static_cast<int64_t>(text.size());
  const auto n_val = static_cast<int64_t>(static_cast<double>(n) * val_fraction);
  if (n_val < 2 || n - n_val < 2)
    throw DataError("corpus of " + std::to_string(n) + " bytes is too small to split");
  TextCorpus c;
  c.val_ = text.substr(static_cast<size_t>(n - n_val));
  text.resize(static_cast<size_t>(n - n_val));
  c.train_ = std::move(text);
  return c;
}

Windows::Windows(const std::string* text, int64_t block_size)
    : text_(text),
      block_(block_size),
      count_((static_cast<int64_t>(text->size()) - 1) / block_size) {
  if (count_ < 1)
    throw DataError("text of " + std::to_string(text->size()) + " bytes holds no window of " +
                    std::to_string(block_size + 1) + " bytes");
}

void Windows::fill(int64_t index, int64_t row, at::Tensor& inputs, at::Tensor& targets) const {
  const auto* bytes = reinterpret_cast<const unsigned char*>(text_->data()) + index * block_;
  auto* in = inputs.data_ptr<int64_t>() + row * block_;
  auto* out = targets.data_ptr<int64_t>() + row * block_;
  for (int64_t t = 0; t < block_; ++t) {
    in[t] = bytes[t];
    out[t] = bytes[t + 1];
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
  std::mt19937_64 rng(mix(seed_ ^ mix(static_cast<uint64_t>(shard_) ^ mix(pos_.epoch))));
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
