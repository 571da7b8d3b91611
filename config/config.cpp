// The configuration's one table: every key with its scope, the values it admits and its help
// (torchtitan keeps its job config the same way). Reading TOML is toml.cpp's job.
#include <regex>
#include <set>

#include "config/config.hpp"
#include "config/rows.hpp"

namespace swarmrt::config {
namespace rows {
namespace {

std::string not_empty(const std::string& v) {
  return v.empty() ? "must name a file or directory" : "";
}

// chaos.kill: a kind of actor, "node", "coordinator" (the leading coordinator's process), or
// one actor by its name (the console's names: stageK/workerR, stageK/diloco, stageK/averager,
// loader/I, tracker).
std::string kill_target(const std::string& k) {
  static const std::set<std::string> kinds = {
      "", "worker", "group", "loader", "averager", "tracker", "any", "node", "coordinator"};
  static const std::regex named(R"(stage\d+/(worker\d+|diloco|averager)|loader/\d+)");
  if (kinds.count(k) || std::regex_match(k, named)) return "";
  return "must be worker, group, loader, averager, tracker, any, node, coordinator or a name "
         "such as "
         "stage1/worker1, stage0/diloco, stage0/averager or loader/0, not '" +
         k + "'";
}

// chaos.malicious_ids: worker ids separated by commas, or empty.
std::string id_list(const std::string& v) {
  static const std::regex ids(R"(\d{1,9}(,\d{1,9})*)");
  if (v.empty() || std::regex_match(v, ids)) return "";
  return "must be worker ids separated by commas (e.g. \"0,1,1000\"), not '" + v + "'";
}

// chaos.slowdown: "ID:FACTOR" entries, comma-separated, each factor between 1 and 1000.
std::string slowdown_list(const std::string& v) {
  static const std::regex entry(R"(\s*(\d+)\s*:\s*([0-9]+(\.[0-9]*)?)\s*)");
  if (v.empty()) return "";
  size_t start = 0;
  while (start <= v.size()) {
    const auto end = std::min(v.find(',', start), v.size());
    const auto item = v.substr(start, end - start);
    std::smatch m;
    if (!std::regex_match(item, m, entry))
      return "must be ID:FACTOR entries separated by commas (e.g. \"1:4,1001:2\"), not '" + item +
             "'";
    const double f = std::stod(m[2]);
    if (f < 1 || f > 1000)
      return "factor of worker " + m[1].str() + " must be between 1 and 1000, not " + m[2].str();
    start = end + 1;
  }
  return "";
}

// diloco.inner_steps_schedule: "H:STEPS" phases of whole rounds (parse_inner_schedule, config.hpp).
std::string inner_schedule(const std::string& v) {
  try {
    parse_inner_schedule(v);
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "";
}

}  // namespace

#define SWARMRT_FIELD(sec, name, scope, range, check, help)                                      \
  Field {                                                                                        \
#sec, #name, [](RunConfig & c) { return slot_of(&c.sec.name); }, Scope::scope, range, check, \
                                                                  help                           \
  }
#define SWARMRT_NUMBER(sec, name, scope, range, help) \
  SWARMRT_FIELD(sec, name, scope, range, nullptr, help)
#define SWARMRT_CHOICE(sec, name, scope, help) SWARMRT_FIELD(sec, name, scope, any(), nullptr, help)

// The rows of what is trained and how: model, train, data, swarm, checkpoint.
static std::vector<Field> training_rows() {
  return {
      SWARMRT_FIELD(model, preset, shared, any(), nullptr,
                    "tiny | gpt2-small | llama-tiny | llama-small"),
      SWARMRT_CHOICE(model, arch, shared,
                     "gpt2 (LayerNorm, learned positions, GELU) | llama (RMSNorm, rotary "
                     "positions, SwiGLU, no biases)"),
      SWARMRT_NUMBER(model, n_layer, shared, at_least(1), "transformer blocks"),
      SWARMRT_NUMBER(model, n_head, shared, at_least(1), "attention heads"),
      SWARMRT_NUMBER(model, n_embd, shared, at_least(1), "embedding width"),
      SWARMRT_NUMBER(model, block_size, shared, at_least(2),
                     "context length in tokens (bytes for byte data)"),
      SWARMRT_NUMBER(model, vocab_size, shared, between(256, 1 << 20),
                     "token ids; byte data uses 256, token data at least the tokenizer's pieces "
                     "(a directory of `data prepare` gives its own unless this is set)"),
      SWARMRT_FIELD(model, tie_embeddings, shared, any(), nullptr,
                    "the head reuses the token embeddings (needs swarm.stages = 1)"),
      SWARMRT_NUMBER(train, steps, shared, at_least(1), "optimizer steps"),
      SWARMRT_NUMBER(train, micro_batch, shared, at_least(1), "sequences per micro-batch"),
      SWARMRT_NUMBER(train, micro_batches, shared, at_least(1), "micro-batches per step"),
      SWARMRT_NUMBER(train, lr, shared, above(0), "peak inner learning rate"),
      SWARMRT_NUMBER(train, min_lr, shared, at_least(0), "cosine floor, at most train.lr"),
      SWARMRT_NUMBER(train, warmup_steps, shared, at_least(0), "linear warmup steps"),
      SWARMRT_CHOICE(train, schedule, shared, "learning-rate schedule after warmup"),
      SWARMRT_NUMBER(train, weight_decay, shared, at_least(0),
                     "AdamW weight decay (matrices only)"),
      SWARMRT_NUMBER(train, beta1, shared, fraction_below_one(), "AdamW beta1"),
      SWARMRT_NUMBER(train, beta2, shared, fraction_below_one(), "AdamW beta2"),
      SWARMRT_NUMBER(train, grad_clip, shared, at_least(0),
                     "global gradient-norm clip, 0 disables"),
      SWARMRT_NUMBER(train, seed, shared, any(), "initialization and data-order seed"),
      SWARMRT_NUMBER(train, eval_every, shared, at_least(0),
                     "steps between evaluations, 0 = only at the end"),
      SWARMRT_NUMBER(train, eval_batches, shared, at_least(1),
                     "validation micro-batches per evaluation"),
      SWARMRT_NUMBER(train, threads, node, at_least(1),
                     "compute threads per process (OpenBLAS GEMMs; torch's pool without OpenBLAS)"),
      SWARMRT_NUMBER(train, log_every, node, at_least(1), "steps between progress lines"),
      SWARMRT_CHOICE(train, precision, shared,
                     "compute dtype of forward and backward (autocast): fp32, bf16, or fp16 with "
                     "a dynamic loss scaler; weights and optimizer state stay fp32 (CPU: fp32 or "
                     "bf16; CUDA: all three)"),
      SWARMRT_CHOICE(train, loss_scale, shared,
                     "dynamic loss scaling (overflowing steps skipped): auto = with fp16 only, "
                     "dynamic = always, off = never"),
      SWARMRT_FIELD(data, path, node, any(), not_empty,
                    "UTF-8 text file or directory (bytes); a directory of .bin shards (tokens)"),
      SWARMRT_CHOICE(data, format, shared,
                     "bytes (each byte a token) or tokens (shards of `swarmrt data prepare` or "
                     "llm.c; files named *val* are validation)"),
      SWARMRT_NUMBER(data, val_fraction, shared, open_unit(),
                     "tail fraction held out for validation (bytes; token shards hold theirs)"),
      SWARMRT_CHOICE(swarm, mode, shared, "how the model is split and replicated"),
      SWARMRT_NUMBER(swarm, stages, shared, at_least(1), "pipeline stages, at most n_layer"),
      SWARMRT_NUMBER(swarm, workers_per_stage, shared, at_least(1), "workers serving each stage"),
      SWARMRT_CHOICE(swarm, wiring, shared, "how a stage picks the next stage's worker"),
      SWARMRT_NUMBER(swarm, max_inflight, shared, at_least(1),
                     "micro-batches in flight per worker"),
      SWARMRT_NUMBER(swarm, loaders, shared, at_least(1), "data loader actors (disjoint shards)"),
      SWARMRT_CHOICE(swarm, hop_encoding, shared,
                     "activations and input gradients between stages: none (the compute dtype), "
                     "bf16, int8 (blockwise), int4 (Hadamard-rotated blocks, gradients rounded "
                     "stochastically), int5/3 (as int4, 5 bits forward and 3 back), int3 (as "
                     "int4 in 3 bits both ways), int4/2 (4 bits forward, 2 back, bfloat16 "
                     "scales: 10.2x fewer bytes than float32) or entropy (rotated blocks in "
                     "steps of their RMS, Huffman-coded: the size varies, about 10x fewer)"),
      SWARMRT_NUMBER(swarm, hop_block, shared, between(16, 4096),
                     "values per scale of blockwise hops, a power of two dividing model.n_embd"),
      SWARMRT_CHOICE(
          swarm, compression, shared,
          "fixed (every hop in swarm.hop_encoding, every sparse round at "
          "diloco.topk_density) or auto (each link between processes in the least compressed "
          "of none, bf16, int8, int4, int3, int4/2 down to swarm.hop_encoding whose bytes it "
          "carries while the worker computes, and each worker's sparse DiLoCo rounds at the "
          "densest of 8, 4, 2, 1 x diloco.topk_density that reaches the group within the "
          "steps the round overlaps, from its measured bandwidth; changed as the link "
          "changes)"),
      SWARMRT_CHOICE(swarm, grad_aggregate, shared,
                     "a stage's gradient from its workers' (pp, dp, swarm, DiLoCo's warm-up): "
                     "mean, or centered_clip / trimmed_mean of each worker's mean gradient with "
                     "diloco.clip_radius, clip_iterations, clip_drop and trim"),
      SWARMRT_NUMBER(checkpoint, every_steps, node, at_least(0),
                     "steps between checkpoints, 0 disables"),
      SWARMRT_NUMBER(checkpoint, keep, node, at_least(1), "checkpoints kept on disk"),
  };
}

// The rows of how the swarm runs, breaks and recovers: chaos, supervision, transport,
// balancer, and the simulator's.
// The rows of DiLoCo: its rounds, Streaming DiLoCo's fragments and wire, the warm-up and the
// outer rate's schedules, and how a round aggregates.
static std::vector<Field> diloco_rows() {
  return {
      SWARMRT_NUMBER(diloco, inner_steps, shared, at_least(1),
                     "H: inner steps between outer rounds"),
      SWARMRT_NUMBER(diloco, outer_lr, shared, above(0), "outer Nesterov learning rate"),
      SWARMRT_NUMBER(diloco, outer_momentum, shared, fraction_below_one(),
                     "outer Nesterov momentum"),
      SWARMRT_NUMBER(diloco, min_replicas, shared, at_least(1), "quorum size for an outer round"),
      SWARMRT_NUMBER(diloco, round_timeout_s, shared, above(0), "seconds to wait for a quorum"),
      SWARMRT_NUMBER(diloco, fragments, shared, between(1, 1024),
                     "P: Streaming DiLoCo fragments per stage, at most the stage's blocks"),
      SWARMRT_CHOICE(diloco, fragment_pattern, shared,
                     "strided (block i in fragment i mod P) or sequential (runs of blocks)"),
      SWARMRT_NUMBER(diloco, overlap_steps, shared, at_least(0),
                     "tau: inner steps between a fragment's round start and its merge, < H/P"),
      SWARMRT_NUMBER(diloco, alpha, shared, (Range{0, 1, false, true}),
                     "merge: local <- alpha*local + (1-alpha)*global"),
      SWARMRT_CHOICE(diloco, quantize, shared,
                     "outer gradients and updates on the wire: none, fp16, int8, int4 or fp4 "
                     "(E2M1), blockwise scaled"),
      SWARMRT_NUMBER(diloco, quant_block, shared, between(1, 1 << 20),
                     "values per quantization block (one float32 scale each)"),
      SWARMRT_FIELD(diloco, error_feedback, shared, any(), nullptr,
                    "carry the quantization or sparsification error of a round into the next one"),
      SWARMRT_CHOICE(diloco, compress, shared,
                     "outer gradients and updates on the wire: none, or topk (the largest "
                     "topk_density of each topk_chunk values, in topk_bits; needs quantize = "
                     "none)"),
      SWARMRT_NUMBER(diloco, topk_density, shared, (Range{0, 1, true, false}),
                     "topk: the share of each chunk's values a round sends"),
      SWARMRT_NUMBER(diloco, topk_bits, shared, between(2, 4),
                     "topk: bits of each kept value, 2 or 4 (sign and magnitude level)"),
      SWARMRT_NUMBER(diloco, topk_chunk, shared, between(2, 65536),
                     "topk: values per chunk, each with its own top-k and magnitude range"),
      SWARMRT_FIELD(diloco, all_gather, shared, any(), nullptr,
                    "answer each worker with the round's other contributions as sent, which it "
                    "sums with its own as the group does, not an update encoded again (needs "
                    "compress or quantize, aggregate = mean, no momentum, not eager)"),
      SWARMRT_FIELD(diloco, eager, shared, any(), nullptr,
                    "eager outer step at a round's start from the fresh local and last round's "
                    "others' pseudo-gradients (needs overlap_steps >= 1)"),
      SWARMRT_NUMBER(diloco, warmup_sync_steps, shared, at_least(0),
                     "K: the first K steps average gradients every step (as swarm mode); rounds "
                     "start from theta at step K, < train.steps"),
      SWARMRT_CHOICE(diloco, warmup_compress, shared,
                     "the warm-up's gradients on the wire: none, or topk (the largest "
                     "warmup_density of each topk_chunk values with error feedback, in "
                     "topk_bits)"),
      SWARMRT_NUMBER(diloco, warmup_density, shared, (Range{0, 1, true, false}),
                     "warmup_compress = topk: the share of each chunk's values a warm-up step "
                     "sends"),
      SWARMRT_FIELD(diloco, inner_steps_schedule, shared, any(), inner_schedule,
                    "H small early: \"H:STEPS,...\" runs STEPS local steps at each H in turn "
                    "from the warm-up's end, then diloco.inner_steps; empty = H throughout"),
      SWARMRT_CHOICE(diloco, outer_lr_schedule, shared,
                     "outer learning rate over the rounds: constant, or cosine from outer_lr at "
                     "the warm-up's end to outer_min_lr at train.steps"),
      SWARMRT_NUMBER(diloco, outer_min_lr, shared, at_least(0),
                     "cosine floor of the outer learning rate, at most diloco.outer_lr"),
      SWARMRT_CHOICE(diloco, aggregate, shared,
                     "a round's pseudo-gradient from the workers': mean, centered_clip or "
                     "trimmed_mean (robust to workers that send anything; not with eager)"),
      SWARMRT_NUMBER(diloco, clip_radius, shared, at_least(0),
                     "centered_clip's radius; 0 = the median distance of the contributions "
                     "from the current estimate, each iteration"),
      SWARMRT_NUMBER(diloco, clip_iterations, shared, between(1, 100),
                     "centered_clip's iterations from the coordinate-wise median"),
      SWARMRT_NUMBER(diloco, clip_drop, shared, at_least(0),
                     "centered_clip, then the mean of the contributions within this many median "
                     "distances of its result (the others dropped); 0 = CenteredClip alone, else "
                     ">= 1"),
      SWARMRT_NUMBER(diloco, trim, shared, at_least(0),
                     "trimmed_mean: the largest and smallest this many values dropped per "
                     "coordinate (2 x trim < workers_per_stage)")};
}

static std::vector<Field> runtime_rows() {
  return {
      SWARMRT_NUMBER(chaos, link_delay_ms, node, between(0, 600000),
                     "delay every frame sent between processes by this"),
      SWARMRT_NUMBER(chaos, link_mbit_s, node, at_least(0),
                     "cap every process link at this many Mbit/s, 0 = no cap"),
      SWARMRT_NUMBER(chaos, drop_fraction, node, between(0, 0.5),
                     "fraction of micro-batch hops between workers lost"),
      SWARMRT_NUMBER(chaos, slow_worker, node, any(), "worker id to slow down, -1 = none"),
      SWARMRT_NUMBER(chaos, slow_factor, node, between(1, 1000),
                     "compute of chaos.slow_worker takes this many times longer"),
      SWARMRT_FIELD(chaos, slowdown, node, any(), slowdown_list,
                    "heterogeneous workers: ID:FACTOR,... stretches each listed worker's compute"),
      SWARMRT_NUMBER(chaos, nan_worker, node, any(),
                     "worker id whose gradient and pseudo-gradient of nan_at_step carry a NaN"),
      SWARMRT_NUMBER(chaos, nan_at_step, node, at_least(0),
                     "step of chaos.nan_worker's poisoned sends, 0 = never"),
      SWARMRT_NUMBER(chaos, overflow_at_step, node, at_least(0),
                     "step whose gradient overflows (the loss scaler skips it), "
                     "0 = never"),
      SWARMRT_FIELD(chaos, kill, node, any(), kill_target,
                    "actor name (stage1/worker1, stage0/diloco, tracker), kind (worker, group, "
                    "loader, averager, "
                    "tracker, any), node, or coordinator (the leader's process: its standby "
                    "takes over, see coordinator --etcd)"),
      SWARMRT_NUMBER(chaos, kill_at_step, node, at_least(0),
                     "kill chaos.kill in this step (see kill_at_phase), 0 = never"),
      SWARMRT_CHOICE(chaos, kill_at_phase, node,
                     "where in chaos.kill_at_step: start, reduce (all micro-batches done), "
                     "apply, applied (every worker took the step, its record not yet written), "
                     "save (a checkpoint being gathered), eval (validation batches in flight) or "
                     "join (the first node that joins from that step on, before its join is "
                     "answered)"),
      SWARMRT_NUMBER(chaos, kill_every_s, node, at_least(0),
                     "kill chaos.kill every this many seconds, 0 = never"),
      SWARMRT_NUMBER(chaos, kill_limit, node, at_least(0),
                     "at most this many timed kills, 0 = no limit"),
      SWARMRT_NUMBER(chaos, seed, node, any(), "seed of the victims' draw"),
      SWARMRT_CHOICE(
          chaos, malicious, node,
          "what the malicious workers send as their DiLoCo pseudo-gradient or gradient: none, "
          "sign_flip (negated x malicious_scale), scale (x malicious_scale) or random "
          "(Gaussian, malicious_scale x its norm); or stale: it takes no optimizer step, so it "
          "computes and sends with stale parameters"),
      SWARMRT_NUMBER(chaos, malicious_workers, node, at_least(0),
                     "how many workers of each stage misbehave: ids K*1000 + 0 .. this - 1"),
      SWARMRT_FIELD(chaos, malicious_ids, node, any(), id_list,
                    "exactly these worker ids misbehave (\"0,1,1000\"), instead of the first "
                    "malicious_workers of each stage; empty: malicious_workers"),
      SWARMRT_NUMBER(chaos, malicious_from_step, node, at_least(0),
                     "the malicious workers misbehave in what they send from this step on"),
      SWARMRT_NUMBER(chaos, malicious_scale, node, above(0),
                     "the factor of sign_flip, scale and random"),
      SWARMRT_NUMBER(chaos, hop_noise, node, at_least(0),
                     "the malicious workers add Gaussian noise of this many times a tensor's RMS "
                     "to the activations and input gradients they send in training (0: none)"),
      SWARMRT_NUMBER(supervision, max_restarts, node, at_least(0),
                     "restarts allowed within restart_window_s"),
      SWARMRT_NUMBER(supervision, restart_window_s, node, above(0),
                     "window of the restart-intensity limit"),
      SWARMRT_NUMBER(supervision, backoff_ms, node, any(),
                     "first restart delay, doubled per recent restart"),
      SWARMRT_NUMBER(supervision, max_backoff_ms, node, any(), "longest restart delay"),
      SWARMRT_NUMBER(supervision, microbatch_timeout_s, node, above(0),
                     "least wait before a micro-batch that stopped moving, with no live worker "
                     "at work on it, is re-run"),
      SWARMRT_NUMBER(supervision, microbatch_timeout_factor, node, at_least(1),
                     "that wait is this many times the slowest recent hop, when longer"),
      SWARMRT_NUMBER(supervision, microbatch_timeout_max_s, node, above(0),
                     "longest wait, also for a micro-batch a live worker is computing"),
      SWARMRT_NUMBER(supervision, microbatch_max_losses, node, at_least(0),
                     "a micro-batch lost more often than this ends the run"),
      SWARMRT_NUMBER(supervision, state_timeout_s, node, above(0),
                     "longest wait for a peer's state or parameters, or a loader's batch"),
      SWARMRT_NUMBER(supervision, reply_timeout_s, node, above(0),
                     "longest wait for a worker's answer to cancel or reset, or for its state when "
                     "its node has lost the coordinator"),
      SWARMRT_NUMBER(supervision, query_timeout_s, node, above(0),
                     "longest wait for counters and membership at the end of a run"),
      SWARMRT_NUMBER(supervision, start_timeout_s, node, above(0),
                     "longest wait of a new worker for the state it starts from"),
      SWARMRT_NUMBER(supervision, retry_ms, node, between(0, 60000),
                     "pause before asking a restarting loader or DiLoCo group again"),
      SWARMRT_NUMBER(supervision, answer_lead_ms, node, between(0, 60000),
                     "pause between a console's answer and the kill or freeze it announced"),
      SWARMRT_CHOICE(transport, links, shared,
                     "auto (NCCL between CUDA workers), comm (links everywhere) or frames"),
      SWARMRT_NUMBER(transport, comm_timeout_s, shared, above(0),
                     "longest wait for a link's join or receive"),
      SWARMRT_CHOICE(transport, encrypt, shared,
                     "frame links in TLS: auto (beyond loopback), on or off"),
      SWARMRT_NUMBER(transport, max_message_mib, shared, between(0, 4096),
                     "largest frame or reply a process accepts, MiB; 0 = four times the "
                     "model's parameter bytes + 64"),
      SWARMRT_FIELD(balancer, enabled, node, any(), nullptr,
                    "move workers between stages where the pipeline needs them; false keeps "
                    "placements fixed"),
      SWARMRT_NUMBER(balancer, period_s, node, above(0),
                     "seconds between balancer decisions (jittered by 20%)"),
      SWARMRT_NUMBER(
          balancer, min_gain, node, at_least(0),
          "a period's moves must raise the pipeline's samples/s by more than this fraction"),
      SWARMRT_NUMBER(balancer, min_workers, node, at_least(1),
                     "a move never leaves a stage with fewer workers"),
      SWARMRT_NUMBER(balancer, cooldown_s, node, at_least(0),
                     "a worker moves at most once in this many seconds"),
      SWARMRT_NUMBER(balancer, max_moves, node, between(1, 100000),
                     "moves planned in one balancer period at most"),
      SWARMRT_NUMBER(recovery, donors, node, between(1, 64),
                     "live peers a restarted or joining worker takes its state from at once"),
      SWARMRT_NUMBER(recovery, chunk_mib, node, between(1, 16), "MiB in one chunk of a state"),
      SWARMRT_NUMBER(recovery, window, node, between(1, 64),
                     "chunks asked of one donor and not yet arrived"),
      SWARMRT_NUMBER(recovery, max_joiners, node, between(1, 1024),
                     "joiners one donor serves at once; more wait for a turn"),
      SWARMRT_NUMBER(recovery, chunk_timeout_s, node, above(0),
                     "a donor whose asked chunks stop coming for this long is dropped"),
  };
}

// Spot checks of stage work (docs/security.md).
static std::vector<Field> verify_rows() {
  return {SWARMRT_NUMBER(verify, fraction, shared, between(0, 1),
                         "chance that a stage's work on a micro-batch is done again by another "
                         "worker of the stage and compared (swarm mode; 0 = no spot checks)"),
          SWARMRT_NUMBER(verify, tolerance, shared, at_least(0),
                         "relative RMS difference a check allows; 0 = from train.precision and "
                         "swarm.hop_encoding"),
          SWARMRT_NUMBER(verify, seed, node, any(),
                         "seed of the draw of what is checked; 0 = drawn at start, unpredictable")};
}

// `swarmrt simulate`'s keys.
static std::vector<Field> simulate_rows() {
  return {
      SWARMRT_NUMBER(simulate, peers, node, between(1, 1000000), "peers the swarm starts with"),
      SWARMRT_NUMBER(simulate, hours, node, (Range{0, 1000, true, false}), "simulated time"),
      SWARMRT_NUMBER(simulate, min_rate, node, above(0),
                     "samples/s of the slowest peer on a stage of average cost"),
      SWARMRT_NUMBER(simulate, speed_spread, node, at_least(1),
                     "fastest peer / slowest, log-uniform in between"),
      SWARMRT_NUMBER(simulate, failures_per_hour, node, at_least(0), "failures per peer per hour"),
      SWARMRT_NUMBER(simulate, recovery_s, node, at_least(0),
                     "mean seconds before a failed peer is back, 0 = never"),
      SWARMRT_NUMBER(simulate, joins_per_hour, node, at_least(0),
                     "new peers per hour, as a fraction of simulate.peers"),
      SWARMRT_NUMBER(simulate, link_mbit_s, node, at_least(0), "every peer's link, 0 = unlimited"),
      SWARMRT_NUMBER(simulate, latency_ms, node, at_least(0), "one-way latency between peers"),
      SWARMRT_NUMBER(simulate, noise, node, at_least(0),
                     "relative error of a measured rate (normal)"),
      SWARMRT_NUMBER(simulate, sample_s, node, above(0), "seconds between time-series points"),
      SWARMRT_NUMBER(simulate, seed, node, any(), "seed of speeds, churn and noise"),
      SWARMRT_NUMBER(simulate, donors, node, between(1, 1024),
                     "live holders a (re)entering peer takes its stage's state from at once"),
      SWARMRT_NUMBER(simulate, donor_share, node, (Range{0, 1, true, false}),
                     "fraction of a donor's link it spares for one peer's state"),
      SWARMRT_NUMBER(simulate, sync_checkpoint_s, node, above(0),
                     "the synchronous baseline's checkpoint period (seconds of progress)"),
      SWARMRT_NUMBER(simulate, sync_restart_s, node, at_least(0),
                     "seconds the synchronous baseline takes to restart after a failure"),
  };
}

const std::vector<Field>& fields() {
  static const std::vector<Field> table = [] {
    auto all = training_rows();
    for (auto& f : diloco_rows()) all.push_back(std::move(f));
    for (auto& f : runtime_rows()) all.push_back(std::move(f));
    for (auto& f : verify_rows()) all.push_back(std::move(f));
    for (auto& f : simulate_rows()) all.push_back(std::move(f));
    return all;
  }();
  return table;
}
#undef SWARMRT_NUMBER
#undef SWARMRT_CHOICE
#undef SWARMRT_FIELD

const Field* find_field(const std::string& section, const std::string& key) {
  for (const auto& f : fields())
    if (f.section == section && f.key == key) return &f;
  return nullptr;
}

}  // namespace rows

}  // namespace swarmrt::config
