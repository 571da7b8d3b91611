#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <zlib.h>
#include <csignal>
#include <filesystem>
#include <fstream>

#include "model/checkpoint.hpp"
#include "model/gpt.hpp"
#include "model/optim.hpp"
#include "test_util.hpp"

using namespace swarmrt::model;
using namespace swarmrt::config;
using swarmrt::testing::TempDir;
namespace fs = std::filesystem;

namespace {
Checkpoint sample_checkpoint() {
  Checkpoint c;
  c.meta_json = R"({"step": 12})";
  c.tensors.emplace_back("f32", at::arange(12, at::kFloat).reshape({3, 4}));
  c.tensors.emplace_back("bf16", at::randn({5}).to(at::kBFloat16));
  c.tensors.emplace_back("i64", at::arange(4, at::kLong));
  c.tensors.emplace_back("scalar", at::scalar_tensor(3.5, at::kDouble));
  c.blobs["opt"] = std::string("\0\1binary", 8);
  return c;
}

std::string error_of(const std::string& path) {
  try {
    read_checkpoint(path);
  } catch (const CheckpointError& e) {
    return e.what();
  }
  return "";
}

std::string bytes_of(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// A good checkpoint file, alone in its directory, that a failed write must leave as it was.
struct GoodFile {
  TempDir dir;
  std::string path = dir / "g.ckpt";
  std::string before;
  GoodFile() {
    write_checkpoint(path, sample_checkpoint());
    before = bytes_of(path);
  }
  // Its bytes unchanged, and nothing else (no temporary) beside it.
  void expect_kept() {
    EXPECT_EQ(bytes_of(path), before);
    EXPECT_EQ(std::distance(fs::directory_iterator(dir.str()), fs::directory_iterator{}), 1);
  }
};
}  // namespace

TEST(Checkpoint, RoundTrip) {
  TempDir dir;
  const auto path = dir / "a.ckpt";
  const auto c = sample_checkpoint();
  write_checkpoint(path, c);
  const auto r = read_checkpoint(path);
  EXPECT_EQ(r.meta_json, c.meta_json);
  ASSERT_EQ(r.tensors.size(), c.tensors.size());
  for (size_t i = 0; i < c.tensors.size(); ++i) {
    EXPECT_EQ(r.tensors[i].first, c.tensors[i].first);
    EXPECT_EQ(r.tensors[i].second.scalar_type(), c.tensors[i].second.scalar_type());
    EXPECT_TRUE(at::equal(r.tensors[i].second, c.tensors[i].second)) << c.tensors[i].first;
  }
  EXPECT_EQ(r.blobs.at("opt"), c.blobs.at("opt"));
  // No temporary file is left beside it.
  EXPECT_EQ(std::distance(fs::directory_iterator(dir.str()), fs::directory_iterator{}), 1);
}

TEST(Checkpoint, ModelAndOptimizerRoundTrip) {
  TempDir dir;
  GPT a(swarmrt::testing::micro_gpt(), StageSpec{}, 1),
      b(swarmrt::testing::micro_gpt(), StageSpec{}, 2);
  TrainConfig t;
  auto opt_a = make_adamw(*a, t);
  auto ids = at::randint(0, 256, {2, 16}, at::kLong);
  lm_loss(a->forward(ids), ids).backward();
  opt_a->step();
  Checkpoint c;
  c.tensors = parameters_of(*a);
  c.blobs["optimizer"] = optimizer_bytes(*opt_a);
  write_checkpoint(dir / "m.ckpt", c);

  auto r = read_checkpoint(dir / "m.ckpt");
  load_parameters(*b, r, "m.ckpt");
  for (auto& p : a->named_parameters())
    EXPECT_TRUE(at::equal(p.value(), b->named_parameters()[p.key()])) << p.key();
  auto opt_b = make_adamw(*b, t);
  load_optimizer_bytes(*opt_b, r.blobs.at("optimizer"));
  // Same state: one more identical step keeps the two models identical.
  for (auto* m : {&a, &b}) {
    (*m)->zero_grad();
    lm_loss((*m)->forward(ids), ids).backward();
  }
  opt_a->step();
  opt_b->step();
  for (auto& p : a->named_parameters())
    EXPECT_TRUE(at::equal(p.value(), b->named_parameters()[p.key()])) << p.key();
}

TEST(Checkpoint, LoadRefusesMismatchedModel) {
  GPT small(swarmrt::testing::micro_gpt(), StageSpec{}, 1);
  auto cfg = swarmrt::testing::micro_gpt();
  cfg.n_embd = 64;
  GPT wide(cfg, StageSpec{}, 1);
  Checkpoint c;
  c.tensors = parameters_of(*small);
  try {
    load_parameters(*wide, c, "x.ckpt");
    FAIL() << "a differently shaped model must be refused";
  } catch (const CheckpointError& e) {
    EXPECT_NE(std::string(e.what()).find("shape"), std::string::npos) << e.what();
  }
  GPT stage1(swarmrt::testing::micro_gpt(), StageSpec{1, 2}, 1);
  Checkpoint partial;
  partial.tensors = parameters_of(*GPT(swarmrt::testing::micro_gpt(), StageSpec{0, 2}, 1));
  EXPECT_THROW(load_parameters(*stage1, partial, "x.ckpt"), CheckpointError);
}

TEST(Checkpoint, TruncatedFileIsRefusedWithItsName) {
  TempDir dir;
  const auto path = dir / "t.ckpt";
  write_checkpoint(path, sample_checkpoint());
  fs::resize_file(path, fs::file_size(path) - 5);
  const auto msg = error_of(path);
  EXPECT_NE(msg.find(path), std::string::npos) << msg;
  EXPECT_NE(msg.find("truncated"), std::string::npos) << msg;
  fs::resize_file(path, 10);
  EXPECT_NE(error_of(path).find("truncated"), std::string::npos);
}

TEST(Checkpoint, CorruptByteIsRefused) {
  TempDir dir;
  const auto path = dir / "c.ckpt";
  write_checkpoint(path, sample_checkpoint());
  auto data = bytes_of(path);
  data[data.size() / 2] ^= 0x40;
  std::ofstream(path, std::ios::binary | std::ios::trunc) << data;
  EXPECT_NE(error_of(path).find("checksum mismatch"), std::string::npos);
  std::ofstream(path, std::ios::binary | std::ios::trunc) << "not a checkpoint at all, no";
  EXPECT_NE(error_of(path).find("bad magic"), std::string::npos);
}

TEST(Checkpoint, FailedWriteKeepsTheGoodFile) {
  GoodFile good;
  Checkpoint bad;
  bad.tensors.emplace_back("complex", at::zeros({2}, at::kComplexFloat));
  EXPECT_THROW(write_checkpoint(good.path, bad), CheckpointError);
  good.expect_kept();
}

// The disk fills mid-write (here: a file-size limit of 4 KiB, which makes write(2) fail with
// EFBIG the way a full disk fails it with ENOSPC): the error names the problem, the good file
// stays as it was, and no temporary file is left behind.
TEST(Checkpoint, AWriteThatFailsMidFileKeepsTheGoodFileAndLeavesNoTemporary) {
  GoodFile good;
  Checkpoint big;
  big.tensors.emplace_back("w", at::randn({64, 1024}));  // 256 KiB
  const auto old_handler = std::signal(SIGXFSZ, SIG_IGN);
  rlimit old_limit{};
  ASSERT_EQ(::getrlimit(RLIMIT_FSIZE, &old_limit), 0);
  rlimit small = old_limit;
  small.rlim_cur = 4096;
  ASSERT_EQ(::setrlimit(RLIMIT_FSIZE, &small), 0);
  std::string why;
  try {
    write_checkpoint(good.path, big);
  } catch (const CheckpointError& e) {
    why = e.what();
  }
  ::setrlimit(RLIMIT_FSIZE, &old_limit);
  std::signal(SIGXFSZ, old_handler);
  EXPECT_NE(why.find("writing the checkpoint failed: File too large"), std::string::npos) << why;
  good.expect_kept();
}

TEST(Checkpoint, DirKeepsNewestAndFallsBackPastCorruptOne) {
  TempDir dir;
  CheckpointDir ckpts(dir / "checkpoints");
  for (int64_t step : {10, 20, 30, 40}) {
    auto c = sample_checkpoint();
    c.meta_json = "{\"step\": " + std::to_string(step) + "}";
    ckpts.save(step, c, 3);
  }
  auto files = ckpts.list();
  ASSERT_EQ(files.size(), 3u);
  EXPECT_NE(files[0].find("step_00000040.ckpt"), std::string::npos);
  EXPECT_NE(files[2].find("step_00000020.ckpt"), std::string::npos);

  fs::resize_file(files[0], fs::file_size(files[0]) / 2);
  std::vector<std::string> refused;
  auto found = ckpts.newest_valid(
      [&](const std::string& p, const std::string& why) { refused.push_back(p + ": " + why); });
  ASSERT_TRUE(found.has_value());
  EXPECT_EQ(found->first, files[1]);
  EXPECT_EQ(found->second.meta_json, "{\"step\": 30}");
  ASSERT_EQ(refused.size(), 1u);
  EXPECT_NE(refused[0].find("truncated"), std::string::npos);
}

namespace {
// A checkpoint file with a valid checksum around `body` (the layout of checkpoint.cpp).
void write_raw(const std::string& path, const std::string& body) {
  std::string file("SWRTCKPT", 8);
  const uint32_t version = 1;
  const uint32_t crc =
      static_cast<uint32_t>(crc32(crc32(0L, Z_NULL, 0), reinterpret_cast<const Bytef*>(body.data()),
                                  static_cast<uInt>(body.size())));
  const uint64_t len = body.size();
  file.append(reinterpret_cast<const char*>(&version), 4);
  file.append(reinterpret_cast<const char*>(&crc), 4);
  file.append(reinterpret_cast<const char*>(&len), 8);
  file += body;
  std::ofstream(path, std::ios::binary) << file;
}
template <class T>
void put(std::string& s, T v) {
  s.append(reinterpret_cast<const char*>(&v), sizeof(T));
}
}  // namespace

// A header that asks for a 4 TiB tensor it does not bring is refused before anything is
// allocated (before, at::empty tried to allocate it and the error was not a CheckpointError,
// so the fallback to an older checkpoint never ran).
TEST(Checkpoint, AHugeTensorHeaderIsRefusedBeforeAllocating) {
  TempDir dir;
  std::string body;
  put<uint64_t>(body, 2);
  body += "{}";
  put<uint64_t>(body, 1);  // one tensor
  put<uint32_t>(body, 1);
  body += "w";
  put<int32_t>(body, static_cast<int32_t>(at::kFloat));
  put<uint32_t>(body, 2);
  put<int64_t>(body, int64_t{1} << 20);
  put<int64_t>(body, int64_t{1} << 20);
  put<uint64_t>(body, uint64_t{4} << 40);  // bytes the shape needs, none of them present
  const auto path = dir / "huge.ckpt";
  write_raw(path, body);
  const auto msg = error_of(path);
  EXPECT_NE(msg.find("body ends inside tensor data"), std::string::npos) << msg;
}

// Names are zero-padded to 8 digits; step 100000000 has 9 and must still be the newest.
TEST(Checkpoint, StepsPastEightDigitsSortByNumber) {
  TempDir dir;
  CheckpointDir ckpts(dir / "checkpoints");
  ckpts.save(99999999, sample_checkpoint(), 5);
  ckpts.save(100000000, sample_checkpoint(), 5);
  ckpts.save(5, sample_checkpoint(), 5);
  const auto files = ckpts.list();
  ASSERT_EQ(files.size(), 3u);
  EXPECT_NE(files[0].find("step_100000000.ckpt"), std::string::npos) << files[0];
  EXPECT_NE(files[1].find("step_99999999.ckpt"), std::string::npos) << files[1];
  EXPECT_TRUE(ckpts.has(100000000));
  EXPECT_FALSE(ckpts.has(6));
}

// A write that never finished (a crash between write and rename) leaves a temporary file;
// it is removed when the run directory is opened again, and never taken for a checkpoint.
TEST(Checkpoint, StaleTemporaryFilesAreRemoved) {
  TempDir dir;
  CheckpointDir ckpts(dir / "checkpoints");
  ckpts.save(4, sample_checkpoint(), 3);
  std::ofstream(dir / "checkpoints/step_00000008.ckpt.tmp-4242") << "half a checkpoint";
  ASSERT_EQ(ckpts.list().size(), 1u);
  EXPECT_EQ(ckpts.remove_stale_temporaries(), 1u);
  EXPECT_FALSE(fs::exists(dir / "checkpoints/step_00000008.ckpt.tmp-4242"));
  EXPECT_EQ(ckpts.list().size(), 1u);
}

// A check that throws (as a LibTorch deserialization error does) makes newest_valid fall back
// to the previous file, like a bad checksum.
TEST(Checkpoint, ACheckThatThrowsFallsBackToThePreviousFile) {
  TempDir dir;
  CheckpointDir ckpts(dir / "checkpoints");
  ckpts.save(10, sample_checkpoint(), 3);
  ckpts.save(20, sample_checkpoint(), 3);
  std::vector<std::string> refused;
  auto found = ckpts.newest_valid(
      [&](const std::string& p, const std::string& why) { refused.push_back(p + ": " + why); },
      [](const std::string& p, const Checkpoint&) {
        if (p.find("step_00000020") != std::string::npos)
          throw c10::Error("PytorchStreamReader failed reading zip archive", "test");
      });
  ASSERT_TRUE(found.has_value());
  EXPECT_NE(found->first.find("step_00000010"), std::string::npos);
  ASSERT_EQ(refused.size(), 1u);
  EXPECT_NE(refused[0].find("PytorchStreamReader"), std::string::npos) << refused[0];
}
