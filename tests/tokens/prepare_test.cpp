// The SentencePiece tokenizer and `data prepare` on real text (a prefix of the Brown corpus).
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "../temp_dir.hpp"
#include "tokens/prepare.hpp"
#include "tokens/shard.hpp"
#include "tokens/tokenizer.hpp"

using namespace swarmrt::tokens;
namespace fs = std::filesystem;

namespace {

// Hermetic: the shim is the one this build made, whatever the caller's environment names.
[[maybe_unused]] const bool shim_from_build = (::unsetenv("SWARMRT_SPM_SHIM"), true);

std::string brown_prefix(size_t n) {
  const char* p = std::getenv("SWARMRT_TEST_DATA");
  std::ifstream in(p ? p : "data/brown.txt", std::ios::binary);
  std::string s(n, '\0');
  in.read(s.data(), std::streamsize(n));
  s.resize(size_t(in.gcount()));
  if (s.size() < n) ADD_FAILURE() << "the Brown corpus is missing (./scripts/fetch_data.sh)";
  return s;
}

}  // namespace

TEST(Tokenizer, BytesAreTheirOwnIds) {
  auto t = byte_tokenizer();
  const std::string text = "caf\xc3\xa9\n";
  const auto ids = t->encode(text);
  ASSERT_EQ(ids.size(), text.size());
  EXPECT_EQ(ids[3], 0xc3u);
  EXPECT_EQ(t->decode(ids), text);
  EXPECT_EQ(t->size(), 256);
}

TEST(Tokenizer, TrainedBpeReproducesItsInputExactly) {
  swarmrt::testing::TempDir d;
  const std::string text = brown_prefix(300'000);
  train_sentencepiece(text, 512, d / "tok.model", 2);
  auto t = load_sentencepiece(d / "tok.model");
  EXPECT_EQ(t->size(), 512);
  // Line breaks, runs of spaces, leading spaces and bytes no piece covers all come back.
  const std::string odd = "  two  spaces\n\nand a line\n\tTab \xe2\x82\xac 12345\n";
  EXPECT_EQ(t->decode(t->encode(odd)), odd);
  const std::string part = text.substr(100'000, 20'000);
  const auto ids = t->encode(part);
  EXPECT_EQ(t->decode(ids), part);
  // BPE merges: far fewer tokens than bytes.
  EXPECT_LT(double(ids.size()), 0.6 * double(part.size()));
  EXPECT_THROW(load_sentencepiece(d / "absent.model"), TokenizerError);
  // The same text gives the same tokenizer (the trainer's sampling is seeded).
  train_sentencepiece(text, 512, d / "again.model", 2);
  EXPECT_EQ(load_sentencepiece(d / "again.model")->encode(part), ids);
}

TEST(Prepare, WritesTokenizerShardsAndCountsThenRefusesToOverwrite) {
  swarmrt::testing::TempDir d;
  const std::string text = brown_prefix(300'000);
  std::ofstream(d / "in.txt", std::ios::binary) << text;
  PrepareOptions o;
  o.inputs = {d / "in.txt"};
  o.vocab_size = 512;
  o.out = d / "out";
  o.shard_tokens = 40'000;  // several training shards
  const auto r = prepare(o);
  EXPECT_EQ(r.vocab_size, 512);
  EXPECT_EQ(r.train_bytes + r.val_bytes, int64_t(text.size()));
  EXPECT_NEAR(double(r.val_bytes) / double(text.size()), 0.05, 0.01);
  EXPECT_GE(r.shards.size(), 3u);
  for (const auto* f : {kTokenizerFile, kDataInfo, "val_000000.bin", "train_000000.bin"})
    EXPECT_TRUE(fs::exists(fs::path(o.out) / f)) << f;
  EXPECT_FALSE(fs::exists(o.out + ".preparing"));

  // The shards hold the text: decoded, validation is the tail and training the rest.
  auto tok = load_sentencepiece((fs::path(o.out) / kTokenizerFile).string());
  std::string train;
  int64_t train_tokens = 0;
  for (const auto& name : r.shards) {
    if (name.rfind("train_", 0) != 0) continue;
    auto shard = MappedShard::open((fs::path(o.out) / name).string(), 512);
    EXPECT_LE(shard->count(), 40'000);
    std::vector<uint32_t> ids;
    for (int64_t i = 0; i < shard->count(); ++i) ids.push_back(uint32_t(shard->id(i)));
    train += tok->decode(ids);
    train_tokens += shard->count();
  }
  EXPECT_EQ(train_tokens, r.train_tokens);
  auto val = MappedShard::open((fs::path(o.out) / "val_000000.bin").string(), 512);
  std::vector<uint32_t> val_ids;
  for (int64_t i = 0; i < val->count(); ++i) val_ids.push_back(uint32_t(val->id(i)));
  EXPECT_EQ(train + tok->decode(val_ids), text);

  // A second prepare into the same directory is refused and leaves it as it was.
  try {
    prepare(o);
    FAIL() << "a prepared directory must not be overwritten";
  } catch (const TokenizerError& e) {
    EXPECT_NE(std::string(e.what()).find("not an empty directory"), std::string::npos) << e.what();
  }
  EXPECT_TRUE(fs::exists(fs::path(o.out) / "val_000000.bin"));

  // With an existing tokenizer: the same ids, no training.
  PrepareOptions again = o;
  again.out = d / "again";
  again.tokenizer = (fs::path(o.out) / kTokenizerFile).string();
  const auto r2 = prepare(again);
  EXPECT_EQ(r2.val_tokens, r.val_tokens);
  EXPECT_EQ(r2.train_tokens, r.train_tokens);
}

TEST(Prepare, BadInputsAreRefusedAndLeaveNothingBehind) {
  swarmrt::testing::TempDir d;
  std::ofstream(d / "tiny.txt") << "one line only";
  PrepareOptions o;
  o.inputs = {d / "tiny.txt"};
  o.out = d / "out";
  EXPECT_THROW(prepare(o), TokenizerError);  // no line break to cut a validation part at
  EXPECT_FALSE(fs::exists(d / "out"));
  o.inputs = {d / "absent.txt"};
  EXPECT_THROW(prepare(o), TokenizerError);
  std::ofstream(d / "garbage.model") << "not a tokenizer";
  o.inputs = {d / "tiny.txt"};
  std::ofstream(d / "tiny.txt") << std::string(2000, 'a') << "\n" << std::string(200, 'b') << "\n";
  o.tokenizer = d / "garbage.model";
  EXPECT_THROW(prepare(o), TokenizerError);
  EXPECT_FALSE(fs::exists(d / "out"));
  EXPECT_FALSE(fs::exists(d / "out.preparing"));
}
