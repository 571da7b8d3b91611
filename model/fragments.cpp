#include "model/fragments.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <stdexcept>

namespace swarmrt::model {
namespace {

bool starts(const std::string& name, const char* prefix) {
  return name.rfind(prefix, 0) == 0;
}

// The global layer of a block parameter ("h.<layer>.…" in the GPT, "layers.<layer>.…" in
// Llama), or -1 for a parameter outside blocks.
int64_t layer_of(const std::string& name) {
  const size_t at = starts(name, "h.") ? 2 : starts(name, "layers.") ? 7 : 0;
  if (at == 0) return -1;
  const auto dot = name.find('.', at);
  try {
    return std::stoll(name.substr(at, dot == std::string::npos ? std::string::npos : dot - at));
  } catch (const std::exception&) {
    throw std::invalid_argument("parameter '" + name + "' names no block index");
  }
}

}  // namespace

int64_t fragment_offset(uint32_t p, int64_t inner_steps, int64_t fragments) {
  return static_cast<int64_t>(p) * inner_steps / fragments;
}

bool fragment_due(uint64_t step, uint32_t p, int64_t inner_steps, int64_t fragments) {
  const auto offset = static_cast<uint64_t>(fragment_offset(p, inner_steps, fragments));
  return step >= 1 && step >= offset && (step - offset) % static_cast<uint64_t>(inner_steps) == 0;
}

bool fragment_due(uint64_t step, uint32_t p, const config::DilocoConfig& d) {
  const auto k = static_cast<uint64_t>(std::max<int64_t>(0, d.warmup_sync_steps));
  if (step <= k) return false;
  uint64_t from = k;  // the step before the phase's first
  for (const auto& phase : config::parse_inner_schedule(d.inner_steps_schedule)) {
    const auto end = from + static_cast<uint64_t>(phase.steps);
    if (step <= end) return fragment_due(step - from, p, phase.inner_steps, d.fragments);
    from = end;
  }
  return fragment_due(step - from, p, d.inner_steps, d.fragments);
}

int64_t inner_steps_at(uint64_t step, const config::DilocoConfig& d) {
  auto from = static_cast<uint64_t>(std::max<int64_t>(0, d.warmup_sync_steps));
  for (const auto& phase : config::parse_inner_schedule(d.inner_steps_schedule)) {
    from += static_cast<uint64_t>(phase.steps);
    if (step <= from) return phase.inner_steps;
  }
  return d.inner_steps;
}

double outer_lr_at(uint64_t step, const config::DilocoConfig& d, int64_t total_steps) {
  if (d.outer_lr_schedule == config::Schedule::constant) return d.outer_lr;
  const auto k = std::max<int64_t>(0, d.warmup_sync_steps);
  const double span = static_cast<double>(std::max<int64_t>(1, total_steps - k));
  const double progress =
      std::clamp((static_cast<double>(step) - static_cast<double>(k)) / span, 0.0, 1.0);
  return d.outer_min_lr + 0.5 * (d.outer_lr - d.outer_min_lr) * (1.0 + std::cos(M_PI * progress));
}

bool round_in_flight(uint64_t step, const config::DilocoConfig& d) {
  for (uint32_t p = 0; p < static_cast<uint32_t>(d.fragments); ++p)
    for (uint64_t k = 0; k < static_cast<uint64_t>(std::max<int64_t>(0, d.overlap_steps)); ++k)
      if (step > k && fragment_due(step - k, p, d)) return true;
  return false;
}

bool checkpoint_due(uint64_t step, int64_t every, const config::DilocoConfig& d, bool streaming) {
  if (every <= 0) return false;
  const auto every_u = static_cast<uint64_t>(every);
  if (!streaming || d.overlap_steps <= 0) return step % every_u == 0;
  // Back from `step` over steps that closed with a round in flight, to a multiple of `every`.
  for (uint64_t back = 0; back <= static_cast<uint64_t>(d.overlap_steps) && back < step; ++back) {
    const uint64_t s = step - back;
    if (back > 0 && !round_in_flight(s, d)) return false;  // that step took the checkpoint
    if (s % every_u == 0) return !round_in_flight(step, d);
  }
  return false;
}

std::vector<uint32_t> assign_fragments(const std::vector<std::string>& names, int64_t fragments,
                                       config::FragmentPattern pattern) {
  if (fragments < 1) throw std::invalid_argument("diloco.fragments must be at least 1");
  // The stage's blocks, numbered from 0 in order of their global layer.
  std::map<int64_t, int64_t> local;
  for (const auto& n : names)
    if (auto l = layer_of(n); l >= 0) local.emplace(l, 0);
  int64_t i = 0;
  for (auto& [layer, index] : local) index = i++;
  const auto blocks = static_cast<int64_t>(local.size());
  if (fragments > 1 && fragments > blocks)
    throw std::invalid_argument("diloco.fragments = " + std::to_string(fragments) +
                                " exceeds the stage's " + std::to_string(blocks) +
                                " blocks: a fragment would hold no block");
  auto of_block = [&](int64_t b) {
    return static_cast<uint32_t>(
        pattern == config::FragmentPattern::strided ? b % fragments : b * fragments / blocks);
  };
  std::vector<uint32_t> out;
  out.reserve(names.size());
  for (const auto& n : names) {
    if (fragments == 1) {
      out.push_back(0);
    } else if (auto l = layer_of(n); l >= 0) {
      out.push_back(of_block(local.at(l)));
    } else if (starts(n, "wte.") || starts(n, "wpe.") || starts(n, "tok_embeddings.")) {
      out.push_back(of_block(0));
    } else if (starts(n, "ln_f.") || starts(n, "lm_head.") || starts(n, "norm.") ||
               starts(n, "output.")) {
      out.push_back(of_block(blocks - 1));
    } else {
      throw std::invalid_argument("parameter '" + n + "' belongs to no fragment");
    }
  }
  return out;
}

}  // namespace swarmrt::model
