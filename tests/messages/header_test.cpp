#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <cmath>

#include "messages/frame.hpp"

using namespace swarmrt::messages;

namespace {
MicroBatchHeader sample_header() {
  MicroBatchHeader h;
  h.run_id = 77;
  h.step = 12;
  h.micro_batch = 3;
  h.attempt = 1;
  h.stage = 2;
  h.direction = Direction::backward;
  h.route = {0, 1001, 2000};
  h.samples = 4;
  return h;
}

std::string decode_error(const std::vector<uint8_t>& bytes) {
  try {
    decode_microbatch(bytes);
  } catch (const DecodeError& e) {
    return e.what();
  }
  return "";
}
}  // namespace

TEST(Header, MicroBatchRoundTrip) {
  auto frame = make_frame(sample_header(), {at::zeros({4, 8, 16}), at::zeros({4, 8}, at::kLong)});
  EXPECT_EQ(frame.header.size() % 8, 0u);  // word-aligned
  auto h = open_frame(frame);
  EXPECT_EQ(h.run_id, 77u);
  EXPECT_EQ(h.step, 12u);
  EXPECT_EQ(h.micro_batch, 3u);
  EXPECT_EQ(h.attempt, 1u);
  EXPECT_EQ(h.stage, 2u);
  EXPECT_EQ(h.direction, Direction::backward);
  EXPECT_EQ(h.route, (std::vector<uint32_t>{0, 1001, 2000}));
  EXPECT_EQ(h.samples, 4u);
  ASSERT_EQ(h.tensors.size(), 2u);
  EXPECT_EQ(h.tensors[0].dtype, at::kFloat);
  EXPECT_EQ(h.tensors[0].shape, (std::vector<int64_t>{4, 8, 16}));
  EXPECT_EQ(h.tensors[0].byte_size, 4u * 8 * 16 * 4);
  EXPECT_EQ(h.tensors[1].dtype, at::kLong);
}

TEST(Header, EveryWireDtype) {
  for (auto t : {at::kFloat, at::kBFloat16, at::kHalf, at::kLong, at::kByte}) {
    auto frame = make_frame(sample_header(), {at::zeros({3, 5}, t)});
    EXPECT_EQ(open_frame(frame).tensors[0].dtype, t);
  }
  EXPECT_THROW(make_frame(sample_header(), {at::zeros({2}, at::kDouble)}), DecodeError);
}

TEST(Header, TruncatedAndGarbageFramesAreRefused) {
  auto bytes = encode(sample_header());
  auto cut = bytes;
  cut.resize(cut.size() - 8);
  EXPECT_FALSE(decode_error(cut).empty());
  cut.resize(cut.size() - 3);
  EXPECT_NE(decode_error(cut).find("not word-aligned"), std::string::npos);
  EXPECT_NE(decode_error({}).find("empty"), std::string::npos);
  std::vector<uint8_t> garbage(64, 0xff);
  EXPECT_FALSE(decode_error(garbage).empty());
  std::vector<uint8_t> huge(kMaxHeaderBytes + 8, 0);
  EXPECT_NE(decode_error(huge).find("exceeds"), std::string::npos);
}

TEST(Header, PayloadMustMatchMetadata) {
  auto frame = make_frame(sample_header(), {at::zeros({4, 8, 16})});
  auto wrong_shape = frame;
  wrong_shape.tensors = {at::zeros({4, 8, 15})};
  EXPECT_THROW(open_frame(wrong_shape), DecodeError);
  auto wrong_dtype = frame;
  wrong_dtype.tensors = {at::zeros({4, 8, 16}, at::kHalf)};
  try {
    open_frame(wrong_dtype);
    FAIL();
  } catch (const DecodeError& e) {
    EXPECT_NE(std::string(e.what()).find("header says Float"), std::string::npos) << e.what();
  }
  auto missing = frame;
  missing.tensors.clear();
  EXPECT_THROW(open_frame(missing), DecodeError);
}

TEST(Header, RoundRoundTrip) {
  RoundHeader h;
  h.round_id = 9;
  h.stage = 1;
  h.fragment = 2;
  h.contributor = 1001;
  h.status = RoundStatus::rejected;
  h.step = 450;
  h.reason = "late";
  h.tensor_names = {"h.2.attn.c_attn.weight", "ln_f.bias"};
  auto frame = make_round_frame(h, {at::ones({2}), at::ones({3})});
  auto r = open_round_frame(frame);
  EXPECT_EQ(r.round_id, 9u);
  EXPECT_EQ(r.fragment, 2u);
  EXPECT_EQ(r.contributor, 1001u);
  EXPECT_EQ(r.status, RoundStatus::rejected);
  EXPECT_EQ(r.reason, "late");
  EXPECT_EQ(r.tensor_names, h.tensor_names);
  EXPECT_FALSE(r.update);
  h.update = true;  // a quantized Streaming DiLoCo answer
  EXPECT_TRUE(open_round_frame(make_round_frame(h, {at::ones({2}), at::ones({3})})).update);
  EXPECT_FALSE(r.final);
  EXPECT_FALSE(r.average);
  h.final = true;    // the last step's contribution
  h.average = true;  // an eager group's answer
  h.contributors = {4, 7};
  const auto flags = open_round_frame(make_round_frame(h, {at::ones({2}), at::ones({3})}));
  EXPECT_TRUE(flags.final);
  EXPECT_TRUE(flags.average);
  EXPECT_EQ(flags.contributors, (std::vector<uint32_t>{4, 7}));
  frame.tensors.pop_back();
  EXPECT_THROW(open_round_frame(frame), DecodeError);
}

// swarm.compression = auto under diloco.all_gather: a density travels, and one that is no
// fraction is refused with its name rather than capping anyone's rounds.
TEST(Header, RoundDensityIsAFraction) {
  RoundHeader h;
  h.tensor_names = {"w"};
  EXPECT_EQ(open_round_frame(make_round_frame(h, {at::ones({2})})).density, 0.0);
  h.density = 0.04;
  EXPECT_EQ(open_round_frame(make_round_frame(h, {at::ones({2})})).density, 0.04);
  for (double bad : {-0.5, 1.5, std::nan("")}) {
    h.density = bad;
    try {
      open_round_frame(make_round_frame(h, {at::ones({2})}));
      ADD_FAILURE() << bad << " was taken";
    } catch (const DecodeError& e) {
      EXPECT_NE(std::string(e.what()).find("density"), std::string::npos) << e.what();
    }
  }
}
