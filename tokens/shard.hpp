// Token shards in llm.c's .bin layout, so shards that llm.c's or nanoGPT-style preparation
// scripts write load as they are:
//
//   header  256 little-endian int32: [0] magic, [1] version, [2] token count, the rest 0
//   body    token count ids, little-endian
//
//   magic 20240520, version 1: uint16 ids (GPT-2's layout; any vocabulary up to 65,536)
//   magic 20240801, version 7: uint32 ids (llm.c's layout for larger vocabularies)
//
// `swarmrt data prepare` writes the uint16 layout when the vocabulary fits and the uint32 one
// above 65,536 ids. Shards are mapped read-only (mmap) and checked whole when opened: a shard
// that is malformed, or holds an id the model has no row for, is refused before training.
#pragma once

#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

namespace swarmrt::tokens {

struct ShardError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

constexpr int32_t kMagic16 = 20240520, kVersion16 = 1;
constexpr int32_t kMagic32 = 20240801, kVersion32 = 7;
constexpr int64_t kHeaderInts = 256, kHeaderBytes = kHeaderInts * 4;

// Bytes per id of the layout a vocabulary needs: 2 up to 65,536 ids, else 4.
int width_for_vocab(int64_t vocab_size);

// One shard, mapped read-only for as long as the object lives.
class MappedShard {
 public:
  // Maps and checks `path`: header, size, and every id below `vocab_size`. Throws ShardError
  // naming the file, the byte offset and the reason.
  static std::shared_ptr<const MappedShard> open(const std::string& path, int64_t vocab_size);
  ~MappedShard();
  MappedShard(const MappedShard&) = delete;
  MappedShard& operator=(const MappedShard&) = delete;

  const std::string& path() const { return path_; }
  int64_t count() const { return count_; }
  int width() const { return width_; }  // 2 or 4
  // The first id; ids are little-endian `width()`-byte integers (this build is x86/ARM LE).
  const unsigned char* ids() const { return base_ + kHeaderBytes; }
  int64_t id(int64_t i) const;

 private:
  MappedShard() = default;
  std::string path_;
  const unsigned char* base_ = nullptr;
  size_t length_ = 0;
  int64_t count_ = 0;
  int width_ = 2;
};

// Writes `ids` as one shard of `width` bytes an id (2 or 4), through a temporary file renamed
// into place, so a reader never sees half a shard.
void write_shard(const std::string& path, const std::vector<uint32_t>& ids, int width);

}  // namespace swarmrt::tokens
