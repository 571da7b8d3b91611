// Run configuration: the TOML file a user writes, checked key by key. Every key lives in one
// table (config.cpp, `fields()`), which drives loading, `--set` overrides, unknown keys and
// the effective config written back, so no key is known to one of those and not another.
#pragma once

#include <chrono>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

namespace swarmrt::config {

struct ConfigError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Keys with a fixed set of values are enums, read from their names once, where the file is
// parsed. names<E>() lists the names a config file uses, in the enum's order.
enum class Mode { single, pp, dp, swarm, diloco, diloco_swarm };
// model.arch: GPT-2's block (model/gpt.hpp) or Llama's (model/llama.hpp).
enum class Arch { gpt2, llama };
enum class Schedule { constant, cosine };
// swarm.wiring (policy/wiring.hpp): SWARM's throughput-proportional choice, or uniform.
enum class WiringPolicy { throughput, uniform };
enum class Links { automatic, comm, frames };
enum class Encrypt { automatic, on, off };
// applied: every worker has taken the step and its record is not yet written.
enum class KillPhase { start, reduce, apply, save, eval, join, applied };
enum class FragmentPattern { strided, sequential };   // Streaming DiLoCo, model/fragments.hpp
enum class Quantize { none, fp16, int8, int4, fp4 };  // outer gradients, model/quantize.hpp
enum class Compress { none, topk };  // outer gradients' sparsification, model/topk.hpp
// diloco.aggregate and swarm.grad_aggregate: how a round combines the workers' pseudo-gradients,
// and a grad averager their gradients (model/robust_mean.hpp).
enum class Aggregate { mean, centered_clip, trimmed_mean };
// chaos.malicious: what a misbehaving worker sends as its pseudo-gradient.
enum class Malicious { none, sign_flip, scale, random, stale };
// data.format: UTF-8 text read as bytes, or token shards in llm.c's .bin layout (tokens/).
enum class DataFormat { bytes, tokens };
// train.precision: the dtype forward and backward compute in (model/precision.hpp); weights,
// AdamW and DiLoCo state stay float32 whatever it is.
enum class Precision { fp32, bf16, fp16 };
// train.loss_scale: the dynamic loss scaler with fp16 only (auto), always, or never.
enum class LossScale { automatic, dynamic, off };
// swarm.hop_encoding: how hidden states and their gradients cross stages (model/hop_codec.hpp).
enum class HopEncoding { none, bf16, int8, int4, int5_3, int3, int4_2, entropy };
// swarm.compression: hops in swarm.hop_encoding, sparse rounds at diloco.topk_density (fixed),
// or each link's least compressed down to them that hides under compute (policy/hop_choice.hpp).
enum class Compression { fixed, automatic };

template <class E>
const std::vector<std::string>& names();
template <>
const std::vector<std::string>& names<Mode>();
template <>
const std::vector<std::string>& names<Arch>();
template <>
const std::vector<std::string>& names<Schedule>();
template <>
const std::vector<std::string>& names<WiringPolicy>();
template <>
const std::vector<std::string>& names<Links>();
template <>
const std::vector<std::string>& names<Encrypt>();
template <>
const std::vector<std::string>& names<KillPhase>();
template <>
const std::vector<std::string>& names<FragmentPattern>();
template <>
const std::vector<std::string>& names<Quantize>();
template <>
const std::vector<std::string>& names<Compress>();
template <>
const std::vector<std::string>& names<Aggregate>();
template <>
const std::vector<std::string>& names<Malicious>();
template <>
const std::vector<std::string>& names<DataFormat>();
template <>
const std::vector<std::string>& names<Precision>();
template <>
const std::vector<std::string>& names<LossScale>();
template <>
const std::vector<std::string>& names<HopEncoding>();
template <>
const std::vector<std::string>& names<Compression>();

template <class E>
const std::string& name_of(E value) {
  return names<E>().at(static_cast<size_t>(value));
}

// "must be a, b or c, not 'text'".
std::string must_be_one_of(const std::vector<std::string>& names, const std::string& text);

// The value named `text`; ConfigError(must_be_one_of(...)) otherwise.
template <class E>
E parse_choice(const std::string& text) {
  const auto& all = names<E>();
  for (size_t i = 0; i < all.size(); ++i)
    if (all[i] == text) return static_cast<E>(i);
  throw ConfigError(must_be_one_of(all, text));
}

// A key in seconds as the duration a request or a timer takes.
inline std::chrono::milliseconds as_duration(double seconds) {
  return std::chrono::milliseconds(static_cast<int64_t>(seconds * 1000));
}

struct ModelConfig {
  std::string preset = "tiny";  // see model_preset(); explicit keys override it
  int64_t n_layer = 4;
  int64_t n_head = 4;
  int64_t n_embd = 128;
  int64_t block_size = 128;
  int64_t vocab_size = 256;  // byte tokenizer
  Arch arch = Arch::gpt2;
  bool tie_embeddings = false;  // the head reuses the token embedding matrix

  // Width of the MLP's hidden layer: GPT-2's 4d, or Llama's SwiGLU width 2/3 of 4d (so its
  // three matrices cost what GPT-2's two do), rounded up to a multiple of 32 as Llama rounds
  // to its `multiple_of`.
  int64_t ffn_hidden() const {
    if (arch == Arch::gpt2) return 4 * n_embd;
    const int64_t h = (8 * n_embd + 2) / 3;
    return (h + 31) / 32 * 32;
  }
  // Parameters of one block: attention (4 d x d matrices) + MLP + norms (+ GPT-2's biases).
  uint64_t block_parameters() const {
    const uint64_t d = uint64_t(n_embd), f = uint64_t(ffn_hidden());
    if (arch == Arch::gpt2) return 4 * d * d + 2 * d * f + (3 * d + d + f + d) + 4 * d;
    return 4 * d * d + 3 * d * f + 2 * d;
  }
  // Parameters outside the blocks: embeddings (GPT-2's positions too), final norm, head.
  uint64_t outer_parameters() const {
    const uint64_t d = uint64_t(n_embd), V = uint64_t(vocab_size);
    const uint64_t embeddings = V * d + (arch == Arch::gpt2 ? uint64_t(block_size) * d : 0);
    const uint64_t final_norm = arch == Arch::gpt2 ? 2 * d : d;
    return embeddings + final_norm + (tie_embeddings ? 0 : V * d);
  }
  uint64_t parameters() const {
    return uint64_t(n_layer) * block_parameters() + outer_parameters();
  }
};

struct TrainConfig {
  int64_t steps = 300;
  int64_t micro_batch = 16;   // sequences per micro-batch
  int64_t micro_batches = 1;  // micro-batches per step (gradient accumulation)
  double lr = 4e-4;
  double min_lr = 4e-5;  // floor of the cosine schedule
  int64_t warmup_steps = 30;
  Schedule schedule = Schedule::constant;
  double weight_decay = 0.1;
  double beta1 = 0.9;
  double beta2 = 0.95;
  double grad_clip = 1.0;
  int64_t seed = 1337;
  int64_t eval_every = 100;
  int64_t eval_batches = 16;
  int64_t threads = 1;  // torch intra-op threads per process
  int64_t log_every = 1;
  Precision precision = Precision::fp32;
  LossScale loss_scale = LossScale::automatic;
  // Whether the dynamic loss scaler runs (model/precision.hpp).
  bool scales_loss() const {
    return loss_scale == LossScale::dynamic ||
           (loss_scale == LossScale::automatic && precision == Precision::fp16);
  }
};

struct DataConfig {
  std::string path = "data/brown.txt";
  DataFormat format = DataFormat::bytes;
  double val_fraction = 0.05;
};

struct SwarmConfig {
  Mode mode = Mode::single;
  int64_t stages = 1;
  int64_t workers_per_stage = 1;
  WiringPolicy wiring = WiringPolicy::throughput;
  int64_t max_inflight = 4;
  int64_t loaders = 1;
  HopEncoding hop_encoding = HopEncoding::none;
  int64_t hop_block = 128;  // values per scale of int8/int4 hops (a power of two)
  Compression compression = Compression::fixed;
  // How a stage's grad averager combines its workers' gradients (pp, dp, swarm, and the
  // synchronous warm-up of the DiLoCo modes): the mean over the samples, or a robust
  // aggregate of each worker's mean gradient with diloco.clip_radius, clip_iterations,
  // clip_drop and trim (model/robust_mean.hpp).
  Aggregate grad_aggregate = Aggregate::mean;
};

// One phase of diloco.inner_steps_schedule: `steps` local steps with H = inner_steps.
struct InnerPhase {
  int64_t inner_steps = 0;
  int64_t steps = 0;
};

// diloco.inner_steps_schedule's phases ("H:STEPS,...", empty: none). Throws
// std::invalid_argument naming the entry that is not H:STEPS with H >= 1 and STEPS a positive
// multiple of H (a phase of whole rounds, so every fragment syncs in it as often as the others).
std::vector<InnerPhase> parse_inner_schedule(const std::string& spec);

struct DilocoConfig {
  int64_t inner_steps = 50;  // H
  double outer_lr = 0.7;
  double outer_momentum = 0.9;
  int64_t min_replicas = 1;
  double round_timeout_s = 30.0;
  // Streaming DiLoCo (architecture §6): P fragments synced at staggered steps, a round's
  // merge τ inner steps after it starts, outer gradients quantized on the wire. P = 1, τ = 0,
  // none: plain DiLoCo, bit for bit.
  int64_t fragments = 1;  // P
  FragmentPattern fragment_pattern = FragmentPattern::strided;
  int64_t overlap_steps = 0;  // τ < H/P
  double alpha = 0.0;         // merge: θ_i ← α·θ_i + (1 − α)·θ_global
  Quantize quantize = Quantize::none;
  int64_t quant_block = 128;
  bool error_feedback = true;  // carry each side's quantization error to its next round
  // Sparse rounds (SparseLoCo, Sarfi et al. 2025): each chunk of topk_chunk values of a round's
  // tensors keeps its ceil(topk_density x chunk) largest magnitudes, coded in topk_bits (sign
  // and magnitude between the chunk's smallest and largest kept); the rest waits in the error
  // feedback (diloco.error_feedback) for a later round. In place of diloco.quantize.
  Compress compress = Compress::none;
  double topk_density = 0.01;
  int64_t topk_bits = 2;
  int64_t topk_chunk = 4096;
  bool all_gather = false;  // answers: the others' contributions as sent (SparseLoCo's all-gather)
  // Eager outer step (Kale et al. 2025): at a round's start a worker takes a local outer step
  // with its fresh Δ_i and the others' Δ of the last round, instead of waiting τ steps for
  // the mean (model::eager_delta). Needs overlap_steps >= 1.
  bool eager = false;
  // Synchronous warm-up (DiLoCo, Douillard et al. 2023, starts its replicas from a data-parallel
  // checkpoint; post-local SGD, Lin et al. 2020, syncs first): steps 1..K average gradients
  // every step as swarm mode does, and the rounds count from θ at step K (anchors and the outer
  // optimizer start there). 0: local steps from the first.
  int64_t warmup_sync_steps = 0;  // K
  // The warm-up's gradients on the wire (docs/streaming.md, "Sparse warm-up"): none (float32),
  // or topk: each worker sends the largest warmup_density of each topk_chunk values of its
  // gradient plus what it left unsent so far (error feedback), in topk_bits, and every worker
  // sums every worker's sparse gradient, so the replicas stay equal.
  Compress warmup_compress = Compress::none;
  double warmup_density = 0.005;
  // H small early and growing (DiLoCo's ablations and the scaling-law runs sync more often
  // while the loss falls fast): "H:STEPS,..." runs STEPS local steps at each H in turn, counted
  // from the warm-up's end, then diloco.inner_steps for the rest. Empty: H throughout.
  // Parsed and checked by parse_inner_schedule (above).
  std::string inner_steps_schedule;
  // The outer learning rate over the rounds: constant, or cosine decay from outer_lr at the
  // warm-up's end to outer_min_lr at train.steps (model::outer_lr_at).
  Schedule outer_lr_schedule = Schedule::constant;
  double outer_min_lr = 0.0;
  // A round's Δ from its contributions (model/robust_mean.hpp): their mean, CenteredClip
  // (Karimireddy et al. 2021, as BTARD uses it: clip_iterations steps from the coordinate-wise
  // median, each clipping every Δ_i − v to clip_radius, 0 = the median of those distances),
  // or the coordinate-wise mean of what is left after dropping the `trim` largest and smallest.
  // Anything but the mean sends every Δ_i to the group (no all-reduce among the workers).
  // clip_drop > 0: after the iterations, the contributions farther from v than clip_drop times
  // the median distance are dropped and v is the mean of the others (an outlier costs nothing,
  // not the τ/n pull each iteration leaves CenteredClip with).
  Aggregate aggregate = Aggregate::mean;
  double clip_radius = 0.0;
  int64_t clip_iterations = 3;
  double clip_drop = 0.0;
  int64_t trim = 1;

  // How a round's tensors travel: "topk 1% 2-bit", "int8", "none" (messages, logs, console).
  std::string encoding() const;

  // Whether `step` (from 1) is one of the warm-up's gradient-synchronized steps.
  bool warming(uint64_t step) const { return static_cast<int64_t>(step) <= warmup_sync_steps; }

  // Whether every round is the whole stage's in float32, answered before the next step (one
  // fragment, no overlap, no quantization; eager needs an overlap). Only such rounds can be
  // all-reduced over the group's communicator, and continued from a node's kept states.
  bool whole_rounds() const { return fragments == 1 && overlap_steps == 0 && !encoded(); }
  // Whether a round's tensors travel encoded (quantized or sparse) rather than as float32.
  bool encoded() const { return quantize != Quantize::none || compress != Compress::none; }
};

struct CheckpointConfig {
  int64_t every_steps = 100;  // 0 disables periodic checkpoints
  int64_t keep = 3;
};

// Fault injection (architecture §7). Local to each run, so not part of the fingerprint.
struct ChaosConfig {
  double link_delay_ms = 0;  // every frame sent on a process link waits this long first
  double link_mbit_s = 0;    // every process link carries frames at most this fast; 0: no cap
  // This fraction of micro-batch hops between workers (activations forward, gradients back)
  // is lost on the way; the tracker re-runs what does not come back (see supervision).
  double drop_fraction = 0;
  int64_t slow_worker = -1;  // worker id whose compute is stretched, -1: none
  double slow_factor = 1.0;  // by this factor
  // Heterogeneous workers: "ID:FACTOR,ID:FACTOR,..." stretches each listed worker's compute by
  // its factor (a listed id overrides slow_worker); empty: none. See slowdown_of().
  std::string slowdown;

  // The factor chaos.slowdown (or slow_worker) gives worker `id`; 1 when none.
  double slowdown_of(int64_t id) const;
  // Worker id whose gradient and DiLoCo pseudo-gradient sent in step nan_at_step carry a NaN
  // (the receiver must refuse them), -1: none. Its own parameters stay as they are.
  int64_t nan_worker = -1;
  int64_t nan_at_step = 0;
  // In this step the gradient overflows as an fp16 one does (its loss seed is infinite), so
  // that the loss scaler's skip can be seen; 0: never. Needs the loss scaler (fp16, or
  // train.loss_scale = "dynamic").
  int64_t overflow_at_step = 0;
  // What to kill: an actor by name ("stage1/worker1", "stage0/diloco", "loader/0",
  // "stage0/averager", "tracker"), a random actor of a kind ("worker", "group", "loader",
  // "averager", "tracker", "any"), or "node" (a random node process, coordinator side).
  std::string kill;
  int64_t kill_at_step = 0;  // once, in this step; 0: never
  // Where in that step: "start" (as it starts dispatching), "reduce" (every micro-batch has
  // completed) or "apply" (the workers are told to take the optimizer step), ...; "join": as
  // the directory takes the first node's join from that step on, before it answers.
  KillPhase kill_at_phase = KillPhase::start;
  double kill_every_s = 0;  // repeatedly, every this many seconds; 0: never
  int64_t kill_limit = 0;   // at most this many kills by kill_every_s; 0: no limit
  int64_t seed = 1;         // picks the victims of kind kills
  // Misbehaviour on purpose (docs/security.md): the first malicious_workers workers of each
  // stage (ids K*1000 + 0, 1, ...) send, from malicious_from_step on, their DiLoCo
  // pseudo-gradient or their gradient to the stage's averager sign-flipped and scaled by
  // malicious_scale, only scaled, or replaced by Gaussian noise of malicious_scale times its
  // norm. Their own parameters stay honest.
  Malicious malicious = Malicious::none;
  int64_t malicious_workers = 1;
  int64_t malicious_from_step = 0;
  double malicious_scale = 10.0;
  // The same workers, from the same step, add Gaussian noise of hop_noise times a tensor's RMS
  // to the activations and input gradients they send in training (0: none).
  double hop_noise = 0.0;
  // Instead of the first malicious_workers of each stage: exactly these worker ids, separated
  // by commas ("0,1,1000": two liars on stage 0 and one on stage 1); empty: malicious_workers.
  std::string malicious_ids;
  // Whether worker `id` misbehaves in this run.
  bool is_malicious(int64_t id) const;
};

// Restart policy of every supervisor (architecture §7): a child that dies is restarted after a
// backoff that doubles with each recent restart; more than max_restarts within restart_window_s and
// the supervisor gives up and escalates. Local, not part of the fingerprint.
struct SupervisionConfig {
  int64_t max_restarts = 10;
  double restart_window_s = 10.0;
  double backoff_ms = 20;
  double max_backoff_ms = 2000;
  // When a micro-batch of the open step counts as lost (a hop that never arrived:
  // chaos.drop_fraction, a link that broke) and is re-run (policy/hop_deadline.hpp): once it
  // has been still, with no live worker at work on it, for factor x the slowest recent hop,
  // within [microbatch_timeout_s, microbatch_timeout_max_s]. A micro-batch a live worker is
  // computing is waited for up to the ceiling. Each loss doubles its next wait; past
  // microbatch_max_losses losses of one micro-batch the run ends.
  double microbatch_timeout_s = 30;
  double microbatch_timeout_factor = 4;
  double microbatch_timeout_max_s = 3600;
  int64_t microbatch_max_losses = 8;
  // How long an actor waits for a peer that may have died (its supervisor restarts it, and
  // the asker asks the new one). Each wait is bounded so that a lost reply cannot stall a run.
  double state_timeout_s = 60;   // a peer's state or parameters, a loader's batch
  double reply_timeout_s = 30;   // a worker's answer to cancel or reset
  double query_timeout_s = 10;   // counters and membership asked at the end of a run
  double start_timeout_s = 600;  // a new worker's wait for the state it starts from
  double retry_ms = 100;         // pause before asking a restarting loader or group again
  // A console command that kills or freezes a process answers first and acts this much
  // later, so that the answer has left the process before it ends or stops.
  double answer_lead_ms = 300;
};

// How tensors travel between stage workers in different processes (transport/).
struct TransportConfig {
  // "auto": NCCL links between CUDA workers, frames otherwise; "comm": a communicator link
  // between every pair of workers that exchange hops (NCCL between CUDA workers, TCP
  // otherwise); "frames": frames only (a TCP frame link per process, or CAF chunks).
  Links links = Links::automatic;
  double comm_timeout_s = 60;  // a link's join, and each of its receives, waits at most this
  // The largest frame (micro-batch hop, round, state) a process accepts from a peer, checked
  // before anything is allocated for it; 0: derived from the model (max_message_bytes).
  int64_t max_message_mib = 0;
  // Frame links inside TLS 1.3 (after the credential handshake): "auto" encrypts links to
  // peers beyond loopback, "on" every link, "off" none (the handshake still authenticates).
  Encrypt encrypt = Encrypt::automatic;
};

// Where workers serve (policy/balancer.hpp): every period_s (jittered) the balancer plans up
// to max_moves moves, each the one that raises the slowest stages most, and makes them when
// together they raise the pipeline's throughput by more than min_gain. The coordinator's
// balancer and `swarmrt simulate` read it. Local, not part of the fingerprint.
struct BalancerConfig {
  bool enabled = true;  // false: placements stay as the swarm starts (DiLoCo-SWARM's behaviour)
  double period_s = 30;
  double min_gain = 0.05;
  int64_t min_workers = 1;
  double cooldown_s = 120;
  int64_t max_moves = 4;  // moves planned in one period at most
};

// `swarmrt simulate` (policy/simulator.hpp): a swarm of `peers` for `hours`, its stages and
// model from the sections above. Local, not part of the fingerprint.
struct SimulateConfig {
  int64_t peers = 1000;
  double hours = 1;
  double min_rate = 10;            // samples/s of the slowest peer on a stage of average cost
  double speed_spread = 10;        // fastest / slowest, log-uniform in between
  double failures_per_hour = 0.1;  // per peer
  double recovery_s = 600;         // mean time before a failed peer is back; 0: never
  double joins_per_hour = 0;       // new peers per hour, as a fraction of `peers`
  double link_mbit_s = 100;        // every peer's link; 0: unlimited
  double latency_ms = 20;
  double noise = 0.05;   // relative error of a measured rate
  double sample_s = 60;  // seconds between points of the time series
  int64_t seed = 1;
  // Recovery: a peer that (re)enters takes its stage's state from up to `donors` live holders
  // at once, each sparing `donor_share` of its link (its own link caps the sum).
  int64_t donors = 1;
  double donor_share = 1;
  // The synchronous baseline (every peer in lockstep, no fault tolerance): a failure stops it;
  // it restarts from its last checkpoint after sync_restart_s.
  double sync_checkpoint_s = 600;
  double sync_restart_s = 120;
};

// How a restarted or joining worker of a grad-sync mode takes its stage's state from live
// peers (actors/recovery/): each peer asked snapshots its state between steps, and the joiner
// fetches checksummed chunks from all of them at once, a window of chunks per donor; a donor
// that dies, stalls or sends a bad chunk is dropped and its chunks come from the others.
// Local, not part of the fingerprint.
struct RecoveryConfig {
  int64_t donors = 4;           // peers a joiner takes its state from at once
  int64_t chunk_mib = 4;        // bytes in one chunk
  int64_t window = 4;           // chunks asked of one donor and not yet arrived
  int64_t max_joiners = 4;      // joiners one donor serves at once; the rest wait for a turn
  double chunk_timeout_s = 10;  // a donor whose asked chunks stop coming for this long is dropped
};

// Spot checks of stage work (docs/security.md): once a step's micro-batches are all back and
// before it is reduced, the tracker has another worker of a stage compute again, from the
// input the stage's worker was sent, what that worker sent on, and the next-stage worker that
// received it compares the two; a mismatch is settled by a third worker and the worker found
// wrong is banned (the step then runs again without it). Needs workers of a stage that hold
// the same parameters: swarm mode.
struct VerifyConfig {
  double fraction = 0.0;   // the chance that one stage's work on one micro-batch is checked
  double tolerance = 0.0;  // relative RMS difference allowed; 0 = from precision and hop encoding
  int64_t seed = 0;        // what is checked is drawn from it; 0 = the system's random source
};

struct RunConfig {
  ModelConfig model;
  TrainConfig train;
  DataConfig data;
  SwarmConfig swarm;
  DilocoConfig diloco;
  CheckpointConfig checkpoint;
  ChaosConfig chaos;
  SupervisionConfig supervision;
  TransportConfig transport;
  BalancerConfig balancer;
  SimulateConfig simulate;
  RecoveryConfig recovery;
  VerifyConfig verify;

  // transport.max_message_mib in bytes, or when 0 four times the whole model's fp32 parameter
  // bytes plus 64 MiB: the largest message is a stage's state (parameters, DiLoCo anchor and
  // AdamW's two moments), or one hop.
  uint64_t max_message_bytes() const {
    if (transport.max_message_mib > 0) return uint64_t(transport.max_message_mib) << 20;
    return 4 * 4 * model.parameters() + (uint64_t{64} << 20);
  }

  // Tokens in one optimizer step, the unit every mode shares.
  int64_t tokens_per_step() const {
    return train.micro_batch * train.micro_batches * model.block_size;
  }
};

// Parses `text` (named `origin` in messages) with `overrides` of the form "section.key=value"
// applied on top. Throws ConfigError naming origin, key and what was expected.
RunConfig parse_config(const std::string& text, const std::string& origin,
                       const std::vector<std::string>& overrides = {});
RunConfig load_config(const std::string& path, const std::vector<std::string>& overrides = {});

// The effective configuration as TOML; parse_config(to_toml(c)) == c.
std::string to_toml(const RunConfig& config);

// Values of the model presets.
ModelConfig model_preset(const std::string& name);

// Whether "section.key" must be equal on every node of a swarm (it is in the config
// fingerprint); false for keys each node sets for itself and for unknown keys.
bool is_shared_key(const std::string& dotted);

// Checks every key against its row (range, allowed values) and then the relations between
// keys (n_embd divisible by n_head, stages <= n_layer, ...).
void validate(const RunConfig& config, const std::string& origin);

}  // namespace swarmrt::config
