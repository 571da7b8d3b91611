// Streaming DiLoCo's fragments (Douillard et al. 2025; architecture §6): a stage's parameters
// split into P fragments that sync at staggered steps, so only about 1/P of the stage is on
// the wire at a time.
//
// Blocks are numbered within the stage (local index i of L). Strided: block i goes to fragment
// i mod P (the paper's choice: every fragment spans the depth of the stage). Sequential:
// block i goes to fragment ⌊i·P/L⌋ (contiguous runs of blocks). The parameters outside the
// blocks ride with the block next to them: the embeddings (wte, wpe, tok_embeddings) with the
// stage's first block, the final norm and head (ln_f, lm_head, norm, output) with its last, since
// those are the blocks whose inputs or outputs they shape.
//
// Fragment p syncs every H steps at offset ⌊p·H/P⌋: at steps t ≥ 1 with t ≡ ⌊p·H/P⌋ (mod H),
// so fragment 0 at H, 2H, ... as plain DiLoCo does.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "config/config.hpp"

namespace swarmrt::model {

// The fragment of every name in `names` (a stage's parameter names: "h.<layer>.…" or
// "layers.<layer>.…" for blocks, the embeddings, final norm and head outside them). Throws
// std::invalid_argument when P exceeds the stage's blocks (a fragment would be empty) or a name is
// neither.
std::vector<uint32_t> assign_fragments(const std::vector<std::string>& names, int64_t fragments,
                                       config::FragmentPattern pattern);

// Whether fragment p of P starts a round after the inner step of `step` (steps count from 1)
// when every step has the same H and none is a warm-up's (the run's own schedule, with both:
// the overload below).
bool fragment_due(uint64_t step, uint32_t p, int64_t inner_steps, int64_t fragments);

// Fragment p's round schedule under the run's DiLoCo settings: none in a synchronous warm-up of
// K steps; after it, each phase of diloco.inner_steps_schedule counts from its own start as a
// run of its H would from step 1, then diloco.inner_steps for the rest. Without a schedule:
// fragment_due(step − K, p, H, P) after step K.
bool fragment_due(uint64_t step, uint32_t p, const config::DilocoConfig& d);

// The H in force at `step` (the warm-up's steps take the first phase's).
int64_t inner_steps_at(uint64_t step, const config::DilocoConfig& d);

// The outer learning rate of a round started at `step` of a run of `total_steps`:
// diloco.outer_lr, or its cosine decay to diloco.outer_min_lr from the warm-up's end to the
// run's last step.
double outer_lr_at(uint64_t step, const config::DilocoConfig& d, int64_t total_steps);

// The step offset ⌊p·H/P⌋ of fragment p.
int64_t fragment_offset(uint32_t p, int64_t inner_steps, int64_t fragments);

// Whether, once `step` has closed, a fragment's round is still in flight: it started after
// the inner step of some t <= step and merges with step t + overlap_steps > step.
bool round_in_flight(uint64_t step, const config::DilocoConfig& d);

// Whether a periodic checkpoint (every `every` steps) is taken when `step` closes: at each
// multiple of `every`, unless a Streaming round is then in flight (the checkpoint could not
// hold it, and a run resumed from it would not repeat it); then at the first step after it
// where none is (at most overlap_steps later). `streaming`: the run's mode syncs fragments.
bool checkpoint_due(uint64_t step, int64_t every, const config::DilocoConfig& d, bool streaming);

}  // namespace swarmrt::model
