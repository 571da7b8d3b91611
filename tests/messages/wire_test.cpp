#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include "messages/frame.hpp"
#include "messages/wire.hpp"

using namespace swarmrt::messages;

namespace {
Frame sample(std::vector<at::Tensor> tensors) {
  MicroBatchHeader h;
  h.step = 5;
  h.micro_batch = 2;
  h.route = {0, 1000};
  h.samples = 2;
  return make_frame(h, std::move(tensors));
}

std::string refusal(Reassembler& r, const std::vector<uint8_t>& chunk) {
  try {
    r.add(chunk);
  } catch (const DecodeError& e) {
    return e.what();
  }
  return "";
}

Reassembler::Complete roundtrip(const Frame& f, size_t max_chunk, size_t* chunks = nullptr) {
  Reassembler r;
  auto parts = to_chunks(f, FrameKind::microbatch, 7, max_chunk);
  if (chunks) *chunks = parts.size();
  for (size_t i = 0; i + 1 < parts.size(); ++i) EXPECT_FALSE(r.add(parts[i]).has_value());
  auto done = r.add(parts.back());
  EXPECT_TRUE(done.has_value());
  EXPECT_EQ(r.pending(), 0u);
  return *done;
}
}  // namespace

TEST(Wire, RoundTripEveryDtype) {
  for (auto dtype : {at::kFloat, at::kBFloat16, at::kHalf, at::kLong}) {
    auto t = dtype == at::kLong ? at::randint(-1000, 1000, {3, 7}, at::kLong)
                                : at::randn({3, 7}).to(dtype);
    auto back = roundtrip(sample({t}), kDefaultMaxChunk);
    ASSERT_EQ(back.frame.tensors.size(), 1u);
    EXPECT_EQ(back.frame.tensors[0].scalar_type(), dtype);
    EXPECT_TRUE(at::equal(back.frame.tensors[0], t)) << c10::toString(dtype);
    EXPECT_EQ(decode_microbatch(back.frame.header).route, (std::vector<uint32_t>{0, 1000}));
  }
}

TEST(Wire, TensorLargerThanOneChunk) {
  // 40 MiB of fp32 with the default 32 MiB chunks, and a non-contiguous view.
  auto big = at::randn({10, 1024, 1024});
  auto view = at::randn({64, 33}).t();
  size_t chunks = 0;
  auto back = roundtrip(sample({big, view}), kDefaultMaxChunk, &chunks);
  EXPECT_EQ(chunks, 2u);
  EXPECT_TRUE(at::equal(back.frame.tensors[0], big));
  EXPECT_TRUE(at::equal(back.frame.tensors[1], view));
  // Small chunks: every slice boundary falls somewhere else.
  auto back2 =
      roundtrip(sample({at::randn({100, 10}), at::randint(0, 9, {7}, at::kLong)}), 100, &chunks);
  EXPECT_GT(chunks, 40u);
  for (const auto& c : to_chunks(sample({at::randn({100, 10})}), FrameKind::microbatch, 1, 100))
    EXPECT_LE(c.size(), 100u);
}

TEST(Wire, InterleavedMessagesAndRoundFrames) {
  Reassembler r;
  RoundHeader rh;
  rh.round_id = 3;
  rh.tensor_names = {"w"};
  auto round = make_round_frame(rh, {at::randn({50})});
  auto a = to_chunks(sample({at::randn({40})}), FrameKind::microbatch, 1, 128);
  auto b = to_chunks(round, FrameKind::round, 2, 128);
  std::vector<Reassembler::Complete> done;
  for (size_t i = 0; i < std::max(a.size(), b.size()); ++i)
    for (auto* parts : {&a, &b})
      if (i < parts->size())
        if (auto c = r.add((*parts)[i])) done.push_back(std::move(*c));
  ASSERT_EQ(done.size(), 2u);
  const auto& got_round = done[0].kind == FrameKind::round ? done[0] : done[1];
  EXPECT_EQ(open_round_frame(got_round.frame).round_id, 3u);
  EXPECT_TRUE(at::equal(got_round.frame.tensors[0], round.tensors[0]));
}

TEST(Wire, TruncatedChunkIsRefusedAndTheReassemblerKeepsServing) {
  Reassembler r;
  auto parts = to_chunks(sample({at::randn({64})}), FrameKind::microbatch, 9, 128);
  auto cut = parts[0];
  cut.resize(cut.size() - 5);
  EXPECT_NE(refusal(r, cut).find("carries"), std::string::npos);
  std::vector<uint8_t> stub(parts[0].begin(), parts[0].begin() + 10);
  EXPECT_NE(refusal(r, stub).find("shorter than"), std::string::npos);
  EXPECT_NE(refusal(r, parts[1]).find("not chunk 0"), std::string::npos);
  EXPECT_FALSE(r.add(parts[0]).has_value());
  EXPECT_NE(refusal(r, parts[2]).find("out of order"), std::string::npos);
  EXPECT_EQ(r.pending(), 0u);  // the refused message's partial state is gone
  for (size_t i = 0; i + 1 < parts.size(); ++i) EXPECT_FALSE(r.add(parts[i]).has_value());
  EXPECT_TRUE(r.add(parts.back()).has_value());
}

TEST(Wire, PayloadThatDisagreesWithTheHeaderIsRefused) {
  // The header describes a [2, 3] fp32 tensor; the payload carries [2, 4].
  auto frame = sample({at::zeros({2, 3})});
  frame.tensors = {at::zeros({2, 4})};
  Reassembler r;
  auto parts = to_chunks(frame, FrameKind::microbatch, 4);
  try {
    r.add(parts[0]);
    FAIL() << "a payload size mismatch must be refused";
  } catch (const DecodeError& e) {
    EXPECT_NE(std::string(e.what()).find("tensors need 24 payload bytes, message has 32"),
              std::string::npos)
        << e.what();
  }
  // A frame of the wrong kind (a micro-batch header read as a round header) fails too.
  auto wrong_kind = to_chunks(sample({at::zeros({2})}), FrameKind::round, 5);
  EXPECT_FALSE(refusal(r, wrong_kind[0]).empty());
}

TEST(Wire, OversizedMessageIsRefusedBeforeBuffering) {
  Reassembler r(/*max_message=*/1000);
  auto parts = to_chunks(sample({at::zeros({1000})}), FrameKind::microbatch, 6, 256);
  EXPECT_NE(refusal(r, parts[0]).find("exceeds the limit of 1000"), std::string::npos);
  EXPECT_EQ(r.pending(), 0u);
  auto small = to_chunks(sample({at::zeros({10})}), FrameKind::microbatch, 8);
  EXPECT_TRUE(r.add(small[0]).has_value());
}
