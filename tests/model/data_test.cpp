#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <set>

#include "model/data.hpp"
#include "test_util.hpp"
#include "tokens/shard.hpp"

using namespace swarmrt::model;
using namespace swarmrt::config;

namespace {
std::string text_of(size_t n) {
  std::string s;
  for (size_t i = 0; i < n; ++i) s.push_back(static_cast<char>('a' + (i * 7 + i / 13) % 26));
  return s;
}
}  // namespace

TEST(Data, SplitTakesTheTailForValidation) {
  auto c = Corpus::from_text(text_of(1000), 0.1);
  EXPECT_EQ(c.train_tokens(), 900);
  EXPECT_EQ(c.val_tokens(), 100);
  EXPECT_EQ(swarmrt::testing::bytes_of(c.train()) + swarmrt::testing::bytes_of(c.val()),
            text_of(1000));
  EXPECT_THROW(Corpus::from_text("abc", 0.1), DataError);
}

TEST(Data, DirectoryIsReadInPathOrder) {
  swarmrt::testing::TempDir dir;
  std::ofstream(dir / "b.txt") << "world-world-world-world";
  std::ofstream(dir / "a.txt") << "hello-hello-hello-hello-";
  auto c = Corpus::load_text(dir.str(), 0.25);
  EXPECT_EQ(swarmrt::testing::bytes_of(c.train()) + swarmrt::testing::bytes_of(c.val()),
            "hello-hello-hello-hello-world-world-world-world");
  try {
    Corpus::load_text(dir / "missing.txt", 0.1);
    FAIL() << "a missing path must be refused";
  } catch (const DataError& e) {
    EXPECT_NE(std::string(e.what()).find("missing.txt"), std::string::npos);
  }
}

TEST(Data, WindowsGiveNextByteTargets) {
  const std::string text = text_of(100);
  Windows w(text_parts(text), 8);
  EXPECT_EQ(w.count(), (100 - 1) / 8);
  auto in = at::empty({1, 8}, at::kLong), out = at::empty({1, 8}, at::kLong);
  w.fill(3, 0, in, out);
  for (int64_t t = 0; t < 8; ++t) {
    EXPECT_EQ(in[0][t].item<int64_t>(), static_cast<unsigned char>(text[24 + t]));
    EXPECT_EQ(out[0][t].item<int64_t>(), static_cast<unsigned char>(text[25 + t]));
  }
}

TEST(Data, ShardsAreDisjointAndComplete) {
  const std::string text = text_of(10000);
  Windows w(text_parts(text), 16);
  for (int64_t K : {1, 2, 3, 5}) {
    std::set<int64_t> seen;
    int64_t total = 0;
    for (int64_t k = 0; k < K; ++k) {
      ShardLoader loader(w, k, K, 99);
      auto idx = loader.peek(loader.shard_size());  // exactly one epoch
      for (auto i : idx) {
        EXPECT_EQ(i % K, k);
        EXPECT_TRUE(seen.insert(i).second) << "window " << i << " served twice";
      }
      total += static_cast<int64_t>(idx.size());
    }
    EXPECT_EQ(total, w.count());
    EXPECT_EQ(static_cast<int64_t>(seen.size()), w.count());
  }
}

TEST(Data, OrderIsDeterministicAndReshuffledPerEpoch) {
  const std::string text = text_of(5000);
  Windows w(text_parts(text), 16);
  ShardLoader a(w, 0, 1, 5), b(w, 0, 1, 5), c(w, 0, 1, 6);
  const auto n = a.shard_size();
  auto two_epochs = a.peek(2 * n);
  EXPECT_EQ(two_epochs, b.peek(2 * n));
  EXPECT_NE(two_epochs, c.peek(2 * n));
  std::vector<int64_t> e0(two_epochs.begin(), two_epochs.begin() + n),
      e1(two_epochs.begin() + n, two_epochs.end());
  EXPECT_NE(e0, e1);
  std::sort(e0.begin(), e0.end());
  std::sort(e1.begin(), e1.end());
  EXPECT_EQ(e0, e1);  // each epoch is a permutation of the shard
}

TEST(Data, SeekResumesTheSameStream) {
  const std::string text = text_of(5000);
  Windows w(text_parts(text), 16);
  ShardLoader a(w, 1, 2, 5);
  a.next(7);
  a.next(150);  // crosses an epoch boundary
  const auto pos = a.position();
  const auto expected = a.next(9);
  ShardLoader b(w, 1, 2, 5);
  b.seek(pos);
  const auto got = b.next(9);
  EXPECT_TRUE(at::equal(expected.inputs, got.inputs));
  EXPECT_TRUE(at::equal(expected.targets, got.targets));
  EXPECT_THROW(b.seek({0, b.shard_size() + 1}), DataError);
}

TEST(Data, ValidationBatchesAreFixed) {
  const std::string text = text_of(5000);
  Windows w(text_parts(text), 16);
  auto a = validation_batches(w, 3, 4), b = validation_batches(w, 3, 4);
  ASSERT_EQ(a.size(), 3u);
  for (size_t i = 0; i < a.size(); ++i) EXPECT_TRUE(at::equal(a[i].inputs, b[i].inputs));
  EXPECT_FALSE(at::equal(a[0].inputs, a[1].inputs));
}

TEST(Data, TokenShardsLoadAsACorpusAndWindowsStayInsideEachShard) {
  swarmrt::testing::TempDir dir;
  std::vector<uint32_t> a, b, v;
  for (uint32_t i = 0; i < 40; ++i) a.push_back(1000 + i);
  for (uint32_t i = 0; i < 25; ++i) b.push_back(2000 + i);
  for (uint32_t i = 0; i < 30; ++i) v.push_back(3000 + i);
  swarmrt::tokens::write_shard(dir / "train_000000.bin", a, 2);
  swarmrt::tokens::write_shard(dir / "train_000001.bin", b, 2);
  swarmrt::tokens::write_shard(dir / "val_000000.bin", v, 2);
  DataConfig data;
  data.path = dir.str();
  data.format = DataFormat::tokens;
  auto c = Corpus::load(data, 4096);
  EXPECT_EQ(c.train_tokens(), 65);
  EXPECT_EQ(c.val_tokens(), 30);
  EXPECT_TRUE(c.tokenizer_file().empty());
  EXPECT_TRUE(std::isnan(c.bits_per_byte(1.0)));  // no data.json: the text's size is unknown

  Windows w(c.train(), 8);
  EXPECT_EQ(w.count(), (40 - 1) / 8 + (25 - 1) / 8);  // 4 + 3: none spans the two shards
  auto in = at::empty({1, 8}, at::kLong), out = at::empty({1, 8}, at::kLong);
  w.fill(5, 0, in, out);  // the second window of the second shard
  for (int64_t t = 0; t < 8; ++t) {
    EXPECT_EQ(in[0][t].item<int64_t>(), 2008 + t);
    EXPECT_EQ(out[0][t].item<int64_t>(), 2009 + t);
  }

  // data.json gives the validation text's bytes: 30 tokens of 90 bytes, 3 bytes a token.
  std::ofstream(dir / "data.json") << R"({"val_tokens": 30, "val_bytes": 90})";
  auto counted = Corpus::load(data, 4096);
  EXPECT_NEAR(counted.bits_per_byte(3 * std::log(2.0)), 1.0, 1e-12);
  std::ofstream(dir / "data.json") << R"({"val_tokens": 31, "val_bytes": 90})";
  EXPECT_THROW(Corpus::load(data, 4096), DataError);
  std::ofstream(dir / "data.json") << R"({"val_tokens": 30, "val_bytes")";  // torn
  EXPECT_THROW(Corpus::load(data, 4096), DataError);
  std::filesystem::remove(dir / "data.json");

  // An id the model has no row for is refused, naming the shard.
  try {
    Corpus::load(data, 3010);
    FAIL() << "id 3010 of the validation shard is not below 3010";
  } catch (const swarmrt::tokens::ShardError& e) {
    EXPECT_NE(std::string(e.what()).find("val_000000.bin: at byte 1044"), std::string::npos)
        << e.what();
  }
  // Without a validation shard nothing loads.
  std::filesystem::remove(dir / "val_000000.bin");
  try {
    Corpus::load(data, 4096);
    FAIL() << "a directory without a validation shard must be refused";
  } catch (const DataError& e) {
    EXPECT_NE(std::string(e.what()).find("validation shard"), std::string::npos) << e.what();
  }
}

TEST(Data, BytesAreOneBytePerToken) {
  auto c = Corpus::from_text(text_of(1000), 0.1);
  EXPECT_NEAR(c.bits_per_byte(std::log(2.0)), 1.0, 1e-12);
  EXPECT_NEAR(c.train_bits_per_byte(2 * std::log(2.0)), 2.0, 1e-12);
  EXPECT_EQ(format_bpb(std::nan("")), "n/a");
  EXPECT_EQ(format_bpb(1.23456), "1.2346");
}
