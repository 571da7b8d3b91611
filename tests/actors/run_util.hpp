// Small swarm runs on a slice of the Brown text, shared by the runtime and fault tests.
#pragma once

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "../model/test_util.hpp"
#include "actors/runtime/runtime.hpp"
#include "config/config.hpp"
#include "model/data.hpp"
#include "model/run_dir.hpp"

namespace swarmrt::testing {

inline const model::Corpus& small_corpus() {
  static const model::Corpus corpus = [] {
    std::ifstream in(swarmrt::testing::test_data_path(), std::ios::binary);
    std::string s(400'000, '\0');
    in.read(s.data(), static_cast<std::streamsize>(s.size()));
    s.resize(static_cast<size_t>(in.gcount()));
    return model::Corpus::from_text(s, 0.05);
  }();
  return corpus;
}

inline config::RunConfig micro_run(const std::string& mode, int64_t stages, int64_t workers,
                                   int64_t steps) {
  config::RunConfig c;
  c.model = {"tiny", 4, 2, 32, 32, 256};
  c.train = short_train(steps, 2, 4, 3, 2e-3);
  c.swarm.mode = config::parse_choice<config::Mode>(mode);
  c.swarm.stages = stages;
  c.swarm.workers_per_stage = workers;
  config::validate(c, "test");
  return c;
}

// Seeded uniform wiring with a slot for every micro-batch: the run routes the same way every
// time, so a run with a fault differs from the clean one only where the fault is.
inline void route_deterministically(config::RunConfig& c) {
  c.swarm.wiring = config::WiringPolicy::uniform;
  c.swarm.max_inflight = c.train.micro_batches;
}

// The lines of `file` that contain `needle` (metrics.jsonl records, by a fragment of them).
inline std::vector<std::string> lines_with(const std::filesystem::path& file,
                                           const std::string& needle) {
  std::ifstream in(file);
  std::vector<std::string> out;
  for (std::string line; std::getline(in, line);)
    if (line.find(needle) != std::string::npos) out.push_back(line);
  return out;
}

// Every step counted each of its micro-batches once: none lost, none twice.
inline void expect_every_micro_batch_once(const messages::RunReport& r, int64_t micro_batches) {
  for (size_t i = 0; i < r.completed.size(); ++i) {
    EXPECT_EQ(r.completed[i], micro_batches) << "step " << i + 1;
    EXPECT_EQ(r.duplicates[i], 0) << "step " << i + 1;
    EXPECT_EQ(r.extra_samples[i], 0) << "step " << i + 1;
    EXPECT_EQ(r.missing_samples[i], 0) << "step " << i + 1;
  }
}

inline actors::RuntimeResult run(const config::RunConfig& c, actors::RuntimeOptions o = {}) {
  o.progress = false;
  return actors::run_in_process(c, small_corpus(), o);
}

// A DiLoCo run ends on a round: the stage's two workers hold the same parameters bit for bit,
// and they are the group's θ after its last round.
// The stage's two workers hold the same parameters bit for bit.
inline void expect_stage_workers_equal(const actors::RuntimeResult& r, uint32_t stage) {
  const auto& a = r.worker_params.at(actors::worker_id(stage, 0));
  const auto& b = r.worker_params.at(actors::worker_id(stage, 1));
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i)
    EXPECT_TRUE(at::equal(a[i].second, b[i].second)) << stage << " " << a[i].first;
}

inline void expect_stage_ends_on_the_groups_theta(const actors::RuntimeResult& r, uint32_t stage) {
  expect_stage_workers_equal(r, stage);
  const auto& a = r.worker_params.at(actors::worker_id(stage, 0));
  const auto& theta = r.group_theta.at(stage);
  ASSERT_EQ(theta.size(), a.size());
  for (size_t i = 0; i < theta.size(); ++i)
    EXPECT_TRUE(at::equal(theta[i].second, a[i].second)) << stage << " " << theta[i].first;
}

// A fresh run of `config` with its run directory at `dir` (metrics.jsonl, checkpoints).
inline actors::RuntimeResult run_in(const std::filesystem::path& dir,
                                    const config::RunConfig& config) {
  model::RunDir rd(dir.string(), config, model::RunStart::fresh);
  actors::RuntimeOptions o;
  o.run = &rd;
  return run(config, o);
}

// `config` resumed from the newest checkpoint of the run directory `dir`.
inline actors::RuntimeResult resume_in(const std::filesystem::path& dir,
                                       const config::RunConfig& config) {
  model::RunDir rd(dir.string(), config, model::RunStart::resume);
  actors::RuntimeOptions o;
  o.run = &rd;
  o.resume = true;
  return run(config, o);
}

}  // namespace swarmrt::testing
