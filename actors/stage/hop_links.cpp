// swarm.compression = auto on the worker: each hop to another process takes the encoding its
// link's chooser picks (policy/hop_choice.hpp) from the link's measured delivery rate
// (transport/delivery.hpp) and this worker's compute time per micro-batch; a hop to a worker of
// this process crosses no wire and goes as it is. A choice that changes is told to the tracker,
// which writes it in the step records (the console's `stats`, the status page).
#include <spdlog/spdlog.h>

#include "actors/stage/worker_internal.hpp"
#include "model/hop_codec.hpp"
#include "model/precision.hpp"
#include "policy/hop_choice.hpp"
#include "transport/delivery.hpp"

namespace swarmrt::actors::worker {
using config::HopEncoding;
using messages::Direction;
using messages::MicroBatchHeader;

namespace {

std::vector<HopEncoding> ladder_of(const config::RunConfig& cfg) {
  return policy::hop_ladder(cfg.swarm.hop_encoding,
                            model::compute_dtype(cfg.train.precision) != at::kFloat);
}

}  // namespace

void set_up_hop_links(const config::RunConfig& cfg) {
  if (cfg.swarm.compression == config::Compression::automatic) transport::measure_links(true);
}

HopEncoding choose_encoding(Self* self, const caf::actor& to, const MicroBatchHeader& h,
                            const std::vector<at::Tensor>& ts) {
  auto& s = self->state;
  const auto& cfg = s.setup.ctx->config;
  if (cfg.swarm.compression != config::Compression::automatic) return cfg.swarm.hop_encoding;
  const auto ladder = ladder_of(cfg);
  if (to.node() == self->node()) return ladder.front();
  const auto d = h.direction == Direction::backward ? model::HopDirection::backward
                                                    : model::HopDirection::forward;
  // Each rung's frame: the hop's wire and what travels beside it (targets, the header).
  const auto& x = ts[0];
  uint64_t beside = 256;
  for (size_t i = 1; i < ts.size(); ++i) beside += ts[i].nbytes();
  std::vector<double> seconds;
  for (auto e : ladder)
    seconds.push_back(transport::link_seconds_for(
        to.node(),
        model::hop_wire_bytes(e, cfg.swarm.hop_block, d, x.sizes(), x.scalar_type()) + beside));
  const double rate = transport::link_bytes_per_s(to.node());
  const auto samples_per_s = s.rate.value();
  const double compute_s =
      samples_per_s && *samples_per_s > 0 ? static_cast<double>(h.samples) / *samples_per_s : 0;
  auto& link = s.hop_choice[to.node()];
  const bool first = link.chooser.hops() == 0;
  const auto before = link.chooser.rung();
  const auto rung = link.chooser.choose(seconds, compute_s);
  const bool changed = first || rung != before;
  // A change at once (logged here, an event in the metrics); the choice with its latest
  // measurements once a step besides, for the step records.
  if (!changed && link.told_step == h.step) return ladder[rung];
  link.told_step = h.step;
  const auto endpoint = transport::endpoint_of(to.node()).value_or(caf::to_string(to.node()));
  const auto name = config::name_of(ladder[rung]);
  if (changed)
    spdlog::info(
        "worker {}: hops to {} in {} ({:.1f} Mbit/s measured, {:.1f} ms of compute a "
        "micro-batch)",
        s.setup.id, endpoint, name, rate * 8e-6, compute_s * 1e3);
  if (s.setup.tracker)
    self->send(s.setup.tracker, hop_choice_atom::value, s.setup.id, endpoint, name, rate * 8e-6,
               compute_s * 1e3, changed);
  return ladder[rung];
}

HopEncoding encoding_of(const worker_state& s, const MicroBatchHeader& h) {
  const auto& swarm = s.setup.ctx->config.swarm;
  if (swarm.compression != config::Compression::automatic) return swarm.hop_encoding;
  return static_cast<HopEncoding>(h.hop_encoding);
}

std::string refuse_encoding(const worker_state& s, const MicroBatchHeader& h) {
  const auto& cfg = s.setup.ctx->config;
  const auto& names = config::names<HopEncoding>();
  const auto named =
      h.hop_encoding < names.size() ? names[h.hop_encoding] : "#" + std::to_string(h.hop_encoding);
  if (cfg.swarm.compression != config::Compression::automatic) {
    if (h.hop_encoding == static_cast<uint8_t>(cfg.swarm.hop_encoding)) return "";
    return "hop encoding " + named + ", this run's is " + config::name_of(cfg.swarm.hop_encoding) +
           " (swarm.hop_encoding)";
  }
  for (auto e : ladder_of(cfg))
    if (h.hop_encoding == static_cast<uint8_t>(e)) return "";
  return "hop encoding " + named + ", which swarm.compression = auto down to " +
         config::name_of(cfg.swarm.hop_encoding) + " does not choose";
}

}  // namespace swarmrt::actors::worker
