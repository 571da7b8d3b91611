// The rows of the config table (config.cpp), as the parser (toml.cpp) and validate()
// read them. Internal to the config library.
#pragma once

#include <cmath>
#include <iomanip>
#include <limits>
#include <sstream>
#include <string>
#include <type_traits>
#include <variant>
#include <vector>

#include "config/config.hpp"

namespace swarmrt::config::rows {

// A choice key's enum, read and written through its index in names<E>().
struct EnumRef {
  void* value;
  const std::vector<std::string>* names;
  size_t (*get)(const void*);
  void (*set)(void*, size_t);
};

using Slot = std::variant<int64_t*, double*, std::string*, EnumRef, bool*>;

inline Slot slot_of(int64_t* p) {
  return p;
}
inline Slot slot_of(double* p) {
  return p;
}
inline Slot slot_of(std::string* p) {
  return p;
}
inline Slot slot_of(bool* p) {
  return p;
}
template <class E, class = std::enable_if_t<std::is_enum<E>::value>>
inline Slot slot_of(E* p) {
  return EnumRef{p, &names<E>(),
                 [](const void* v) { return static_cast<size_t>(*static_cast<const E*>(v)); },
                 [](void* v, size_t i) { *static_cast<E*>(v) = static_cast<E>(i); }};
}

// Whether every node of a swarm must agree on a key (it is part of the config fingerprint a
// join is checked against) or each node may set it for itself.
enum class Scope { shared, node };

// The values a number key admits: [lo, hi] with either end open.
struct Range {
  double lo = -std::numeric_limits<double>::infinity();
  double hi = std::numeric_limits<double>::infinity();
  bool lo_open = false, hi_open = false;

  bool admits(double v) const {
    return (lo_open ? v > lo : v >= lo) && (hi_open ? v < hi : v <= hi);
  }
  std::string describe() const {
    auto num = [](double v) {
      std::ostringstream os;
      os << std::setprecision(15) << v;  // 1048576, not 1.04858e+06
      return os.str();
    };
    const bool low = std::isfinite(lo), high = std::isfinite(hi);
    if (low && high && lo == hi) return "must be " + num(lo);
    if (low && !high) return std::string("must be ") + (lo_open ? "> " : ">= ") + num(lo);
    if (!low && high) return std::string("must be ") + (hi_open ? "< " : "<= ") + num(hi);
    if (!lo_open && !hi_open) return "must be between " + num(lo) + " and " + num(hi);
    return "must be in " + std::string(lo_open ? "(" : "[") + num(lo) + ", " + num(hi) +
           (hi_open ? ")" : "]");
  }
};
inline Range any() {
  return {};
}
inline Range at_least(double lo) {
  return {lo};
}
inline Range above(double lo) {
  return {lo, std::numeric_limits<double>::infinity(), true};
}
inline Range between(double lo, double hi) {
  return {lo, hi};
}
inline Range fraction_below_one() {  // [0, 1)
  return {0, 1, false, true};
}
inline Range open_unit() {  // (0, 1)
  return {0, 1, true, true};
}

// A string key's own check: empty when the value is fine, else what is wrong.
using Check = std::string (*)(const std::string&);

// One row per key: where it lives, who sets it, what values it admits, what it means.
struct Field {
  std::string section;
  std::string key;
  Slot (*slot)(RunConfig&);
  Scope scope;
  Range range;  // number keys
  Check check;  // string keys; choice keys are checked by their enum's names
  std::string help;
};

// Every key, in the order the effective config is written.
const std::vector<Field>& fields();
const Field* find_field(const std::string& section, const std::string& key);

}  // namespace swarmrt::config::rows
