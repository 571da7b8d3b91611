// launch --from-env's reading of the environment: Slurm, torchrun-style and Kubernetes
// variables, and every refusal naming the variable and its value.
#include "launch/cluster_env.hpp"

#include <gtest/gtest.h>

#include <map>

namespace swarmrt::launch {
namespace {

Env env_of(std::map<std::string, std::string> vars) {
  return [vars](const std::string& name) -> std::optional<std::string> {
    auto it = vars.find(name);
    if (it == vars.end()) return std::nullopt;
    return it->second;
  };
}

// The refusal's message, or "" when the environment made a place.
std::string refusal(std::map<std::string, std::string> vars, PlaceOptions o = {}) {
  try {
    read_place(env_of(std::move(vars)), o);
    return "";
  } catch (const PlaceError& e) {
    return e.what();
  }
}

std::map<std::string, std::string> slurm(const std::string& rank) {
  return {{"SLURM_PROCID", rank},
          {"SLURM_NTASKS", "3"},
          {"SLURM_LOCALID", "1"},
          {"SLURM_JOB_ID", "4242"},
          {"SLURM_JOB_NODELIST", "gpu[07-09],cpu1"},
          {"SLURMD_NODENAME", "gpu08"},
          {"SLURM_CPUS_PER_TASK", "4"}};
}

std::map<std::string, std::string> torchrun(const std::string& rank) {
  return {{"RANK", rank},
          {"WORLD_SIZE", "4"},
          {"LOCAL_RANK", "0"},
          {"MASTER_ADDR", "head.example"},
          {"MASTER_PORT", "29500"}};
}

TEST(ClusterEnv, SlurmRankWorldHeadPortAndCpus) {
  const auto p = read_place(env_of(slurm("1")));
  EXPECT_EQ(p.scheduler, Scheduler::slurm);
  EXPECT_EQ(p.rank, 1u);
  EXPECT_EQ(p.world, 3u);
  EXPECT_EQ(p.local_rank, 1u);
  EXPECT_EQ(p.head, "gpu07");  // the first host of the list, zero padding kept
  EXPECT_EQ(p.port, 20000 + 4242 % 20000);
  EXPECT_EQ(p.self_host, "gpu08");
  EXPECT_EQ(p.cpus, 4u);
  EXPECT_EQ(p.workers(), 4u);
  EXPECT_FALSE(p.coordinator());
  EXPECT_NE(p.describe().find("SLURM_PROCID=1"), std::string::npos) << p.describe();
  EXPECT_NE(p.describe().find("SLURM_NTASKS=3"), std::string::npos) << p.describe();
  EXPECT_TRUE(read_place(env_of(slurm("0"))).coordinator());
}

TEST(ClusterEnv, SlurmStepNodeListAndScontrolWin) {
  auto vars = slurm("0");
  vars["SLURM_STEP_NODELIST"] = "n[3-4]";
  EXPECT_EQ(read_place(env_of(vars)).head, "n3");
  PlaceOptions o;
  std::string asked;
  o.first_host = [&](const std::string& list) {
    asked = list;
    return std::string("from-scontrol");
  };
  EXPECT_EQ(read_place(env_of(vars), o).head, "from-scontrol");
  EXPECT_EQ(asked, "n[3-4]");
  vars["MASTER_ADDR"] = "10.1.2.3";
  vars["MASTER_PORT"] = "31000";
  const auto p = read_place(env_of(vars), o);
  EXPECT_EQ(p.head, "10.1.2.3");
  EXPECT_EQ(p.port, 31000);
  o.port = 32000;  // --port beats the environment
  EXPECT_EQ(read_place(env_of(vars), o).port, 32000);
}

TEST(ClusterEnv, SlurmGpusMakeOneWorkerEach) {
  auto vars = slurm("2");
  vars["CUDA_VISIBLE_DEVICES"] = "0,1,3";
  const auto p = read_place(env_of(vars));
  EXPECT_EQ(p.gpus, (std::vector<std::string>{"0", "1", "3"}));
  EXPECT_EQ(p.workers(), 3u);
  vars["CUDA_VISIBLE_DEVICES"] = "NoDevFiles";
  EXPECT_EQ(read_place(env_of(vars)).workers(), 4u);
  vars["CUDA_VISIBLE_DEVICES"] = "0,,1";
  EXPECT_NE(refusal(vars).find("CUDA_VISIBLE_DEVICES='0,,1'"), std::string::npos);
}

TEST(ClusterEnv, TorchrunAndKubeflowVariables) {
  const auto p = read_place(env_of(torchrun("3")));
  EXPECT_EQ(p.scheduler, Scheduler::torchrun);
  EXPECT_EQ(p.rank, 3u);
  EXPECT_EQ(p.world, 4u);
  EXPECT_EQ(p.head, "head.example");
  EXPECT_EQ(p.port, 29500);
  EXPECT_EQ(p.workers(), 1u);  // no CPU count said: one worker
  const auto pet = read_place(env_of({{"PET_NODE_RANK", "0"},
                                      {"PET_NNODES", "2"},
                                      {"PET_MASTER_ADDR", "trainer-node-0-0.trainer"},
                                      {"PET_MASTER_PORT", "29400"}}));
  EXPECT_EQ(pet.world, 2u);
  EXPECT_TRUE(pet.coordinator());
  EXPECT_EQ(pet.head, "trainer-node-0-0.trainer");
  EXPECT_EQ(pet.port, 29400);
}

TEST(ClusterEnv, KubernetesIndexedJob) {
  const auto p = read_place(env_of({{"JOB_COMPLETION_INDEX", "2"},
                                    {"WORLD_SIZE", "3"},
                                    {"MASTER_ADDR", "swarmrt-0.swarmrt"},
                                    {"MASTER_PORT", "7070"},
                                    {"POD_IP", "10.4.0.17"},
                                    {"SWARMRT_CPUS", "3"}}));
  EXPECT_EQ(p.scheduler, Scheduler::kubernetes);
  EXPECT_EQ(p.workers(), 3u);
  EXPECT_EQ(p.rank, 2u);
  EXPECT_EQ(p.head, "swarmrt-0.swarmrt");
  EXPECT_EQ(p.self_host, "10.4.0.17");
  const auto why = refusal({{"JOB_COMPLETION_INDEX", "0"},
                            {"MASTER_ADDR", "swarmrt-0.swarmrt"},
                            {"MASTER_PORT", "7070"}});
  EXPECT_NE(why.find("WORLD_SIZE is not set"), std::string::npos) << why;
  EXPECT_NE(why.find("completions"), std::string::npos) << why;
}

TEST(ClusterEnv, RefusesNoSchedulerAtAll) {
  const auto why = refusal({{"HOME", "/root"}});
  EXPECT_NE(why.find("SLURM_PROCID"), std::string::npos) << why;
  EXPECT_NE(why.find("JOB_COMPLETION_INDEX"), std::string::npos) << why;
}

TEST(ClusterEnv, RefusesARankAboveTheWorld) {
  auto why = refusal(torchrun("4"));
  EXPECT_NE(why.find("RANK=4 is not below the world size 4"), std::string::npos) << why;
  why = refusal(slurm("7"));
  EXPECT_NE(why.find("SLURM_PROCID=7 is not below the world size 3"), std::string::npos) << why;
}

TEST(ClusterEnv, RefusesAWorldOfOne) {
  auto vars = torchrun("0");
  vars["WORLD_SIZE"] = "1";
  const auto why = refusal(vars);
  EXPECT_NE(why.find("world size 1"), std::string::npos) << why;
  EXPECT_NE(why.find("WORLD_SIZE=1"), std::string::npos) << why;
}

TEST(ClusterEnv, RefusesAMissingHeadAddress) {
  auto vars = torchrun("1");
  vars.erase("MASTER_ADDR");
  auto why = refusal(vars);
  EXPECT_NE(why.find("MASTER_ADDR is not set"), std::string::npos) << why;
  vars = torchrun("1");
  vars["MASTER_ADDR"] = "";
  why = refusal(vars);
  EXPECT_NE(why.find("MASTER_ADDR is not set"), std::string::npos) << why;
  vars = torchrun("1");
  vars.erase("MASTER_PORT");
  why = refusal(vars);
  EXPECT_NE(why.find("MASTER_PORT is not set"), std::string::npos) << why;
  PlaceOptions o;
  o.port = 4000;
  EXPECT_EQ(refusal(vars, o), "");
  auto s = slurm("1");
  s.erase("SLURM_JOB_NODELIST");
  why = refusal(s);
  EXPECT_NE(why.find("SLURM_JOB_NODELIST is not set"), std::string::npos) << why;
}

TEST(ClusterEnv, RefusesSourcesThatDisagreeOnTheWorld) {
  auto vars = slurm("1");
  vars["WORLD_SIZE"] = "4";
  const auto why = refusal(vars);
  EXPECT_NE(why.find("SLURM_NTASKS=3 but WORLD_SIZE=4"), std::string::npos) << why;
  auto t = torchrun("1");
  t["PET_NNODES"] = "2";
  EXPECT_NE(refusal(t).find("WORLD_SIZE=4 but PET_NNODES=2"), std::string::npos);
}

TEST(ClusterEnv, RefusesNumbersThatAreNot) {
  auto vars = torchrun("one");
  auto why = refusal(vars);
  EXPECT_NE(why.find("RANK='one': not a non-negative integer"), std::string::npos) << why;
  vars = torchrun("-1");
  EXPECT_NE(refusal(vars).find("RANK='-1'"), std::string::npos);
  vars = torchrun("1");
  vars["MASTER_PORT"] = "70000";
  why = refusal(vars);
  EXPECT_NE(why.find("MASTER_PORT=70000"), std::string::npos) << why;
  vars["MASTER_PORT"] = "0";
  EXPECT_NE(refusal(vars).find("MASTER_PORT=0: not a port"), std::string::npos);
}

TEST(ClusterEnv, RunIdIsSharedByAJobAndDiffersWithTheWorld) {
  const auto a = read_place(env_of(torchrun("0")));
  const auto b = read_place(env_of(torchrun("3")));
  EXPECT_EQ(a.run_id(), b.run_id());
  auto other_world = torchrun("1");
  other_world["WORLD_SIZE"] = "5";
  EXPECT_NE(read_place(env_of(other_world)).run_id(), a.run_id());
  auto other_job = slurm("1");
  const auto s1 = read_place(env_of(other_job)).run_id();
  other_job["SLURM_JOB_ID"] = "4243";
  EXPECT_NE(read_place(env_of(other_job)).run_id(), s1);
}

TEST(ClusterEnv, FirstSlurmHost) {
  EXPECT_EQ(first_slurm_host("localhost"), "localhost");
  EXPECT_EQ(first_slurm_host("a1,a2"), "a1");
  EXPECT_EQ(first_slurm_host("node[001-004,010]"), "node001");
  EXPECT_EQ(first_slurm_host("rack[2,5]-n[3-4]"), "rack2-n3");
  EXPECT_EQ(first_slurm_host("gpu[9]x,cpu1"), "gpu9x");
  EXPECT_THROW(first_slurm_host("node[1-2"), PlaceError);
  EXPECT_THROW(first_slurm_host("node[a-b]"), PlaceError);
  EXPECT_THROW(first_slurm_host(",x"), PlaceError);
  EXPECT_THROW(first_slurm_host("x]"), PlaceError);
}

}  // namespace
}  // namespace swarmrt::launch
