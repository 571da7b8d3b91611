// Token shards against llm.c's documented layout, built here byte by byte: a header of 256
// little-endian int32 (magic, version, token count, zeros), then the ids.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "../temp_dir.hpp"
#include "tokens/shard.hpp"

using namespace swarmrt::tokens;
namespace fs = std::filesystem;

namespace {

void le(std::string& out, uint64_t v, int bytes) {
  for (int b = 0; b < bytes; ++b) out.push_back(static_cast<char>((v >> (8 * b)) & 0xff));
}

// A shard exactly as llm.c's write_datafile lays it out.
std::string llmc_bytes(int32_t magic, int32_t version, const std::vector<uint32_t>& ids, int width,
                       int64_t count = -1) {
  std::string s;
  le(s, uint32_t(magic), 4);
  le(s, uint32_t(version), 4);
  le(s, uint32_t(count < 0 ? int64_t(ids.size()) : count), 4);
  for (int i = 3; i < 256; ++i) le(s, 0, 4);
  for (uint32_t id : ids) le(s, id, width);
  return s;
}

void put(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary) << bytes;
}

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

// The message of the ShardError opening `path` throws, or "" if it opens.
std::string refusal(const std::string& path, int64_t vocab) {
  try {
    MappedShard::open(path, vocab);
  } catch (const ShardError& e) {
    return e.what();
  }
  return "";
}

const std::vector<uint32_t> kIds = {0, 1, 255, 256, 50256, 65535, 7, 7, 42};

}  // namespace

TEST(Shard, Uint16RoundTripMatchesLlmcLayoutByteForByte) {
  swarmrt::testing::TempDir d;
  const auto expected = llmc_bytes(20240520, 1, kIds, 2);
  ASSERT_EQ(expected.size(), 1024u + 2 * kIds.size());
  write_shard(d / "ours.bin", kIds, 2);
  EXPECT_EQ(slurp(d / "ours.bin"), expected);
  EXPECT_FALSE(fs::exists(d / "ours.bin.tmp"));

  put(d / "llmc.bin", expected);
  auto shard = MappedShard::open(d / "llmc.bin", 65536);
  EXPECT_EQ(shard->count(), int64_t(kIds.size()));
  EXPECT_EQ(shard->width(), 2);
  for (size_t i = 0; i < kIds.size(); ++i) EXPECT_EQ(shard->id(int64_t(i)), int64_t(kIds[i]));
}

TEST(Shard, Uint32LayoutHoldsVocabulariesAbove65536) {
  swarmrt::testing::TempDir d;
  std::vector<uint32_t> ids = kIds;
  ids.push_back(128255);
  EXPECT_EQ(width_for_vocab(65536), 2);
  EXPECT_EQ(width_for_vocab(65537), 4);
  write_shard(d / "big.bin", ids, 4);
  EXPECT_EQ(slurp(d / "big.bin"), llmc_bytes(20240801, 7, ids, 4));
  auto shard = MappedShard::open(d / "big.bin", 128256);
  EXPECT_EQ(shard->width(), 4);
  EXPECT_EQ(shard->id(int64_t(ids.size()) - 1), 128255);
  EXPECT_THROW(write_shard(d / "narrow.bin", ids, 2), ShardError);  // 128255 needs 32 bits
}

TEST(Shard, MalformedShardsAreRefusedWithFileOffsetAndReason) {
  swarmrt::testing::TempDir d;
  struct Case {
    std::string name, bytes, offset, reason;
  };
  const auto good = llmc_bytes(20240520, 1, kIds, 2);
  const std::vector<Case> cases = {
      {"magic.bin", llmc_bytes(12345, 1, kIds, 2), "at byte 0:", "magic 12345"},
      {"version.bin", llmc_bytes(20240520, 2, kIds, 2), "at byte 4:", "version 2"},
      {"header.bin", good.substr(0, 100), "at byte 100:", "truncated header"},
      {"body.bin", good.substr(0, good.size() - 3), "at byte " + std::to_string(good.size() - 3),
       "truncated body"},
      {"trailing.bin", good + "xy", "at byte " + std::to_string(good.size()), "2 bytes follow"},
      {"count.bin", llmc_bytes(20240520, 1, kIds, 2, 1000), "at byte ", "truncated body"},
  };
  for (const auto& c : cases) {
    put(d / c.name, c.bytes);
    const auto why = refusal(d / c.name, 65536);
    EXPECT_NE(why.find(d / c.name), std::string::npos) << c.name << ": " << why;
    EXPECT_NE(why.find(c.offset), std::string::npos) << c.name << ": " << why;
    EXPECT_NE(why.find(c.reason), std::string::npos) << c.name << ": " << why;
  }
  EXPECT_NE(refusal(d / "absent.bin", 65536).find("cannot open"), std::string::npos);
}

TEST(Shard, AnIdAtOrAboveTheVocabularyIsRefusedWhereItIs) {
  swarmrt::testing::TempDir d;
  put(d / "ids.bin", llmc_bytes(20240520, 1, kIds, 2));
  // kIds[4] = 50256 is the first id not below 50000: token 4, at byte 1024 + 4 * 2.
  const auto why = refusal(d / "ids.bin", 50000);
  EXPECT_NE(why.find("at byte 1032"), std::string::npos) << why;
  EXPECT_NE(why.find("token 4 has id 50256"), std::string::npos) << why;
  EXPECT_NE(why.find("model.vocab_size (50000)"), std::string::npos) << why;
  EXPECT_EQ(refusal(d / "ids.bin", 65536), "");
}
