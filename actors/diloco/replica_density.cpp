// swarm.compression = auto with sparse rounds (diloco.compress = topk) on the worker: each
// contribution takes the densest of policy::density_ladder whose bytes reach the group within
// the compute its round overlaps, from the measured delivery of this worker's link to the
// group's process (transport/delivery.hpp), as hops choose their encoding (hop_links.cpp). A
// group in this process is reached over no wire: the densest. The choice is told to the
// tracker as the link's choice (the step records' hop_encodings: "topk 4%" to "DiLoCo group
// at" its endpoint) once a round, and logged when it changes. Under diloco.all_gather every
// worker receives every contribution as sent, so the group tells each worker the least density
// of the round's links, and no contribution goes denser (policy::capped_rung).
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "actors/diloco/replica.hpp"
#include "model/topk.hpp"
#include "policy/hop_choice.hpp"
#include "transport/bulk.hpp"
#include "transport/delivery.hpp"

namespace swarmrt::actors {

double DilocoReplica::choose_density(Self* self, uint64_t step,
                                     const std::vector<at::Tensor>& tensors) {
  const auto& cfg = setup_.ctx->config;
  const auto& d = cfg.diloco;
  if (cfg.swarm.compression != config::Compression::automatic ||
      d.compress != config::Compress::topk)
    return d.topk_density;
  // A step's seconds between this worker's contributions, less what it waited for their answers
  // at τ = 0 (merge): counted in, the wait for a round over a slow link (its answer as dense as
  // the contribution) would lengthen the steps it is measured against and keep it dense.
  const auto now = std::chrono::steady_clock::now();
  double step_s = 0;
  if (last_sent_at_ && step > last_sent_at_->first)
    step_s = std::max(
        0.0, (std::chrono::duration<double>(now - last_sent_at_->second).count() - waited_s_) /
                 static_cast<double>(step - last_sent_at_->first));
  last_sent_at_ = {step, now};
  waited_s_ = 0;
  const double budget_s = static_cast<double>(std::max<int64_t>(1, d.overlap_steps)) * step_s;

  const auto ladder = model::round_densities(cfg);  // the rungs the group decodes
  const auto to = setup_.group.node();
  const bool local = to == self->node();
  std::vector<double> seconds;
  auto t = model::topk_of(d);
  for (double density : ladder) {
    t.density = density;
    uint64_t bytes = 1024;  // the round's header and its tensors' names
    for (const auto& x : tensors) bytes += model::topk_bytes(x.numel(), t);
    seconds.push_back(local ? 0.0 : transport::link_seconds_for(to, bytes));
  }
  auto rung = density_choice_.choose(seconds, local ? 1.0 : budget_s);
  if (local) rung = 0;  // no wire to wait for
  // diloco.all_gather: this round's contribution reaches every other worker too, so it goes no
  // denser than the slowest link of the last round carries.
  carried_ = ladder[rung];
  if (d.all_gather) rung = policy::capped_rung(ladder, rung, round_cap_);
  const bool changed = rung != sent_rung_;
  sent_rung_ = rung;
  const double mbit_s = local ? 0 : transport::link_bytes_per_s(to) * 8e-6;
  const auto name = fmt::format("topk {:g}%", 100 * ladder[rung]);
  const auto link =
      "DiLoCo group at " + (local ? std::string("this process")
                                  : transport::endpoint_of(to).value_or(caf::to_string(to)));
  if (changed)
    spdlog::info(
        "worker {}: rounds to the {} in {} ({:.1f} Mbit/s measured, {:.1f} ms of compute to "
        "hide under{})",
        setup_.id, link.substr(7), name, mbit_s, budget_s * 1e3,
        ladder[rung] < carried_
            ? fmt::format("; another worker's link carries {:g}%", 100 * round_cap_)
            : "");
  if (setup_.tracker)
    self->send(setup_.tracker, atoms::hop_choice_atom::value, setup_.id, link, name, mbit_s,
               budget_s * 1e3, changed);
  return ladder[rung];
}

}  // namespace swarmrt::actors
