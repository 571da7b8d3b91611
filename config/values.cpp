// The configuration's values: each enum's names, the checks a whole config must pass together
// (validate), and what the rows' parsers leave to look up (a worker's slowdown). The table of
// keys is config.cpp, reading TOML toml.cpp.
#include <algorithm>
#include <set>
#include <stdexcept>

#include "config/config.hpp"
#include "config/rows.hpp"

namespace swarmrt::config {

using namespace rows;

template <>
const std::vector<std::string>& names<Mode>() {
  static const std::vector<std::string> n = {"single", "pp",     "dp",
                                             "swarm",  "diloco", "diloco-swarm"};
  return n;
}
template <>
const std::vector<std::string>& names<DataFormat>() {
  static const std::vector<std::string> n = {"bytes", "tokens"};
  return n;
}
template <>
const std::vector<std::string>& names<Precision>() {
  static const std::vector<std::string> n = {"fp32", "bf16", "fp16"};
  return n;
}
template <>
const std::vector<std::string>& names<LossScale>() {
  static const std::vector<std::string> n = {"auto", "dynamic", "off"};
  return n;
}
template <>
const std::vector<std::string>& names<HopEncoding>() {
  static const std::vector<std::string> n = {"none",   "bf16", "int8",   "int4",
                                             "int5/3", "int3", "int4/2", "entropy"};
  return n;
}
template <>
const std::vector<std::string>& names<Compression>() {
  static const std::vector<std::string> n = {"fixed", "auto"};
  return n;
}
template <>
const std::vector<std::string>& names<Arch>() {
  static const std::vector<std::string> n = {"gpt2", "llama"};
  return n;
}
template <>
const std::vector<std::string>& names<Schedule>() {
  static const std::vector<std::string> n = {"constant", "cosine"};
  return n;
}
template <>
const std::vector<std::string>& names<WiringPolicy>() {
  static const std::vector<std::string> n = {"throughput", "uniform"};
  return n;
}
template <>
const std::vector<std::string>& names<Links>() {
  static const std::vector<std::string> n = {"auto", "comm", "frames"};
  return n;
}
template <>
const std::vector<std::string>& names<Encrypt>() {
  static const std::vector<std::string> n = {"auto", "on", "off"};
  return n;
}
template <>
const std::vector<std::string>& names<KillPhase>() {
  static const std::vector<std::string> n = {"start", "reduce", "apply",  "save",
                                             "eval",  "join",   "applied"};
  return n;
}
template <>
const std::vector<std::string>& names<Aggregate>() {
  static const std::vector<std::string> n = {"mean", "centered_clip", "trimmed_mean"};
  return n;
}
template <>
const std::vector<std::string>& names<Malicious>() {
  static const std::vector<std::string> n = {"none", "sign_flip", "scale", "random", "stale"};
  return n;
}
template <>
const std::vector<std::string>& names<FragmentPattern>() {
  static const std::vector<std::string> n = {"strided", "sequential"};
  return n;
}
template <>
const std::vector<std::string>& names<Quantize>() {
  static const std::vector<std::string> n = {"none", "fp16", "int8", "int4", "fp4"};
  return n;
}
template <>
const std::vector<std::string>& names<Compress>() {
  static const std::vector<std::string> n = {"none", "topk"};
  return n;
}

std::string DilocoConfig::encoding() const {
  if (compress != Compress::topk) return names<Quantize>()[static_cast<size_t>(quantize)];
  std::ostringstream text;
  text << "topk " << 100 * topk_density << "% " << topk_bits << "-bit";
  return text.str();
}

std::string must_be_one_of(const std::vector<std::string>& names, const std::string& text) {
  std::string list;
  for (size_t i = 0; i < names.size(); ++i)
    list += (i == 0 ? "" : i + 1 == names.size() ? " or " : ", ") + names[i];
  return "must be " + list + ", not '" + text + "'";
}

bool is_shared_key(const std::string& dotted) {
  const auto dot = dotted.find('.');
  if (dot == std::string::npos) return false;
  const auto* f = find_field(dotted.substr(0, dot), dotted.substr(dot + 1));
  return f && f->scope == Scope::shared;
}

bool ChaosConfig::is_malicious(int64_t id) const {
  if (malicious == Malicious::none && hop_noise <= 0) return false;
  if (malicious_ids.empty()) return id % 1000 < malicious_workers;
  size_t start = 0;
  while (start < malicious_ids.size()) {  // checked by its row: digits and commas
    const auto end = std::min(malicious_ids.find(',', start), malicious_ids.size());
    if (std::stoll(malicious_ids.substr(start, end - start)) == id) return true;
    start = end + 1;
  }
  return false;
}

double ChaosConfig::slowdown_of(int64_t id) const {
  double factor = slow_worker == id ? slow_factor : 1.0;
  size_t start = 0;
  while (start < slowdown.size()) {
    const auto end = std::min(slowdown.find(',', start), slowdown.size());
    const auto item = slowdown.substr(start, end - start);
    const auto colon = item.find(':');
    if (colon != std::string::npos && std::stoll(item.substr(0, colon)) == id)
      factor = std::stod(item.substr(colon + 1));
    start = end + 1;
  }
  return factor;
}

// Spot checks recompute a worker's output on another worker of its stage: only where the
// stage's workers hold the same parameters, and only for outputs another stage receives.
template <class Fail>
void validate_verify(const RunConfig& c, const Fail& fail) {
  const auto& s = c.swarm;
  if (c.verify.fraction > 0) {
    if (s.mode != Mode::swarm)
      fail("verify.fraction",
           "spot checks need the workers of a stage to hold the same parameters: swarm.mode = "
           "\"swarm\", got \"" +
               name_of(s.mode) + "\"");
    if (s.stages < 2 || s.workers_per_stage < 2)
      fail("verify.fraction",
           "spot checks recompute what a stage sends to the next on another worker of it: "
           "swarm.stages >= 2 and swarm.workers_per_stage >= 2 (3 to settle a mismatch)");
  }
}

// Sparse rounds (diloco.compress = topk) against the keys they replace or exclude.
template <class Fail>
void validate_topk(const DilocoConfig& d, const Fail& fail) {
  if (d.compress == Compress::topk && d.quantize != Quantize::none)
    fail("diloco.quantize",
         "must be \"none\" with diloco.compress = \"topk\": the kept values are coded in "
         "diloco.topk_bits");
  if (d.compress == Compress::topk && d.eager)
    fail("diloco.eager",
         "must be false with diloco.compress = \"topk\": an eager round's answer is the mean of "
         "the round, which top-k would cut with no error feedback to carry the rest");
  if (d.topk_bits != 2 && d.topk_bits != 4)
    fail("diloco.topk_bits", "must be 2 or 4, got " + std::to_string(d.topk_bits));
}

// A sparse warm-up (diloco.warmup_compress = topk) needs a warm-up, and a mean to sum into.
template <class Fail>
void validate_sparse_warmup(const RunConfig& c, const Fail& fail) {
  if (c.diloco.warmup_compress == Compress::none) return;
  if (c.diloco.warmup_sync_steps == 0)
    fail("diloco.warmup_compress",
         "needs diloco.warmup_sync_steps > 0: it compresses the warm-up's gradients, and this "
         "run has no warm-up");
  if (c.swarm.grad_aggregate != Aggregate::mean)
    fail("diloco.warmup_compress",
         "needs swarm.grad_aggregate = \"mean\": every worker sums the sparse gradients it is "
         "sent, and a robust aggregate needs each worker's whole gradient");
}

// swarm.hop_block against the rotation's size and the model's width.
template <class Fail>
void validate_hops(const RunConfig& c, const Fail& fail) {
  const auto& m = c.model;
  const auto& s = c.swarm;
  if ((s.hop_block & (s.hop_block - 1)) != 0)
    fail("swarm.hop_block",
         "must be a power of two (the int4 rotation is a Hadamard matrix of "
         "that size), got " +
             std::to_string(s.hop_block));
  // A block that spans two positions lets the later one's values into the earlier one's
  // decoded hop (its scale, its rotation, its rounding): the next stage sees the future, and
  // the loss falls without learning (int3 hops with blocks of 256 on a model of width 128:
  // validation loss 16.6% under float32 hops' at 800 steps, docs/hops.md).
  // auto chooses among the encodings down to swarm.hop_encoding (policy/hop_choice.hpp).
  // auto also chooses the density of sparse DiLoCo rounds (policy::density_ladder).
  const bool densities = c.diloco.compress == Compress::topk &&
                         (s.mode == Mode::diloco || s.mode == Mode::diloco_swarm);
  if (s.compression == Compression::automatic && s.stages < 2 && !densities)
    fail("swarm.compression",
         "auto chooses the encoding of hops between stages and the density of sparse DiLoCo "
         "rounds (diloco.compress = topk); with swarm.stages = 1 there are no hops");
  if (s.compression == Compression::automatic && s.hop_encoding == HopEncoding::none && !densities)
    fail("swarm.compression",
         "auto chooses down to swarm.hop_encoding, the most compressed encoding it may use; "
         "with none there is nothing to choose (set swarm.hop_encoding, e.g. int8 or int4)");
  if (s.compression == Compression::automatic && s.hop_encoding == HopEncoding::entropy)
    fail("swarm.compression",
         "auto chooses by each encoding's bytes, and entropy's depend on the values; set "
         "swarm.hop_encoding to int4/2 (the most compressed fixed-size encoding) for auto, or "
         "swarm.compression to fixed for entropy");
  const bool blockwise = s.hop_encoding != HopEncoding::none && s.hop_encoding != HopEncoding::bf16;
  if (blockwise && s.stages > 1 && m.n_embd % s.hop_block != 0)
    fail("swarm.hop_block", "must divide model.n_embd (" + std::to_string(m.n_embd) + ") with " +
                                name_of(s.hop_encoding) + " hops, so that no block spans two " +
                                "positions (it would carry the later one's values into the " +
                                "earlier one's hop), got " + std::to_string(s.hop_block));
}

void validate(const RunConfig& c, const std::string& origin) {
  auto fail = [&](const std::string& key, const std::string& msg) {
    throw ConfigError(origin + ": " + key + ": " + msg);
  };
  // Each key against its own row.
  RunConfig copy = c;
  for (const auto& f : fields()) {
    const Slot slot = f.slot(copy);
    std::string why;
    if (auto* i = std::get_if<int64_t*>(&slot)) {
      if (!f.range.admits(static_cast<double>(**i))) why = f.range.describe();
    } else if (auto* d = std::get_if<double*>(&slot)) {
      if (!f.range.admits(**d)) why = f.range.describe();
    } else if (auto* s = std::get_if<std::string*>(&slot)) {
      if (f.check) why = f.check(**s);
    }
    if (!why.empty()) fail(f.section + "." + f.key, why);
  }

  // Then the relations between keys.
  const auto& m = c.model;
  if (m.n_embd % m.n_head != 0)
    fail("model.n_embd", "must be a positive multiple of model.n_head (" +
                             std::to_string(m.n_head) + "), got " + std::to_string(m.n_embd));
  if (m.arch == Arch::llama && (m.n_embd / m.n_head) % 2 != 0)
    fail("model.n_head", "llama rotates pairs of dimensions: n_embd / n_head must be even, got " +
                             std::to_string(m.n_embd / m.n_head));
  if (c.train.min_lr > c.train.lr) fail("train.min_lr", "must be in [0, train.lr]");
  const auto& s = c.swarm;
  if (m.tie_embeddings && s.stages != 1)
    fail("model.tie_embeddings",
         "ties the head to the token embeddings, which needs both in one stage: set "
         "swarm.stages = 1 or model.tie_embeddings = false");
  if (s.stages > m.n_layer)
    fail("swarm.stages", "must be <= model.n_layer (" + std::to_string(m.n_layer) + "), got " +
                             std::to_string(s.stages));
  if (s.mode == Mode::single && (s.stages != 1 || s.workers_per_stage != 1))
    fail("swarm.mode",
         "single runs 1 stage x 1 worker; set swarm.stages = 1 and "
         "swarm.workers_per_stage = 1 or choose another mode");
  if (s.mode == Mode::pp && s.workers_per_stage != 1)
    fail("swarm.workers_per_stage", "pp runs one worker per stage");
  if ((s.mode == Mode::dp || s.mode == Mode::diloco) && s.stages != 1)
    fail("swarm.stages", name_of(s.mode) + " runs a single stage");
  validate_hops(c, fail);
  const auto& d = c.diloco;
  if (d.overlap_steps > 0 && d.overlap_steps * d.fragments >= d.inner_steps)
    fail("diloco.overlap_steps",
         "must be < diloco.inner_steps / diloco.fragments (" + std::to_string(d.inner_steps) +
             " / " + std::to_string(d.fragments) + "): a fragment's round must land before the " +
             "next fragment's starts, got " + std::to_string(d.overlap_steps));
  if (d.overlap_steps > 0)  // each row was checked above, so the schedule parses
    for (const auto& phase : parse_inner_schedule(d.inner_steps_schedule))
      if (d.overlap_steps * d.fragments >= phase.inner_steps)
        fail("diloco.inner_steps_schedule",
             "H = " + std::to_string(phase.inner_steps) + " is too small for " +
                 "diloco.overlap_steps = " + std::to_string(d.overlap_steps) +
                 " and diloco.fragments = " + std::to_string(d.fragments) +
                 ": every H must exceed overlap_steps x fragments, so that a fragment's round "
                 "lands before the next fragment's starts");
  if (d.outer_min_lr > d.outer_lr) fail("diloco.outer_min_lr", "must be in [0, diloco.outer_lr]");
  if (d.all_gather &&
      (!d.encoded() || d.aggregate != Aggregate::mean || d.outer_momentum != 0 || d.eager))
    fail("diloco.all_gather",
         "needs diloco.compress = \"topk\" or a diloco.quantize, diloco.aggregate = \"mean\", "
         "diloco.outer_momentum = 0 and no diloco.eager: every worker sums the contributions as "
         "they were sent and steps θ with their plain mean");
  if (d.aggregate != Aggregate::mean && d.eager)
    fail("diloco.aggregate",
         "must be \"mean\" with diloco.eager: an eager step takes the others' mean of the last "
         "round, which only the mean gives");
  // A trimmed mean, of the rounds (DiLoCo modes) or of the grad averagers (any mode).
  const bool rounds_trim = (s.mode == Mode::diloco || s.mode == Mode::diloco_swarm) &&
                           d.aggregate == Aggregate::trimmed_mean;
  if ((rounds_trim || s.grad_aggregate == Aggregate::trimmed_mean) &&
      2 * d.trim >= s.workers_per_stage)
    fail("diloco.trim",
         "must leave a value per coordinate: 2 x diloco.trim < swarm.workers_per_stage (" +
             std::to_string(s.workers_per_stage) + ") with " +
             (rounds_trim ? "diloco.aggregate" : "swarm.grad_aggregate") + " = trimmed_mean, got " +
             std::to_string(d.trim));
  if (d.clip_drop > 0 && d.clip_drop < 1)
    fail("diloco.clip_drop",
         "must be 0 (off) or >= 1: it keeps the contributions within that many median distances, "
         "so at least half of them; got " +
             std::to_string(d.clip_drop));
  validate_topk(d, fail);
  validate_sparse_warmup(c, fail);
  if (d.eager && d.overlap_steps < 1)
    fail("diloco.eager",
         "needs diloco.overlap_steps >= 1: the eager step stands in for a mean still on the "
         "wire, and with overlap_steps = 0 every round waits for its mean anyway");
  if (d.warmup_sync_steps > 0 && d.warmup_sync_steps >= c.train.steps)
    fail("diloco.warmup_sync_steps",
         "must be < train.steps (" + std::to_string(c.train.steps) +
             "): the run must have local steps after the warm-up, got " +
             std::to_string(d.warmup_sync_steps));
  if (d.fragments > 1) {
    const int64_t fewest = m.n_layer / s.stages;  // the smallest stage's blocks
    if (d.fragments > fewest)
      fail("diloco.fragments", "must be <= the blocks of the smallest stage (" +
                                   std::to_string(fewest) + "), got " +
                                   std::to_string(d.fragments));
  }
  if (c.chaos.overflow_at_step > 0 && !c.train.scales_loss())
    fail("chaos.overflow_at_step",
         "needs the loss scaler, which skips an overflowing step: train.precision = \"fp16\" "
         "or train.loss_scale = \"dynamic\"");
  validate_verify(c, fail);
  const auto& sv = c.supervision;
  if (sv.backoff_ms < 0 || sv.max_backoff_ms < sv.backoff_ms)
    fail("supervision.backoff_ms", "must be >= 0 and <= supervision.max_backoff_ms");
  if (sv.microbatch_timeout_max_s < sv.microbatch_timeout_s)
    fail("supervision.microbatch_timeout_max_s", "must be >= supervision.microbatch_timeout_s (" +
                                                     std::to_string(sv.microbatch_timeout_s) + ")");
}

std::vector<InnerPhase> parse_inner_schedule(const std::string& spec) {
  std::vector<InnerPhase> out;
  if (spec.empty()) return out;
  size_t start = 0;
  while (start <= spec.size()) {
    const auto end = std::min(spec.find(',', start), spec.size());
    const auto item = spec.substr(start, end - start);
    const auto colon = item.find(':');
    auto number = [](const std::string& v) -> int64_t {  // digits only, at most 9 of them
      const auto b = v.find_first_not_of(' '), e = v.find_last_not_of(' ');
      if (b == std::string::npos) return -1;
      const auto t = v.substr(b, e - b + 1);
      if (t.size() > 9 || t.find_first_not_of("0123456789") != std::string::npos) return -1;
      return std::stoll(t);
    };
    const int64_t h = colon == std::string::npos ? -1 : number(item.substr(0, colon));
    const int64_t n = colon == std::string::npos ? -1 : number(item.substr(colon + 1));
    if (h < 1 || n < 1)
      throw std::invalid_argument(
          "must be H:STEPS entries separated by commas (e.g. "
          "\"16:256,32:512\"), not '" +
          item + "'");
    if (n % h != 0)
      throw std::invalid_argument("phase '" + item +
                                  "' must run whole rounds: " + std::to_string(n) +
                                  " steps are not a multiple of H = " + std::to_string(h));
    out.push_back({h, n});
    start = end + 1;
  }
  return out;
}

}  // namespace swarmrt::config
