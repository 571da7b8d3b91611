#include "tokens/shard.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>

namespace swarmrt::tokens {
namespace {

int32_t le32(const unsigned char* p) {
  return static_cast<int32_t>(uint32_t(p[0]) | uint32_t(p[1]) << 8 | uint32_t(p[2]) << 16 |
                              uint32_t(p[3]) << 24);
}

void put_le32(std::string& out, uint32_t v) {
  for (int b = 0; b < 4; ++b) out.push_back(static_cast<char>((v >> (8 * b)) & 0xff));
}

[[noreturn]] void refuse(const std::string& path, int64_t offset, const std::string& why) {
  throw ShardError(path + ": at byte " + std::to_string(offset) + ": " + why);
}

}  // namespace

int width_for_vocab(int64_t vocab_size) {
  return vocab_size <= 65536 ? 2 : 4;
}

int64_t MappedShard::id(int64_t i) const {
  const unsigned char* p = ids() + i * width_;
  if (width_ == 2) return int64_t(p[0]) | int64_t(p[1]) << 8;
  return int64_t(uint32_t(le32(p)));
}

std::shared_ptr<const MappedShard> MappedShard::open(const std::string& path, int64_t vocab_size) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw ShardError(path + ": cannot open shard: " + std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    throw ShardError(path + ": not a regular file");
  }
  const auto size = static_cast<int64_t>(st.st_size);
  if (size < kHeaderBytes) {
    ::close(fd);
    refuse(path, size,
           "truncated header: the file holds " + std::to_string(size) + " bytes, a shard's " +
               "header alone is " + std::to_string(kHeaderBytes));
  }
  void* mem = ::mmap(nullptr, static_cast<size_t>(size), PROT_READ, MAP_PRIVATE, fd, 0);
  ::close(fd);  // the mapping keeps the file
  if (mem == MAP_FAILED) throw ShardError(path + ": cannot map shard: " + std::strerror(errno));
  std::shared_ptr<MappedShard> shard(new MappedShard());
  shard->path_ = path;
  shard->base_ = static_cast<const unsigned char*>(mem);
  shard->length_ = static_cast<size_t>(size);

  const int32_t magic = le32(shard->base_), version = le32(shard->base_ + 4);
  if (magic == kMagic16) {
    shard->width_ = 2;
    if (version != kVersion16)
      refuse(path, 4,
             "version " + std::to_string(version) + " with magic " + std::to_string(kMagic16) +
                 " (uint16 ids) must be " + std::to_string(kVersion16));
  } else if (magic == kMagic32) {
    shard->width_ = 4;
    if (version != kVersion32)
      refuse(path, 4,
             "version " + std::to_string(version) + " with magic " + std::to_string(kMagic32) +
                 " (uint32 ids) must be " + std::to_string(kVersion32));
  } else {
    refuse(path, 0,
           "magic " + std::to_string(magic) + " is not a token shard's (" +
               std::to_string(kMagic16) + " for uint16 ids, " + std::to_string(kMagic32) +
               " for uint32)");
  }
  const int32_t count = le32(shard->base_ + 8);
  if (count < 0) refuse(path, 8, "negative token count " + std::to_string(count));
  shard->count_ = count;
  const int64_t body = size - kHeaderBytes, want = int64_t(count) * shard->width_;
  if (body < want)
    refuse(path, size,
           "truncated body: the header counts " + std::to_string(count) + " tokens (" +
               std::to_string(want) + " bytes) but " + std::to_string(body) +
               " bytes follow the header");
  if (body > want)
    refuse(path, kHeaderBytes + want,
           std::to_string(body - want) + " bytes follow the " + std::to_string(count) +
               " tokens the header counts");
  if (count < 2) refuse(path, 8, "holds " + std::to_string(count) + " tokens, fewer than 2");
  // Every id, once: a model has no embedding row for an id at or above its vocabulary, and the
  // fault would otherwise surface as an index error in the middle of a run.
  for (int64_t i = 0; i < shard->count_; ++i) {
    const int64_t v = shard->id(i);
    if (v >= vocab_size)
      refuse(path, kHeaderBytes + i * shard->width_,
             "token " + std::to_string(i) + " has id " + std::to_string(v) +
                 ", not below model.vocab_size (" + std::to_string(vocab_size) + ")");
  }
  return shard;
}

MappedShard::~MappedShard() {
  if (base_) ::munmap(const_cast<unsigned char*>(base_), length_);
}

void write_shard(const std::string& path, const std::vector<uint32_t>& ids, int width) {
  if (width != 2 && width != 4) throw ShardError(path + ": ids are 2 or 4 bytes wide");
  if (ids.size() > size_t(INT32_MAX))
    throw ShardError(path + ": " + std::to_string(ids.size()) +
                     " tokens do not fit one shard's int32 count");
  std::string header;
  put_le32(header, uint32_t(width == 2 ? kMagic16 : kMagic32));
  put_le32(header, uint32_t(width == 2 ? kVersion16 : kVersion32));
  put_le32(header, uint32_t(ids.size()));
  header.resize(kHeaderBytes, '\0');
  std::string body;
  body.reserve(ids.size() * size_t(width));
  for (uint32_t v : ids) {
    if (width == 2 && v > 0xffff)
      throw ShardError(path + ": id " + std::to_string(v) + " does not fit 16 bits");
    for (int b = 0; b < width; ++b) body.push_back(static_cast<char>((v >> (8 * b)) & 0xff));
  }
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out.write(header.data(), std::streamsize(header.size()));
    out.write(body.data(), std::streamsize(body.size()));
    out.flush();
    if (!out) {
      std::remove(tmp.c_str());
      throw ShardError(tmp + ": cannot write shard");
    }
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) {
    std::remove(tmp.c_str());
    throw ShardError(path + ": cannot move shard into place: " + ec.message());
  }
}

}  // namespace swarmrt::tokens
