// What the DiLoCo whole-run tests (schedule_test, warmup_test) share: the three replicas a run
// may have, and one worker, group or averager killed at a step and phase.
#pragma once

#include <string>
#include <tuple>
#include <vector>

#include <gtest/gtest.h>

#include <cmath>

#include "../run_util.hpp"
#include "config/config.hpp"

namespace swarmrt::testing {

enum class Replica { plain, streaming, eager };

inline std::string replica_name(Replica r) {
  return r == Replica::plain ? "plain" : r == Replica::streaming ? "streaming" : "eager";
}

// Plain DiLoCo as `config` has it; otherwise Streaming DiLoCo with 2 fragments, rounds
// overlapping one step, α = 0.5 and int4 pseudo-gradients (and eager outer steps), validated.
inline void use_replica(config::RunConfig& config, Replica replica) {
  if (replica != Replica::plain) {
    config.diloco.fragments = 2;
    config.diloco.overlap_steps = 1;
    config.diloco.alpha = 0.5;
    config.diloco.quantize = config::Quantize::int4;
    config.diloco.eager = replica == Replica::eager;
  }
  config::validate(config, "test");
}

struct Kill {
  const char* name;
  const char* target;
  int64_t step;
  config::KillPhase phase;
};

inline void use_kill(config::RunConfig& config, const Kill& kill) {
  config.chaos.kill = kill.target;
  config.chaos.kill_at_step = kill.step;
  config.chaos.kill_at_phase = kill.phase;
}

using ReplicaKilled = ::testing::TestWithParam<std::tuple<Kill, Replica>>;

// `config` run whole with `kill`: the kill happened, something restarted, every one of `steps`
// steps has its record, every micro-batch counts once, and the validation loss is finite and
// below the first step's loss. The run, for the test's own checks of its rounds.
inline actors::RuntimeResult run_killed(config::RunConfig config, const Kill& kill, size_t steps) {
  use_kill(config, kill);
  auto r = run(config);
  EXPECT_EQ(r.kills, 1u);
  EXPECT_GE(r.restarts, 1u);
  EXPECT_EQ(r.report.losses.size(), steps);
  expect_every_micro_batch_once(r.report, config.train.micro_batches);
  EXPECT_TRUE(std::isfinite(r.report.val_loss));
  if (!r.report.losses.empty()) {
    EXPECT_LT(r.report.val_loss, r.report.losses.front());
  }
  return r;
}

// Each of `stages` stages applied `rounds` (its rounds' numbers, in order) with a plain replica;
// with two fragments, fragment 0 applied `rounds` and fragment 1 `fragment1_rounds`. And each
// stage ends on its group's θ.
inline void expect_stage_rounds(const actors::RuntimeResult& r, int64_t stages, Replica replica,
                                const std::vector<uint64_t>& rounds,
                                const std::vector<uint64_t>& fragment1_rounds) {
  for (uint32_t stage = 0; stage < static_cast<uint32_t>(stages); ++stage) {
    if (replica == Replica::plain) {
      EXPECT_EQ(r.applied_rounds.at(stage), rounds) << stage;
    } else {
      ASSERT_EQ(r.fragment_rounds.at(stage).size(), 2u);
      EXPECT_EQ(r.fragment_rounds.at(stage)[0], rounds) << stage;
      EXPECT_EQ(r.fragment_rounds.at(stage)[1], fragment1_rounds) << stage;
    }
    expect_stage_ends_on_the_groups_theta(r, stage);
  }
}

// The parameters of a test per replica, and their names.
inline auto every_replica() {
  return ::testing::Values(Replica::plain, Replica::streaming, Replica::eager);
}
struct ReplicaName {
  template <class Info>
  std::string operator()(const Info& info) const {
    return replica_name(info.param);
  }
};

// The parameters of a test per kill and replica (plain and streaming), and their names: the
// kill's, then the replica's.
inline auto each_kill_with_each_replica(std::vector<Kill> kills) {
  return ::testing::Combine(::testing::ValuesIn(std::move(kills)),
                            ::testing::Values(Replica::plain, Replica::streaming));
}
struct KillAndReplicaName {
  template <class Info>
  std::string operator()(const Info& info) const {
    return std::string(std::get<0>(info.param).name) + "_" + replica_name(std::get<1>(info.param));
  }
};

}  // namespace swarmrt::testing
