#include "model/config.hpp"

#include <toml++/toml.h>
#include <cmath>
#include <fstream>
#include <set>
#include <sstream>
#include <variant>

namespace swarmrt::model {
namespace {

using Slot = std::variant<int64_t*, double*, std::string*>;

// Whether every node of a swarm must agree on a key (it is part of the config fingerprint a
// join is checked against) or each node may set it for itself.
enum class Scope { shared, node };

struct Field {
  std::string section;
  std::string key;
  Slot (*slot)(RunConfig&);
  Scope scope;
  std::string help;
};

#define SWARMRT_FIELD(sec, name, scope, help)                                          \
  Field {                                                                              \
#sec, #name, [](RunConfig & c) -> Slot { return &c.sec.name; }, Scope::scope, help \
  }

const std::vector<Field>& fields() {
  static const std::vector<Field> table = {
      SWARMRT_FIELD(model, preset, shared, "tiny | gpt2-small"),
      SWARMRT_FIELD(model, n_layer, shared, "transformer blocks"),
      SWARMRT_FIELD(model, n_head, shared, "attention heads"),
      SWARMRT_FIELD(model, n_embd, shared, "embedding width"),
      SWARMRT_FIELD(model, block_size, shared, "context length in bytes"),
      SWARMRT_FIELD(model, vocab_size, shared, "256 (byte tokenizer)"),
      SWARMRT_FIELD(train, steps, shared, "optimizer steps"),
      SWARMRT_FIELD(train, micro_batch, shared, "sequences per micro-batch"),
      SWARMRT_FIELD(train, micro_batches, shared, "micro-batches per step"),
      SWARMRT_FIELD(train, lr, shared, "peak inner learning rate"),
      SWARMRT_FIELD(train, min_lr, shared, "cosine floor"),
      SWARMRT_FIELD(train, warmup_steps, shared, "linear warmup steps"),
      SWARMRT_FIELD(train, schedule, shared, "constant | cosine"),
      SWARMRT_FIELD(train, weight_decay, shared, "AdamW weight decay (matrices only)"),
      SWARMRT_FIELD(train, beta1, shared, "AdamW beta1"),
      SWARMRT_FIELD(train, beta2, shared, "AdamW beta2"),
      SWARMRT_FIELD(train, grad_clip, shared, "global gradient-norm clip, 0 disables"),
      SWARMRT_FIELD(train, seed, shared, "initialization and data-order seed"),
      SWARMRT_FIELD(train, eval_every, shared, "steps between evaluations, 0 = only at the end"),
      SWARMRT_FIELD(train, eval_batches, shared, "validation micro-batches per evaluation"),
      SWARMRT_FIELD(train, threads, node, "torch intra-op threads per process"),
      SWARMRT_FIELD(train, log_every, node, "steps between progress lines"),
      SWARMRT_FIELD(data, path, node, "UTF-8 text file or directory"),
      SWARMRT_FIELD(data, val_fraction, shared, "tail fraction held out for validation"),
      SWARMRT_FIELD(swarm, mode, shared, "single | pp | dp | swarm | diloco | diloco-swarm"),
      SWARMRT_FIELD(swarm, stages, shared, "pipeline stages"),
      SWARMRT_FIELD(swarm, workers_per_stage, shared, "workers serving each stage"),
      SWARMRT_FIELD(swarm, wiring, shared, "throughput | uniform"),
      SWARMRT_FIELD(swarm, max_inflight, shared, "micro-batches in flight per worker"),
      SWARMRT_FIELD(swarm, loaders, shared, "data loader actors (disjoint shards)"),
      SWARMRT_FIELD(diloco, inner_steps, shared, "H: inner steps between outer rounds"),
      SWARMRT_FIELD(diloco, outer_lr, shared, "outer Nesterov learning rate"),
      SWARMRT_FIELD(diloco, outer_momentum, shared, "outer Nesterov momentum"),
      SWARMRT_FIELD(diloco, min_replicas, shared, "quorum size for an outer round"),
      SWARMRT_FIELD(diloco, round_timeout_s, shared, "seconds to wait for a quorum"),
      SWARMRT_FIELD(checkpoint, every_steps, node, "steps between checkpoints, 0 disables"),
      SWARMRT_FIELD(checkpoint, keep, node, "checkpoints kept on disk"),
      SWARMRT_FIELD(chaos, link_delay_ms, node, "delay every frame sent between processes by this"),
      SWARMRT_FIELD(chaos, link_mbit_s, node,
                    "cap every process link at this many Mbit/s, 0 = no cap"),
      SWARMRT_FIELD(chaos, drop_fraction, node,
                    "fraction of micro-batch hops between workers lost"),
      SWARMRT_FIELD(chaos, slow_worker, node, "worker id to slow down, -1 = none"),
      SWARMRT_FIELD(chaos, slow_factor, node,
                    "compute of chaos.slow_worker takes this many times longer"),
      SWARMRT_FIELD(chaos, nan_worker, node,
                    "worker id whose gradient and pseudo-gradient of nan_at_step carry a NaN"),
      SWARMRT_FIELD(chaos, nan_at_step, node,
                    "step of chaos.nan_worker's poisoned sends, 0 = never"),
      SWARMRT_FIELD(
          chaos, kill, node,
          "actor name (worker:1001, tracker), kind (worker, group, loader, averager, tracker, "
          "any) or node"),
      SWARMRT_FIELD(chaos, kill_at_step, node,
                    "kill chaos.kill in this step (see kill_at_phase), 0 = never"),
      SWARMRT_FIELD(chaos, kill_at_phase, node,
                    "where in chaos.kill_at_step: start, reduce (all micro-batches done) or apply"),
      SWARMRT_FIELD(chaos, kill_every_s, node,
                    "kill chaos.kill every this many seconds, 0 = never"),
      SWARMRT_FIELD(chaos, kill_limit, node, "at most this many timed kills, 0 = no limit"),
      SWARMRT_FIELD(chaos, seed, node, "seed of the victims' draw"),
      SWARMRT_FIELD(supervision, max_restarts, node, "restarts allowed within restart_window_s"),
      SWARMRT_FIELD(supervision, restart_window_s, node, "window of the restart-intensity limit"),
      SWARMRT_FIELD(supervision, backoff_ms, node,
                    "first restart delay, doubled per recent restart"),
      SWARMRT_FIELD(supervision, max_backoff_ms, node, "longest restart delay"),
      SWARMRT_FIELD(supervision, microbatch_timeout_s, node,
                    "seconds before a micro-batch that did not come back is re-run"),
      SWARMRT_FIELD(transport, links, shared,
                    "auto (NCCL between CUDA workers), comm (links everywhere) or frames"),
      SWARMRT_FIELD(transport, comm_timeout_s, shared, "longest wait for a link's join or receive"),
      SWARMRT_FIELD(transport, encrypt, shared,
                    "frame links in TLS: auto (beyond loopback), on or off"),
      SWARMRT_FIELD(transport, max_message_mib, shared,
                    "largest frame a process accepts, MiB; 0 = twice the model's parameter bytes "
                    "+ 64"),
  };
  return table;
}
#undef SWARMRT_FIELD

const Field* find_field(const std::string& section, const std::string& key) {
  for (const auto& f : fields())
    if (f.section == section && f.key == key) return &f;
  return nullptr;
}

std::string type_name(const toml::node& n) {
  switch (n.type()) {
    case toml::node_type::string:
      return "string";
    case toml::node_type::integer:
      return "integer";
    case toml::node_type::floating_point:
      return "float";
    case toml::node_type::boolean:
      return "boolean";
    case toml::node_type::table:
      return "table";
    case toml::node_type::array:
      return "array";
    default:
      return "date/time";
  }
}

std::string known_keys(const std::string& section) {
  std::string out;
  for (const auto& f : fields())
    if (f.section == section) out += (out.empty() ? "" : ", ") + f.key;
  return out;
}

std::string known_sections() {
  std::set<std::string> names;
  for (const auto& f : fields()) names.insert(f.section);
  std::string out;
  for (const auto& n : names) out += (out.empty() ? "" : ", ") + n;
  return out;
}

void assign(const Field& f, const toml::node& n, RunConfig& c, const std::string& origin) {
  const std::string where = origin + ": " + f.section + "." + f.key + ": ";
  Slot slot = f.slot(c);
  if (auto* i = std::get_if<int64_t*>(&slot)) {
    if (auto v = n.value_exact<int64_t>()) {
      **i = *v;
      return;
    }
    throw ConfigError(where + "expected an integer (" + f.help + "), got " + type_name(n));
  }
  if (auto* d = std::get_if<double*>(&slot)) {
    // Integers are accepted where a float is expected: `lr = 1` means 1.0.
    if (auto v = n.value<double>(); v && (n.is_floating_point() || n.is_integer())) {
      // TOML allows inf and nan; no key of swarmrt means either (a timeout of inf would be
      // a wait without end, a nan passes every `x > 0` check as false and every `x < 0` too).
      if (!std::isfinite(*v))
        throw ConfigError(where + "must be a finite number (" + f.help + "), got " +
                          (std::isnan(*v) ? "nan" : "inf"));
      **d = *v;
      return;
    }
    throw ConfigError(where + "expected a number (" + f.help + "), got " + type_name(n));
  }
  auto* s = std::get<std::string*>(slot);
  if (auto v = n.value_exact<std::string>()) {
    *s = *v;
    return;
  }
  throw ConfigError(where + "expected a string (" + f.help + "), got " + type_name(n));
}

// Applies "section.key=value" to the parsed table. The value is read as a TOML value
// (so 3 is an integer, 0.5 a float, "x" or a bare word a string).
void apply_override(toml::table& root, const std::string& text, const std::string& origin) {
  const auto eq = text.find('=');
  const auto dot = text.find('.');
  if (eq == std::string::npos || dot == std::string::npos || dot > eq)
    throw ConfigError(origin + ": --set '" + text + "': expected section.key=value");
  const std::string section = text.substr(0, dot);
  const std::string key = text.substr(dot + 1, eq - dot - 1);
  const std::string value = text.substr(eq + 1);
  if (!find_field(section, key))
    throw ConfigError(origin + ": --set '" + text + "': unknown key '" + section + "." + key + "'");
  toml::table parsed;
  try {
    parsed = toml::parse("v = " + value);
  } catch (const toml::parse_error&) {
    parsed = toml::table{{"v", value}};  // a bare word such as --set swarm.mode=pp
  }
  if (!root.contains(section)) root.insert(section, toml::table{});
  auto* tbl = root[section].as_table();
  if (!tbl) throw ConfigError(origin + ": [" + section + "] is not a table");
  tbl->insert_or_assign(key, *parsed.get("v"));
}

std::string format_value(const Slot& slot) {
  if (auto* i = std::get_if<int64_t*>(&slot)) return std::to_string(**i);
  if (auto* d = std::get_if<double*>(&slot)) {
    std::ostringstream os;
    os.precision(17);
    os << **d;
    std::string s = os.str();
    if (s.find_first_of(".eE") == std::string::npos && s.find("inf") == std::string::npos)
      s += ".0";
    return s;
  }
  std::ostringstream os;
  os << toml::value<std::string>(*std::get<std::string*>(slot));
  return os.str();
}

}  // namespace

bool is_shared_key(const std::string& dotted) {
  const auto dot = dotted.find('.');
  if (dot == std::string::npos) return false;
  const auto* f = find_field(dotted.substr(0, dot), dotted.substr(dot + 1));
  return f && f->scope == Scope::shared;
}

ModelConfig model_preset(const std::string& name) {
  ModelConfig m;
  m.preset = name;
  if (name == "tiny") {
    m.n_layer = 4, m.n_head = 4, m.n_embd = 128, m.block_size = 128;
  } else if (name == "gpt2-small") {
    m.n_layer = 12, m.n_head = 12, m.n_embd = 768, m.block_size = 1024;
  } else {
    throw ConfigError("unknown model preset '" + name + "' (expected tiny or gpt2-small)");
  }
  return m;
}

RunConfig parse_config(const std::string& text, const std::string& origin,
                       const std::vector<std::string>& overrides) {
  toml::table root;
  try {
    root = toml::parse(text, origin);
  } catch (const toml::parse_error& e) {
    std::ostringstream os;
    os << origin << ":" << e.source().begin.line << ":" << e.source().begin.column
       << ": TOML syntax error: " << e.description();
    throw ConfigError(os.str());
  }
  for (const auto& o : overrides) apply_override(root, o, origin);

  // Unknown sections and keys are errors: a typo must not silently fall back to a default.
  for (const auto& [section_key, node] : root) {
    const std::string section(section_key.str());
    const auto* tbl = node.as_table();
    if (!tbl || known_keys(section).empty())
      throw ConfigError(origin + ": unknown section [" + section + "] (known: " + known_sections() +
                        ")");
    for (const auto& [k, v] : *tbl) {
      (void)v;
      if (!find_field(section, std::string(k.str())))
        throw ConfigError(origin + ": unknown key '" + section + "." + std::string(k.str()) +
                          "' (known keys in [" + section + "]: " + known_keys(section) + ")");
    }
  }

  RunConfig config;
  // The preset goes first so that explicit model keys override it.
  if (auto preset = root["model"]["preset"]) {
    auto name = preset.value_exact<std::string>();
    if (!name) throw ConfigError(origin + ": model.preset: expected a string (tiny | gpt2-small)");
    try {
      config.model = model_preset(*name);
    } catch (const ConfigError& e) {
      throw ConfigError(origin + ": model.preset: " + e.what());
    }
  }
  for (const auto& f : fields()) {
    if (auto* tbl = root[f.section].as_table())
      if (auto* n = tbl->get(f.key)) assign(f, *n, config, origin);
  }
  validate(config, origin);
  return config;
}

RunConfig load_config(const std::string& path, const std::vector<std::string>& overrides) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw ConfigError(path + ": cannot open config file");
  std::ostringstream ss;
  ss << in.rdbuf();
  return parse_config(ss.str(), path, overrides);
}

std::string to_toml(const RunConfig& config) {
  RunConfig copy = config;
  std::ostringstream os;
  std::string section;
  for (const auto& f : fields()) {
    if (f.section != section) {
      os << (section.empty() ? "" : "\n") << "[" << f.section << "]\n";
      section = f.section;
    }
    os << f.key << " = " << format_value(f.slot(copy)) << "\n";
  }
  return os.str();
}

void validate(const RunConfig& c, const std::string& origin) {
  auto fail = [&](const std::string& key, const std::string& msg) {
    throw ConfigError(origin + ": " + key + ": " + msg);
  };
  const auto& m = c.model;
  if (m.n_layer < 1) fail("model.n_layer", "must be >= 1");
  if (m.n_head < 1) fail("model.n_head", "must be >= 1");
  if (m.n_embd < 1 || m.n_embd % m.n_head != 0)
    fail("model.n_embd", "must be a positive multiple of model.n_head (" +
                             std::to_string(m.n_head) + "), got " + std::to_string(m.n_embd));
  if (m.block_size < 2) fail("model.block_size", "must be >= 2");
  if (m.vocab_size != 256) fail("model.vocab_size", "must be 256: the tokenizer is bytes");

  const auto& t = c.train;
  if (t.steps < 1) fail("train.steps", "must be >= 1");
  if (t.micro_batch < 1) fail("train.micro_batch", "must be >= 1");
  if (t.micro_batches < 1) fail("train.micro_batches", "must be >= 1");
  if (!(t.lr > 0)) fail("train.lr", "must be > 0");
  if (t.min_lr < 0 || t.min_lr > t.lr) fail("train.min_lr", "must be in [0, train.lr]");
  if (t.warmup_steps < 0) fail("train.warmup_steps", "must be >= 0");
  if (t.schedule != "constant" && t.schedule != "cosine")
    fail("train.schedule", "expected constant or cosine, got '" + t.schedule + "'");
  if (t.weight_decay < 0) fail("train.weight_decay", "must be >= 0");
  if (!(t.beta1 >= 0 && t.beta1 < 1)) fail("train.beta1", "must be in [0, 1)");
  if (!(t.beta2 >= 0 && t.beta2 < 1)) fail("train.beta2", "must be in [0, 1)");
  if (t.grad_clip < 0) fail("train.grad_clip", "must be >= 0");
  if (t.eval_every < 0) fail("train.eval_every", "must be >= 0");
  if (t.eval_batches < 1) fail("train.eval_batches", "must be >= 1");
  if (t.threads < 1) fail("train.threads", "must be >= 1");
  if (t.log_every < 1) fail("train.log_every", "must be >= 1");

  if (c.data.path.empty()) fail("data.path", "must name a file or directory");
  if (!(c.data.val_fraction > 0 && c.data.val_fraction < 1))
    fail("data.val_fraction", "must be in (0, 1)");

  const auto& s = c.swarm;
  static const std::set<std::string> modes = {"single", "pp",     "dp",
                                              "swarm",  "diloco", "diloco-swarm"};
  if (!modes.count(s.mode))
    fail("swarm.mode",
         "expected one of single, pp, dp, swarm, diloco, diloco-swarm, got '" + s.mode + "'");
  if (s.stages < 1) fail("swarm.stages", "must be >= 1");
  if (s.stages > m.n_layer)
    fail("swarm.stages", "must be <= model.n_layer (" + std::to_string(m.n_layer) + "), got " +
                             std::to_string(s.stages));
  if (s.workers_per_stage < 1) fail("swarm.workers_per_stage", "must be >= 1");
  if (s.wiring != "throughput" && s.wiring != "uniform")
    fail("swarm.wiring", "expected throughput or uniform, got '" + s.wiring + "'");
  if (s.max_inflight < 1) fail("swarm.max_inflight", "must be >= 1");
  if (s.loaders < 1) fail("swarm.loaders", "must be >= 1");
  if ((s.mode == "single") && (s.stages != 1 || s.workers_per_stage != 1))
    fail("swarm.mode",
         "single runs 1 stage x 1 worker; set swarm.stages = 1 and "
         "swarm.workers_per_stage = 1 or choose another mode");
  if ((s.mode == "pp") && s.workers_per_stage != 1)
    fail("swarm.workers_per_stage", "pp runs one worker per stage");
  if ((s.mode == "dp" || s.mode == "diloco") && s.stages != 1)
    fail("swarm.stages", s.mode + " runs a single stage");

  const auto& d = c.diloco;
  if (d.inner_steps < 1) fail("diloco.inner_steps", "must be >= 1");
  if (!(d.outer_lr > 0)) fail("diloco.outer_lr", "must be > 0");
  if (!(d.outer_momentum >= 0 && d.outer_momentum < 1))
    fail("diloco.outer_momentum", "must be in [0, 1)");
  if (d.min_replicas < 1) fail("diloco.min_replicas", "must be >= 1");
  if (!(d.round_timeout_s > 0)) fail("diloco.round_timeout_s", "must be > 0");

  if (c.checkpoint.every_steps < 0) fail("checkpoint.every_steps", "must be >= 0");
  if (c.checkpoint.keep < 1) fail("checkpoint.keep", "must be >= 1");
  if (c.chaos.link_delay_ms < 0 || c.chaos.link_delay_ms > 600000)
    fail("chaos.link_delay_ms", "must be between 0 and 600000");
  if (c.chaos.link_mbit_s < 0) fail("chaos.link_mbit_s", "must be >= 0 (0: no cap)");
  if (!(c.chaos.drop_fraction >= 0 && c.chaos.drop_fraction <= 0.5))
    fail("chaos.drop_fraction", "must be between 0 and 0.5");
  if (c.chaos.nan_at_step < 0) fail("chaos.nan_at_step", "must be >= 0");
  if (c.chaos.slow_factor < 1 || c.chaos.slow_factor > 1000)
    fail("chaos.slow_factor", "must be between 1 and 1000");
  {
    const auto& k = c.chaos.kill;
    const bool kind = k.empty() || k == "worker" || k == "group" || k == "loader" ||
                      k == "averager" || k == "tracker" || k == "any" || k == "node";
    const auto colon = k.find(':');
    const bool named = colon != std::string::npos && colon + 1 < k.size() &&
                       (k.substr(0, colon) == "worker" || k.substr(0, colon) == "group" ||
                        k.substr(0, colon) == "loader" || k.substr(0, colon) == "averager") &&
                       k.find_first_not_of("0123456789", colon + 1) == std::string::npos;
    if (!kind && !named)
      fail("chaos.kill",
           "must be worker, group, loader, averager, tracker, any, node or a name such as "
           "worker:1001, not '" +
               k + "'");
  }
  if (c.chaos.kill_at_phase != "start" && c.chaos.kill_at_phase != "reduce" &&
      c.chaos.kill_at_phase != "apply")
    fail("chaos.kill_at_phase",
         "must be start, reduce or apply, not '" + c.chaos.kill_at_phase + "'");
  if (c.chaos.kill_at_step < 0) fail("chaos.kill_at_step", "must be >= 0");
  if (c.chaos.kill_every_s < 0) fail("chaos.kill_every_s", "must be >= 0");
  if (c.chaos.kill_limit < 0) fail("chaos.kill_limit", "must be >= 0");
  if (c.supervision.max_restarts < 0) fail("supervision.max_restarts", "must be >= 0");
  if (c.supervision.restart_window_s <= 0) fail("supervision.restart_window_s", "must be > 0");
  if (c.supervision.backoff_ms < 0 || c.supervision.max_backoff_ms < c.supervision.backoff_ms)
    fail("supervision.backoff_ms", "must be >= 0 and <= supervision.max_backoff_ms");
  if (!(c.supervision.microbatch_timeout_s > 0))
    fail("supervision.microbatch_timeout_s", "must be > 0");
  if (c.transport.links != "auto" && c.transport.links != "comm" && c.transport.links != "frames")
    fail("transport.links", "must be auto, comm or frames, not '" + c.transport.links + "'");
  if (!(c.transport.comm_timeout_s > 0)) fail("transport.comm_timeout_s", "must be > 0");
  if (c.transport.encrypt != "auto" && c.transport.encrypt != "on" && c.transport.encrypt != "off")
    fail("transport.encrypt", "must be auto, on or off, not '" + c.transport.encrypt + "'");
  if (c.transport.max_message_mib < 0 || c.transport.max_message_mib > 4096)
    fail("transport.max_message_mib", "must be 0 (derived from the model) to 4096");
}

}  // namespace swarmrt::model
