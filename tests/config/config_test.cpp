#include <gtest/gtest.h>
#include <cstdlib>
#include <filesystem>

#include "config/config.hpp"

using namespace swarmrt::config;

namespace {
std::string error_of(const std::string& text, const std::vector<std::string>& overrides = {}) {
  try {
    parse_config(text, "run.toml", overrides);
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

// The config `text` is refused with a message that holds each of `parts`.
void expect_refused(const std::string& text, std::initializer_list<const char*> parts) {
  const auto msg = error_of(text);
  EXPECT_FALSE(msg.empty()) << text << " was admitted";
  for (const char* part : parts)
    EXPECT_NE(msg.find(part), std::string::npos) << part << " not in: " << msg;
}
}  // namespace

TEST(Config, DefaultsAndPresets) {
  auto c = parse_config("", "empty.toml");
  EXPECT_EQ(c.model.n_layer, 4);
  EXPECT_EQ(c.swarm.mode, Mode::single);
  auto g = parse_config("[model]\npreset = \"gpt2-small\"\n", "g.toml");
  EXPECT_EQ(g.model.n_layer, 12);
  EXPECT_EQ(g.model.n_embd, 768);
  EXPECT_EQ(g.model.block_size, 1024);
  auto o = parse_config("[model]\npreset = \"gpt2-small\"\nn_layer = 6\n", "g.toml");
  EXPECT_EQ(o.model.n_layer, 6);  // explicit keys win over the preset
  EXPECT_EQ(c.tokens_per_step(), 16 * 1 * 128);
}

TEST(Config, ArchitectureKeysAndLlamaPresets) {
  auto c = parse_config("[model]\npreset = \"llama-tiny\"\n", "l.toml");
  EXPECT_EQ(c.model.arch, Arch::llama);
  EXPECT_EQ(c.model.n_embd, 128);
  c = parse_config("[model]\narch = \"llama\"\ntie_embeddings = true\n", "l.toml");
  EXPECT_EQ(c.model.arch, Arch::llama);
  EXPECT_TRUE(c.model.tie_embeddings);
  EXPECT_EQ(parse_config(to_toml(c), "effective").model.arch, Arch::llama);
  expect_refused("[model]\narch = \"mamba\"\n", {"model.arch: must be gpt2 or llama"});
  // A tied head lives with the embeddings, so it needs them in one stage.
  expect_refused("[model]\ntie_embeddings = true\n[swarm]\nmode = \"pp\"\nstages = 2\n",
                 {"model.tie_embeddings", "swarm.stages = 1"});
  // Rotary embeddings turn pairs of a head's dimensions: the head size must be even.
  expect_refused("[model]\narch = \"llama\"\nn_head = 128\n", {"must be even"});
  expect_refused("[model]\nvocab_size = 100\n", {"model.vocab_size"});
  EXPECT_EQ(parse_config("[model]\nvocab_size = 32768\n", "x").model.vocab_size, 32768);
}

TEST(Config, UnknownKeyNamesFileKeyAndKnownKeys) {
  expect_refused("[train]\nstpes = 3\n", {"run.toml", "train.stpes", "steps"});
  expect_refused("[trian]\nsteps = 3\n", {"unknown section [trian]"});
}

TEST(Config, WrongTypeNamesExpectedType) {
  expect_refused("[train]\nsteps = \"many\"\n",
                 {"train.steps", "expected an integer", "got string"});
  expect_refused("[swarm]\nmode = 3\n", {"expected a string"});
  EXPECT_EQ(parse_config("[train]\nlr = 1\n", "x").train.lr, 1.0);  // integer where float is fine
}

TEST(Config, ImpossibleValues) {
  expect_refused("[swarm]\nmode = \"pp\"\nstages = 5\n", {"swarm.stages", "model.n_layer (4)"});
  expect_refused("[model]\nn_embd = 130\n", {"multiple of model.n_head"});
  expect_refused("[swarm]\nmode = \"ring\"\n",
                 {"swarm.mode: must be single, pp, dp, swarm, diloco or diloco-swarm, not 'ring'"});
  expect_refused("[swarm]\nwiring = \"random\"\n",
                 {"swarm.wiring: must be throughput or uniform, not 'random'"});
  expect_refused("[data]\nval_fraction = 1.5\n", {"data.val_fraction"});
  expect_refused("[model]\npreset = \"huge\"\n", {"unknown model preset"});
  expect_refused("[train]\nsteps = 0\n", {"train.steps: must be >= 1"});
  // A warm-up as long as the run would leave no local step.
  auto msg = error_of("[train]\nsteps = 100\n[diloco]\nwarmup_sync_steps = 100\n");
  EXPECT_NE(msg.find("diloco.warmup_sync_steps: must be < train.steps (100)"), std::string::npos)
      << msg;
  expect_refused("[diloco]\nwarmup_sync_steps = -1\n", {"diloco.warmup_sync_steps"});
  EXPECT_EQ(error_of("[train]\nsteps = 100\n[diloco]\nwarmup_sync_steps = 99\n"), "");
  // An H schedule: whole rounds of each H, every H long enough for the overlap's rounds.
  msg = error_of("[diloco]\ninner_steps_schedule = \"8:20\"\n");
  EXPECT_NE(msg.find("diloco.inner_steps_schedule: phase '8:20' must run whole rounds"),
            std::string::npos)
      << msg;
  msg = error_of("[diloco]\ninner_steps_schedule = \"8\"\n");
  EXPECT_NE(msg.find("diloco.inner_steps_schedule: must be H:STEPS entries"), std::string::npos)
      << msg;
  msg = error_of(
      "[diloco]\ninner_steps = 64\nfragments = 4\noverlap_steps = 1\n"
      "inner_steps_schedule = \"4:64,16:64\"\n");
  EXPECT_NE(msg.find("diloco.inner_steps_schedule: H = 4 is too small for "
                     "diloco.overlap_steps = 1 and diloco.fragments = 4"),
            std::string::npos)
      << msg;
  EXPECT_EQ(error_of("[diloco]\ninner_steps = 64\nfragments = 4\noverlap_steps = 1\n"
                     "inner_steps_schedule = \"8:64,16:64\"\n"),
            "");
  msg = error_of("[diloco]\nouter_lr = 0.5\nouter_min_lr = 0.6\n");
  EXPECT_NE(msg.find("diloco.outer_min_lr: must be in [0, diloco.outer_lr]"), std::string::npos)
      << msg;
  // Sparse rounds: values in 2 or 4 bits, in place of a quantization, not with eager steps
  // (their answer, the round's mean, would be cut with no error feedback).
  EXPECT_EQ(error_of("[diloco]\ncompress = \"topk\"\ntopk_density = 0.02\ntopk_bits = 4\n"), "");
  msg = error_of("[diloco]\ncompress = \"topk\"\ntopk_bits = 3\n");
  EXPECT_NE(msg.find("diloco.topk_bits: must be 2 or 4, got 3"), std::string::npos) << msg;
  msg = error_of("[diloco]\ncompress = \"topk\"\nquantize = \"int4\"\n");
  EXPECT_NE(msg.find("diloco.quantize: must be \"none\" with diloco.compress = \"topk\""),
            std::string::npos)
      << msg;
  msg = error_of("[diloco]\ncompress = \"topk\"\neager = true\noverlap_steps = 1\n");
  EXPECT_NE(msg.find("diloco.eager: must be false with diloco.compress"), std::string::npos) << msg;
  msg = error_of("[diloco]\ncompress = \"sparse\"\n");
  EXPECT_NE(msg.find("must be none or topk, not 'sparse'"), std::string::npos) << msg;
  msg = error_of("[diloco]\ntopk_density = 0\n");
  EXPECT_NE(msg.find("diloco.topk_density"), std::string::npos) << msg;
  // A sparse warm-up needs a warm-up, and a mean to sum the workers' sparse gradients into.
  EXPECT_EQ(error_of("[diloco]\nwarmup_sync_steps = 4\nwarmup_compress = \"topk\"\n"
                     "warmup_density = 0.002\n"),
            "");
  msg = error_of("[diloco]\nwarmup_compress = \"topk\"\n");
  EXPECT_NE(msg.find("diloco.warmup_compress: needs diloco.warmup_sync_steps > 0"),
            std::string::npos)
      << msg;
  msg = error_of(
      "[swarm]\ngrad_aggregate = \"centered_clip\"\n[diloco]\nwarmup_sync_steps = 4\n"
      "warmup_compress = \"topk\"\n");
  EXPECT_NE(msg.find("diloco.warmup_compress: needs swarm.grad_aggregate = \"mean\""),
            std::string::npos)
      << msg;
  msg = error_of("[diloco]\nwarmup_density = 1.5\n");
  EXPECT_NE(msg.find("diloco.warmup_density"), std::string::npos) << msg;
  // Robust aggregation: not with eager steps (they take the others' mean); a trimmed mean
  // leaves a value per coordinate.
  msg = error_of("[diloco]\naggregate = \"centered_clip\"\neager = true\noverlap_steps = 1\n");
  EXPECT_NE(msg.find("diloco.aggregate: must be \"mean\" with diloco.eager"), std::string::npos)
      << msg;
  msg = error_of(
      "[swarm]\nmode = \"diloco\"\nworkers_per_stage = 4\n[diloco]\naggregate = "
      "\"trimmed_mean\"\ntrim = 2\n");
  EXPECT_NE(msg.find("diloco.trim: must leave a value per coordinate"), std::string::npos) << msg;
  EXPECT_EQ(error_of("[swarm]\nmode = \"diloco\"\nworkers_per_stage = 4\n[diloco]\naggregate = "
                     "\"trimmed_mean\"\n"),
            "");
  // The same for a grad averager's trimmed mean (swarm.grad_aggregate), in any mode.
  msg = error_of(
      "[swarm]\nmode = \"dp\"\nworkers_per_stage = 2\ngrad_aggregate = \"trimmed_mean\"\n");
  EXPECT_NE(msg.find("diloco.trim: must leave a value per coordinate"), std::string::npos) << msg;
  EXPECT_NE(msg.find("swarm.grad_aggregate = trimmed_mean"), std::string::npos) << msg;
  EXPECT_EQ(error_of("[swarm]\nmode = \"dp\"\nworkers_per_stage = 4\ngrad_aggregate = "
                     "\"centered_clip\"\n"),
            "");
  expect_refused(
      "[swarm]\ngrad_aggregate = \"median\"\n",
      {"swarm.grad_aggregate: must be mean, centered_clip or trimmed_mean, not 'median'"});
  msg = error_of("[diloco]\nclip_drop = 0.5\n");
  EXPECT_NE(msg.find("diloco.clip_drop: must be 0 (off) or >= 1"), std::string::npos) << msg;
  expect_refused("[diloco]\naggregate = \"median\"\n",
                 {"diloco.aggregate: must be mean, centered_clip or trimmed_mean, not 'median'"});
  // Spot checks recompute a stage's output on another worker of it: swarm mode, two stages
  // and two workers a stage at least; a fraction in [0, 1].
  msg = error_of(
      "[swarm]\nmode = \"diloco-swarm\"\nstages = 2\nworkers_per_stage = 3\n"
      "[verify]\nfraction = 0.05\n");
  EXPECT_NE(msg.find("verify.fraction: spot checks need the workers of a stage to hold the same "
                     "parameters: swarm.mode = \"swarm\", got \"diloco-swarm\""),
            std::string::npos)
      << msg;
  msg = error_of(
      "[swarm]\nmode = \"swarm\"\nstages = 2\nworkers_per_stage = 1\n"
      "[verify]\nfraction = 0.05\n");
  EXPECT_NE(msg.find("swarm.workers_per_stage >= 2 (3 to settle a mismatch)"), std::string::npos)
      << msg;
  msg = error_of(
      "[swarm]\nmode = \"swarm\"\nstages = 2\nworkers_per_stage = 3\n"
      "[verify]\nfraction = 1.5\n");
  EXPECT_NE(msg.find("verify.fraction: must be between 0 and 1"), std::string::npos) << msg;
  EXPECT_EQ(error_of("[swarm]\nmode = \"swarm\"\nstages = 2\nworkers_per_stage = 3\n"
                     "[verify]\nfraction = 0.05\ntolerance = 0.1\nseed = 3\n"),
            "");
  // Liars by id: exactly those, instead of the first malicious_workers of each stage.
  expect_refused("[chaos]\nmalicious_ids = \"0,x\"\n",
                 {"chaos.malicious_ids: must be worker ids separated by commas (e.g. "
                  "\"0,1,1000\"), not '0,x'"});
  {
    ChaosConfig ch;
    ch.malicious = Malicious::sign_flip;
    ch.malicious_ids = "0,1,1000";
    for (int64_t id : {0, 1, 1000}) EXPECT_TRUE(ch.is_malicious(id)) << id;
    for (int64_t id : {2, 1001, 10}) EXPECT_FALSE(ch.is_malicious(id)) << id;
    ch.malicious_ids.clear();
    ch.malicious_workers = 1;
    EXPECT_TRUE(ch.is_malicious(1000));
    EXPECT_FALSE(ch.is_malicious(1));
    ch.malicious = Malicious::none;
    EXPECT_FALSE(ch.is_malicious(0));
  }
  expect_refused("[chaos]\nmalicious = \"lie\"\n",
                 {"chaos.malicious: must be none, sign_flip, scale, random or stale, not 'lie'"});
  msg = error_of("[diloco]\nouter_lr_schedule = \"linear\"\n");
  EXPECT_NE(msg.find("diloco.outer_lr_schedule: must be constant or cosine, not 'linear'"),
            std::string::npos)
      << msg;
}

TEST(Config, SyntaxErrorHasLine) {
  expect_refused("[train]\nsteps = = 3\n", {"run.toml:2:", "syntax"});
}

TEST(Config, Overrides) {
  auto c = parse_config("[train]\nsteps = 3\n", "x",
                        {"train.steps=7", "swarm.mode=pp", "swarm.stages=2", "train.lr=0.5",
                         "data.path=\"a b.txt\""});
  EXPECT_EQ(c.train.steps, 7);
  EXPECT_EQ(c.swarm.mode, Mode::pp);
  EXPECT_EQ(c.swarm.stages, 2);
  EXPECT_EQ(c.train.lr, 0.5);
  EXPECT_EQ(c.data.path, "a b.txt");
  EXPECT_NE(error_of("", {"train.nope=1"}).find("unknown key 'train.nope'"), std::string::npos);
  EXPECT_NE(error_of("", {"steps=1"}).find("expected section.key=value"), std::string::npos);
  EXPECT_NE(error_of("", {"train.steps=abc"}).find("expected an integer"), std::string::npos);
}

TEST(Config, EffectiveConfigRoundTrips) {
  auto c = parse_config(
      "[train]\nlr = 0.00123\nschedule = \"cosine\"\n[swarm]\nwiring = \"uniform\"\n", "x");
  auto back = parse_config(to_toml(c), "effective");
  EXPECT_EQ(to_toml(back), to_toml(c));
  EXPECT_EQ(back.train.lr, 0.00123);
  EXPECT_EQ(back.train.schedule, Schedule::cosine);
  EXPECT_EQ(back.swarm.wiring, WiringPolicy::uniform);
}

// TOML allows inf and nan; no swarmrt key means either. Before, `round_timeout_s = inf` was
// taken as a wait without end and `lr = nan` passed every range check.
TEST(Config, InfAndNanAreRefused) {
  for (const char* text : {"[train]\nlr = nan\n", "[diloco]\nround_timeout_s = inf\n",
                           "[chaos]\nslow_factor = -inf\n", "[train]\ngrad_clip = +nan\n"}) {
    const auto msg = error_of(text);
    EXPECT_NE(msg.find("must be a finite number"), std::string::npos) << text << " -> " << msg;
  }
  expect_refused("[train]\nlr = nan\n", {"train.lr"});
}

TEST(Config, MaxMessageIsDerivedFromTheModelOrGiven) {
  auto c = parse_config("", "x");
  // tiny: about 0.9 M parameters, so twice their fp32 bytes plus 64 MiB.
  EXPECT_GT(c.max_message_bytes(), uint64_t{64} << 20);
  EXPECT_LT(c.max_message_bytes(), uint64_t{96} << 20);
  c = parse_config("[transport]\nmax_message_mib = 512\n", "x");
  EXPECT_EQ(c.max_message_bytes(), uint64_t{512} << 20);
  expect_refused("[transport]\nmax_message_mib = -1\n", {"transport.max_message_mib"});
}

// Each key's row says what it admits; the message is made from the row, so every key of a
// kind reads the same, and a value at a closed end of a range is admitted.
TEST(Config, EachKeyIsCheckedByItsRow) {
  const std::pair<const char*, const char*> refused[] = {
      {"[supervision]\nstate_timeout_s = 0\n", "supervision.state_timeout_s: must be > 0"},
      {"[supervision]\nretry_ms = 70000\n", "supervision.retry_ms: must be between 0 and 60000"},
      {"[train]\nbeta2 = 1\n", "train.beta2: must be in [0, 1)"},
      {"[model]\nvocab_size = 255\n", "model.vocab_size: must be between 256 and 1048576"},
      {"[transport]\nencrypt = \"maybe\"\n",
       "transport.encrypt: must be auto, on or off, not 'maybe'"},
      {"[data]\npath = \"\"\n", "data.path: must name a file or directory"},
  };
  for (const auto& [toml, message] : refused) expect_refused(toml, {message});
  auto c = parse_config("[chaos]\ndrop_fraction = 0.5\n[supervision]\nretry_ms = 0\n", "x");
  EXPECT_EQ(c.chaos.drop_fraction, 0.5);
  EXPECT_EQ(c.supervision.retry_ms, 0.0);
  // Choices are enums from here on, and written back by name.
  c = parse_config("[transport]\nlinks = \"comm\"\nencrypt = \"auto\"\n", "x");
  EXPECT_EQ(c.transport.links, Links::comm);
  EXPECT_EQ(c.transport.encrypt, Encrypt::automatic);
  const auto back = parse_config(to_toml(c), "effective");
  EXPECT_EQ(back.transport.links, Links::comm);
  EXPECT_EQ(back.transport.encrypt, Encrypt::automatic);
  EXPECT_NE(to_toml(c).find("comm"), std::string::npos);
}

// chaos.slowdown lists heterogeneous workers; a listed id overrides chaos.slow_worker, and a
// malformed list or a factor out of range is refused by name.
TEST(Config, SlowdownListGivesEachListedWorkerItsFactor) {
  auto c = parse_config("[chaos]\nslowdown = \"1:4, 1001:2.5\"\nslow_worker = 1\nslow_factor = 3\n",
                        "test");
  EXPECT_DOUBLE_EQ(c.chaos.slowdown_of(1), 4.0);
  EXPECT_DOUBLE_EQ(c.chaos.slowdown_of(1001), 2.5);
  EXPECT_DOUBLE_EQ(c.chaos.slowdown_of(0), 1.0);
  c.chaos.slowdown.clear();
  EXPECT_DOUBLE_EQ(c.chaos.slowdown_of(1), 3.0);  // slow_worker alone
  for (const char* bad : {"1-4", "1:0.5", "x:2", "1:4,,2:2"}) {
    try {
      parse_config(std::string("[chaos]\nslowdown = \"") + bad + "\"\n", "test");
      ADD_FAILURE() << bad << " accepted";
    } catch (const ConfigError& e) {
      EXPECT_NE(std::string(e.what()).find("chaos.slowdown"), std::string::npos) << e.what();
    }
  }
}

// Every configuration the project ships loads (a key renamed in code would break a file no
// test reads otherwise), and the GPU one is the benchmark's shape: gpt2-small in bf16, 16,384
// tokens a step in 4 micro-batches of 4.
TEST(Config, EveryShippedConfigLoads) {
  const char* data = std::getenv("SWARMRT_TEST_DATA");
  ASSERT_NE(data, nullptr) << "SWARMRT_TEST_DATA names data/brown.txt of the checkout";
  const auto configs = std::filesystem::path(data).parent_path().parent_path() / "configs";
  int loaded = 0;
  for (const auto& entry : std::filesystem::directory_iterator(configs)) {
    if (entry.path().extension() != ".toml") continue;
    EXPECT_NO_THROW(load_config(entry.path().string())) << entry.path();
    ++loaded;
  }
  EXPECT_GE(loaded, 8);
  const auto gpu = load_config((configs / "gpu-small.toml").string());
  EXPECT_EQ(gpu.model.preset, "gpt2-small");
  EXPECT_EQ(gpu.model.n_embd, 768);
  EXPECT_EQ(gpu.train.precision, Precision::bf16);
  EXPECT_EQ(gpu.tokens_per_step(), 16384);
  EXPECT_EQ(gpu.train.micro_batches, 4);
}

// A hop's blocks stay inside one position's vector: a block of 256 on a model of width 128
// spans two positions and is refused with a blockwise encoding; with none, or one stage (no
// hops), the key does not matter.
TEST(Config, HopBlocksThatSpanTwoPositionsAreRefused) {
  const std::string pp = "[model]\npreset = \"tiny\"\n[swarm]\nmode = \"pp\"\nstages = 2\n";
  for (const char* e : {"int8", "int4", "int5/3", "int3", "int4/2", "entropy"})
    expect_refused(pp + "hop_encoding = \"" + e + "\"\nhop_block = 256\n",
                   {"swarm.hop_block", "must divide model.n_embd (128)", e, "got 256"});
  EXPECT_EQ(parse_config(pp + "hop_encoding = \"int3\"\nhop_block = 128\n", "x").swarm.hop_block,
            128);
  EXPECT_EQ(parse_config(pp + "hop_encoding = \"none\"\nhop_block = 256\n", "x").swarm.hop_block,
            256);
  EXPECT_EQ(error_of("[model]\npreset = \"tiny\"\n[swarm]\nmode = \"single\"\nstages = 1\n"
                     "workers_per_stage = 1\nhop_encoding = \"int4\"\nhop_block = 256\n"),
            "");
}

// swarm.compression = auto needs hops to choose for and encodings to choose among.
TEST(Config, AutoCompressionNeedsStagesAndAFloor) {
  const std::string pp =
      "[model]\npreset = \"tiny\"\n[swarm]\nmode = \"pp\"\ncompression = \"auto\"\n";
  expect_refused(pp + "stages = 1\nhop_encoding = \"int8\"\n",
                 {"swarm.compression", "swarm.stages = 1 there are no hops"});
  expect_refused(pp + "stages = 2\n", {"swarm.compression", "nothing to choose", "hop_encoding"});
  // entropy's bytes depend on the values: no size to choose it by.
  expect_refused(pp + "stages = 2\nhop_encoding = \"entropy\"\n",
                 {"swarm.compression", "depend on the values", "int4/2"});
  const auto c = parse_config(pp + "stages = 2\nhop_encoding = \"int4\"\n", "x");
  EXPECT_EQ(c.swarm.compression, Compression::automatic);
  expect_refused(pp + "stages = 2\nhop_encoding = \"int4\"\nhop_block = 256\n",
                 {"swarm.hop_block", "must divide model.n_embd"});
  expect_refused("[swarm]\ncompression = \"sometimes\"\n", {"swarm.compression", "sometimes"});
  // ... or sparse DiLoCo rounds, whose density it chooses: then one stage and no floor do.
  const std::string diloco =
      "[model]\npreset = \"tiny\"\n[swarm]\nmode = \"diloco\"\nstages = 1\n"
      "workers_per_stage = 2\ncompression = \"auto\"\n";
  EXPECT_EQ(parse_config(diloco + "[diloco]\ncompress = \"topk\"\n", "x").swarm.compression,
            Compression::automatic);
  expect_refused(diloco, {"swarm.compression", "density of sparse DiLoCo rounds"});
}

// Each entry is H:STEPS with STEPS whole rounds of H; anything else is refused by name.
TEST(Config, InnerStepsScheduleRefusesWhatIsNotWholeRounds) {
  EXPECT_TRUE(parse_inner_schedule("").empty());
  const auto phases = parse_inner_schedule("16:256, 32 : 512");
  ASSERT_EQ(phases.size(), 2u);
  EXPECT_EQ(phases[1].inner_steps, 32);
  EXPECT_EQ(phases[1].steps, 512);
  auto error = [](const std::string& spec) {
    try {
      parse_inner_schedule(spec);
    } catch (const std::invalid_argument& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  EXPECT_NE(error("16:100").find("phase '16:100' must run whole rounds: 100 steps are not a "
                                 "multiple of H = 16"),
            std::string::npos)
      << error("16:100");
  for (const char* bad : {"16", "0:16", "16:0", "a:16", "16:16,", "-4:8", "16:16;32:32"})
    EXPECT_NE(error(bad).find("must be H:STEPS entries"), std::string::npos) << bad;
}

// diloco.all_gather sums the wires as sent with the plain mean's step: it needs encoded rounds,
// the mean, no outer momentum and no eager steps, and is admitted with them.
TEST(Config, AllGatherNeedsEncodedRoundsAndThePlainMean) {
  const std::string ok =
      "[diloco]\nall_gather = true\ncompress = \"topk\"\nouter_momentum = 0.0\nouter_lr = 2.0\n";
  EXPECT_EQ(error_of(ok), "");
  const char* need = "diloco.all_gather: needs diloco.compress";
  expect_refused("[diloco]\nall_gather = true\nouter_momentum = 0.0\n", {need});
  expect_refused("[diloco]\nall_gather = true\ncompress = \"topk\"\n", {need});
  expect_refused(ok + "aggregate = \"trimmed_mean\"\n", {need});
  EXPECT_EQ(parse_config(ok, "x").diloco.all_gather, true);
}
