#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <fstream>
#include <set>

#include "model/data.hpp"
#include "test_util.hpp"

using namespace swarmrt::model;

namespace {
std::string text_of(size_t n) {
  std::string s;
  for (size_t i = 0; i < n; ++i) s.push_back(static_cast<char>('a' + (i * 7 + i / 13) % 26));
  return s;
}
}  // namespace

TEST(Data, SplitTakesTheTailForValidation) {
  auto c = TextCorpus::from_text(text_of(1000), 0.1);
  EXPECT_EQ(c.train().size(), 900u);
  EXPECT_EQ(c.val().size(), 100u);
  EXPECT_EQ(c.train() + c.val(), text_of(1000));
  EXPECT_THROW(TextCorpus::from_text("abc", 0.1), DataError);
}

TEST(Data, DirectoryIsReadInPathOrder) {
  swarmrt::testing::TempDir dir;
  std::ofstream(dir / "b.txt") << "world-world-world-world";
  std::ofstream(dir / "a.txt") << "hello-hello-hello-hello-";
  auto c = TextCorpus::load(dir.str(), 0.25);
  EXPECT_EQ(c.train() + c.val(), "hello-hello-hello-hello-world-world-world-world");
  try {
    TextCorpus::load(dir / "missing.txt", 0.1);
    FAIL() << "a missing path must be refused";
  } catch (const DataError& e) {
    EXPECT_NE(std::string(e.what()).find("missing.txt"), std::string::npos);
  }
}

TEST(Data, WindowsGiveNextByteTargets) {
  const std::string text = text_of(100);
  Windows w(&text, 8);
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
  Windows w(&text, 16);
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
  Windows w(&text, 16);
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
  Windows w(&text, 16);
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
  Windows w(&text, 16);
  auto a = validation_batches(w, 3, 4), b = validation_batches(w, 3, 4);
  ASSERT_EQ(a.size(), 3u);
  for (size_t i = 0; i < a.size(); ++i) EXPECT_TRUE(at::equal(a[i].inputs, b[i].inputs));
  EXPECT_FALSE(at::equal(a[0].inputs, a[1].inputs));
}
