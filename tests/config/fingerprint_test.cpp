#include <gtest/gtest.h>

#include "config/fingerprint.hpp"

using namespace swarmrt::config;

TEST(Fingerprint, SameMathSameFingerprintWhateverTheLocalKeys) {
  auto a = parse_config("[train]\nthreads = 1\n[data]\npath = \"/a/brown.txt\"\n", "a.toml");
  auto b = parse_config(
      "[train]\nthreads = 8\nlog_every = 50\n[data]\npath = \"/b/x.txt\"\n"
      "[checkpoint]\nkeep = 9\n",
      "b.toml");
  EXPECT_EQ(fingerprint(a), fingerprint(b));
  EXPECT_TRUE(fingerprint_mismatch(fingerprint_text(a), fingerprint_text(b)).empty());
  EXPECT_NE(fingerprint_text(a).find("protocol = " + std::to_string(kProtocolVersion)),
            std::string::npos);
}

TEST(Fingerprint, MismatchNamesEveryDifferingKey) {
  auto a = parse_config("", "a.toml");
  auto b = parse_config("[model]\nn_layer = 6\n[diloco]\ninner_steps = 10\n", "b.toml");
  EXPECT_NE(fingerprint(a), fingerprint(b));
  auto diff = fingerprint_mismatch(fingerprint_text(a), fingerprint_text(b));
  ASSERT_EQ(diff.size(), 2u);
  EXPECT_EQ(diff[0], "diloco.inner_steps: 50 here, 10 there");
  EXPECT_EQ(diff[1], "model.n_layer: 4 here, 6 there");
  auto other_protocol = fingerprint_text(a);
  const std::string mine = "protocol = " + std::to_string(kProtocolVersion);
  other_protocol.replace(other_protocol.find(mine), mine.size(), "protocol = 99");
  EXPECT_EQ(fingerprint_mismatch(fingerprint_text(a), other_protocol),
            std::vector<std::string>{"protocol: " + std::to_string(kProtocolVersion) +
                                     " here, 99 there"});
}

TEST(Fingerprint, TheConfigTableSaysWhichKeysEveryNodeShares) {
  for (const char* key :
       {"model.n_layer", "train.lr", "swarm.mode", "diloco.inner_steps", "transport.links"})
    EXPECT_TRUE(is_shared_key(key)) << key;
  for (const char* key : {"train.threads", "train.log_every", "data.path", "checkpoint.keep",
                          "chaos.kill", "supervision.max_restarts", "nosuch.key", "train"})
    EXPECT_FALSE(is_shared_key(key)) << key;
  // Exactly the shared keys are in the fingerprint text.
  const auto text = fingerprint_text(RunConfig{});
  EXPECT_NE(text.find("train.lr = "), std::string::npos);
  EXPECT_EQ(text.find("train.threads = "), std::string::npos);
  EXPECT_EQ(text.find("chaos."), std::string::npos);
}
