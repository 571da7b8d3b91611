// Reading a config: TOML text and `--set` overrides into a RunConfig, key by key against the
// table (config.cpp), and the effective config written back out.
#include <toml++/toml.h>
#include <algorithm>
#include <fstream>
#include <set>
#include <sstream>

#include "config/config.hpp"
#include "config/rows.hpp"
#include "tokens/prepare.hpp"

namespace swarmrt::config {
namespace {
using namespace rows;

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
  if (auto* e = std::get_if<EnumRef>(&slot)) {
    auto v = n.value_exact<std::string>();
    if (!v) throw ConfigError(where + "expected a string (" + f.help + "), got " + type_name(n));
    const auto& all = *e->names;
    const auto it = std::find(all.begin(), all.end(), *v);
    if (it == all.end()) throw ConfigError(where + must_be_one_of(all, *v));
    e->set(e->value, static_cast<size_t>(it - all.begin()));
    return;
  }
  if (auto* b = std::get_if<bool*>(&slot)) {
    if (auto v = n.value_exact<bool>()) {
      **b = *v;
      return;
    }
    throw ConfigError(where + "expected true or false (" + f.help + "), got " + type_name(n));
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
  if (auto* b = std::get_if<bool*>(&slot)) return **b ? "true" : "false";
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
  if (auto* e = std::get_if<EnumRef>(&slot))
    os << toml::value<std::string>(e->names->at(e->get(e->value)));
  else
    os << toml::value<std::string>(*std::get<std::string*>(slot));
  return os.str();
}

}  // namespace

ModelConfig model_preset(const std::string& name) {
  ModelConfig m;
  m.preset = name;
  if (name == "tiny") {
    m.n_layer = 4, m.n_head = 4, m.n_embd = 128, m.block_size = 128;
  } else if (name == "gpt2-small") {
    m.n_layer = 12, m.n_head = 12, m.n_embd = 768, m.block_size = 1024;
  } else if (name == "llama-tiny") {  // the tiny model's size with Llama's block
    m.arch = Arch::llama;
    m.n_layer = 4, m.n_head = 4, m.n_embd = 128, m.block_size = 128;
  } else if (name == "llama-small") {  // 101.4M parameters at a 32k vocabulary, untied
    m.arch = Arch::llama;
    m.n_layer = 12, m.n_head = 10, m.n_embd = 640, m.block_size = 1024, m.vocab_size = 32768;
  } else {
    throw ConfigError("unknown model preset '" + name +
                      "' (expected tiny, gpt2-small, llama-tiny or llama-small)");
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
    if (!name)
      throw ConfigError(
          origin +
          ": model.preset: expected a string (tiny | gpt2-small | llama-tiny | llama-small)");
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
  // Token shards made by `swarmrt data prepare` know their vocabulary: the model takes it
  // unless model.vocab_size says otherwise (else the first id above 255 was refused).
  if (config.data.format == DataFormat::tokens && !root["model"]["vocab_size"]) {
    try {
      if (auto v = tokens::prepared_vocab_size(config.data.path)) config.model.vocab_size = *v;
    } catch (const std::exception& e) {
      throw ConfigError(origin + ": data.path: " + e.what());
    }
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

}  // namespace swarmrt::config
