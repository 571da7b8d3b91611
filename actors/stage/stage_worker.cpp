#include "actors/stage/stage_worker.hpp"

#include <spdlog/spdlog.h>

#include <nlohmann/json.hpp>

#include "actors/common/tensor_list.hpp"
#include "actors/stage/worker_internal.hpp"
#include "model/fragments.hpp"
#include "model/optim.hpp"
#include "model/threads.hpp"
#include "supervisors/entitled.hpp"
#include "transport/bulk.hpp"
#include "transport/relay.hpp"

namespace swarmrt::actors {
using namespace swarmrt::atoms;
using namespace swarmrt::actors::worker;
using messages::Frame;

namespace {

// The module, optimizer, wiring, links and replica of a new worker; its starting state.
void set_up(Self* self, WorkerSetup setup) {
  auto& s = self->state;
  s.setup = std::move(setup);
  const auto& cfg = s.setup.ctx->config;
  s.faults.configure(cfg.chaos.drop_fraction,
                     static_cast<uint64_t>(cfg.chaos.seed) * 1000003u + s.setup.id,
                     s.setup.slow_factor, s.setup.nan_at_step);
  // OpenMP's thread count is per thread: set it on this (detached) worker's own thread.
  model::set_compute_threads(static_cast<int>(cfg.train.threads));
  set_up_hop_links(cfg);
  s.module = model::make_stage_model(cfg.model, model::StageSpec{s.setup.stage, cfg.swarm.stages},
                                     static_cast<uint64_t>(cfg.train.seed));
  s.device = at::Device(s.setup.device);
  s.module->to(s.device);
  s.module->train();
  s.optimizer = model::make_adamw(*s.module, cfg.train);
  s.params = s.module->parameters();
  s.next = policy::Wiring(wiring_policy(cfg.swarm.wiring),
                          static_cast<uint64_t>(cfg.train.seed) * 7919 + s.setup.id,
                          static_cast<int>(cfg.swarm.max_inflight));
  s.next.set_measure(s.setup.ctx->wiring_measure);
  s.links.configure("worker " + std::to_string(s.setup.id), cfg.transport.links, s.setup.device,
                    cfg.transport.comm_timeout_s);
  if (cfg.chaos.is_malicious(s.setup.id)) {
    const auto from = static_cast<uint64_t>(cfg.chaos.malicious_from_step);
    s.faults.set_malice(cfg.chaos.malicious, from, cfg.chaos.malicious_scale);
    s.faults.set_hop_noise(cfg.chaos.hop_noise, from);
    if (cfg.chaos.malicious == config::Malicious::stale)
      spdlog::warn(
          "worker {} misbehaves on purpose from step {}: stale parameters, it takes no "
          "optimizer step (chaos.malicious)",
          s.setup.id, from);
    else if (cfg.chaos.malicious != config::Malicious::none)
      spdlog::warn("worker {} misbehaves on purpose from step {}: {} x{} (chaos.malicious)",
                   s.setup.id, from, config::name_of(cfg.chaos.malicious),
                   cfg.chaos.malicious_scale);
    if (cfg.chaos.hop_noise > 0)
      spdlog::warn(
          "worker {} misbehaves on purpose from step {}: noise of {} x their RMS on the "
          "activations and input gradients it sends (chaos.hop_noise)",
          s.setup.id, from, cfg.chaos.hop_noise);
  }
  if (s.setup.ctx->diloco()) {
    auto poison = [faults = &s.faults, d = &cfg.diloco](uint64_t step,
                                                        std::vector<at::Tensor>& ts) {
      const auto h = static_cast<uint64_t>(model::inner_steps_at(step, *d));
      faults->misbehave(step, ts);
      if (faults->poisons_round(step, h)) WorkerFaults::poison(ts);
    };
    // The replica holds the group's handle from here on and follows its restarts.
    ReplicaSetup rs{s.setup.ctx,   s.setup.id, s.setup.stage,          s.setup.tracker,
                    s.setup.group, s.device,   s.links.comm_options(), poison,
                    s.sent};
    s.replica = make_replica(*s.setup.ctx);
    s.replica->configure(rs, s.module);
  }
  // A worker may start in a swarm that is already training (a restart, a late join, a
  // resumed run): it takes its stage's state before it handles anything else. At the start
  // of a fresh run the state handed out is the initialization it already holds.
  // The tracker hands out a live peer's state, the DiLoCo group's θ or a checkpoint's.
  if (s.setup.tracker && s.setup.take_state) {
    transport::ask<messages::WorkerState>(
        self, s.setup.tracker, config::as_duration(cfg.supervision.start_timeout_s),
        start_state_atom::value,
        messages::StateRequest{s.setup.stage, s.setup.id, caf::actor_cast<caf::actor>(self)})
        .await(
            [=](const messages::WorkerState& st) {
              // Named donors: the state comes from them, in chunks (actors/recovery/).
              if (!st.donors.empty()) return fetch_state(self, st);
              load_state(self, st);
            },
            [=](const caf::error& e) {
              throw std::runtime_error("worker " + std::to_string(self->state.setup.id) +
                                       " got no state to start from: " + self->system().render(e));
            });
  }
  // Bad input is refused inside the frame handler; anything else that throws ends the worker
  // with the reason logged, and the tracker, which monitors every worker, fails the run
  // with that reason instead of waiting for it.
  self->set_exception_handler([](caf::scheduled_actor* a, std::exception_ptr& eptr) -> caf::error {
    try {
      std::rethrow_exception(eptr);
    } catch (const std::exception& e) {
      spdlog::error("{}: {}", a->name(), e.what());
    } catch (...) {
      spdlog::error("{}: unknown exception", a->name());
    }
    return caf::sec::runtime_error;
  });
}

// Membership and everything that carries a hop or a round frame in: CAF messages, chunks,
// communicator links, the bulk link.
caf::message_handler hop_handlers(Self* self) {
  return {
      [=](members_atom, const messages::Membership& m) {
        auto& s = self->state;
        // A handle can arrive empty: the actor's node went down before this message was
        // read here (its proxy cannot be made). Such a member is skipped.
        std::map<caf::actor_addr, std::string> live;
        for (const auto& stage : m.stages)
          for (const auto& member : stage) {
            if (!member.handle) continue;
            s.by_id[member.id] = member.handle;
            s.device_of[member.handle.address()] = member.device;
            live[member.handle.address()] = "worker " + std::to_string(member.id);
            transport::register_endpoint(member.handle.node(), member.endpoint);
          }
        s.links.members(std::move(live));
        s.next_ids.clear();
        if (s.setup.stage + 1 < m.stages.size())
          for (const auto& member : m.stages[s.setup.stage + 1])
            if (member.handle) s.next_ids.push_back(member.id);
        s.next.set_members(s.next_ids);
        flush_outbox(self);
        take_unrouted(self);
      },
      [=](flush_atom) {
        self->state.flush_due = false;
        flush_hop_reports(self);
      },
      [=](device_ready_atom) { on_device_ready(self); },
      [=](frame_atom, const Frame& frame) {
        deliver(self, messages::FrameKind::microbatch, frame,
                caf::actor_cast<caf::actor>(self->current_sender()));
      },
      [=](round_atom, const Frame& frame) {
        deliver(self, messages::FrameKind::round, frame, caf::actor());
      },
      [=](chunk_atom, const std::vector<uint8_t>& chunk) {
        on_chunk(self, chunk, caf::actor_cast<caf::actor>(self->current_sender()));
      },
      // A peer in another process opened a communicator link to this worker.
      [=](link_atom, uint64_t link, const std::string& backend, const std::vector<uint8_t>& id) {
        auto& s = self->state;
        const auto why = s.links.join(caf::actor_cast<caf::actor_addr>(self->current_sender()),
                                      link, backend, id);
        if (!why.empty()) {
          ++s.rejected;
          spdlog::warn("worker {} cannot join a {} link: {}", s.setup.id, backend, why);
        }
      },
      [=](comm_atom, uint64_t link, uint8_t kind, const std::vector<uint8_t>& header) {
        on_comm_hop(self, link, kind, header, caf::actor_cast<caf::actor>(self->current_sender()));
      },
      [=](transport::bulk_atom, uint64_t id) {
        if (auto d = transport::claim_bulk(self, id)) on_bulk(self, *d);
      },
      [=](transport::bulk_ready_atom, uint64_t id) {
        if (auto d = transport::take_bulk(id)) on_bulk(self, *d);
      },
  };
}

// The tracker's side of a step: reduce, apply, cancel, reset; state and parameters asked.
caf::message_handler step_handlers(Self* self) {
  return {
      [=](reduce_atom, uint64_t step) { reduce_step(self, step); },
      [=](grad_sum_atom, uint64_t step, const messages::TensorList& sum) {
        take_sum(self, step, sum);
      },
      [=](apply_atom, uint64_t step, double lr, double coef) { apply_step(self, step, lr, coef); },
      [=](params_atom) { return to_list(model::parameters_of(*self->state.module)); },
      // Answers whether this worker holds the micro-batch's gradient of this step.
      [=](cancel_atom, uint64_t step, uint32_t mb, uint32_t attempt) {
        cancel(self, step, mb, attempt);
        return self->state.accumulated.count({step, mb}) > 0;
      },
      // A restarted tracker opens `step` again from its first micro-batch, with attempts from
      // `floor`: everything this worker did in it is dropped (no worker has applied it).
      [=](reset_atom, uint64_t step, uint32_t floor) {
        reset_step(self, step, floor);
        return true;
      },
      // This worker's state for a restarted or joining peer (asked between steps).
      [=](state_atom) { return state_of(self); },
      // A snapshot for a joiner of this stage (asked between steps, as state_atom): the donor
      // that serves it and its step.
      [=](snapshot_atom) {
        auto [donor, step] = take_snapshot(self);
        return caf::make_message(donor, step);
      },
      [=](last_grads_atom) { return to_list(self->state.last_grads); },
      [=](parcel_atom, uint64_t id, uint32_t index, uint32_t count, uint64_t total,
          const std::vector<uint8_t>& slice) {
        transport::take_parcel(self, id, index, count, total, slice,
                               "worker " + std::to_string(self->state.setup.id));
      },
      // The same three asked from another process (relay.hpp): answered in slices.
      [=](relay_atom, const caf::actor& to, uint64_t ms, state_atom a) {
        transport::relay<messages::WorkerState>(self, to, ms, a);
      },
      [=](relay_atom, const caf::actor& to, uint64_t ms, params_atom a) {
        transport::relay<messages::TensorList>(self, to, ms, a);
      },
      [=](relay_atom, const caf::actor& to, uint64_t ms, last_grads_atom a) {
        transport::relay<messages::TensorList>(self, to, ms, a);
      },
  };
}

// The DiLoCo group's communicator and restarts of the group or the averager.
caf::message_handler diloco_handlers(Self* self) {
  return {
      // The DiLoCo group's communicator from now on: its first worker creates it and sends the
      // others its id; an empty backend means none.
      [=](group_comm_atom, const messages::GroupComm& c) {
        auto& s = self->state;
        if (s.replica) s.replica->on_group_comm(self, c);
      },
      [=](group_join_atom, const messages::GroupJoin& j) {
        auto& s = self->state;
        if (s.replica) s.replica->on_group_join(self, j);
      },
      // The group's answer for a round held for it: all-reduce, or send this worker's own.
      [=](group_go_atom, uint64_t round, uint64_t epoch, bool go) {
        auto& s = self->state;
        if (s.replica) s.replica->on_go(self, round, epoch, go);
      },
      [=](go_timer_atom, uint64_t round, uint64_t epoch) {
        auto& s = self->state;
        if (s.replica) s.replica->on_go_timer(self, round, epoch);
      },
      // A supervisor restarted the stage's DiLoCo group or gradient averager.
      [=](replaced_atom, const std::string& kind, uint32_t stage, const caf::actor& handle) {
        auto& s = self->state;
        if (stage != s.setup.stage) return;
        if (kind == "group" && s.replica) s.replica->on_group_replaced(self, handle);
        if (kind == "averager") {
          s.setup.averager = handle;
          // The dead averager's partial sum is gone: the new one needs this gradient again.
          if (s.sum_pending) send_gradient(self);
        }
      },
  };
}

// What the console asks and sets: slowdowns, drops, info, counters.
caf::message_handler console_handlers(Self* self) {
  return {
      [=](slow_atom, const std::string&, double factor) {
        if (!supervisors::from_this_process(self))
          return supervisors::rejected(self, "worker", "slow");
        self->state.faults.set_slow_factor(factor);
      },
      [=](drop_atom, double fraction) {
        if (!supervisors::from_this_process(self))
          return supervisors::rejected(self, "worker", "drop");
        self->state.faults.set_drop_fraction(fraction);
      },
      // A spot check of the next stage's work on a hop this worker sent (verify.cpp): only
      // the tracker chooses what is checked.
      [=](verify_atom, uint64_t step, uint32_t mb, uint32_t attempt, uint32_t verifier,
          uint32_t checker) {
        if (!supervisors::sent_by(self, self->state.setup.tracker))
          return supervisors::rejected(self, "worker", "verify");
        worker::send_again(self, step, mb, attempt, verifier, checker);
      },
      // The console's `misbehave` (checked there): from the step this worker is in on.
      [=](misbehave_atom, const std::string& kind, double scale) {
        if (!supervisors::from_this_process(self))
          return supervisors::rejected(self, "worker", "misbehave");
        auto& s = self->state;
        // Each `misbehave` replaces what the worker did before; `none` (and `heal`) ends it.
        const bool was = s.faults.misbehaving();
        s.faults.set_malice(config::Malicious::none, 0, 1.0);
        s.faults.set_hop_noise(0, 0);
        try {
          if (kind == "noise")
            s.faults.set_hop_noise(scale, s.step);
          else if (kind != "none")
            s.faults.set_malice(config::parse_choice<config::Malicious>(kind), s.step, scale);
        } catch (const config::ConfigError& e) {
          spdlog::warn("worker {}: misbehave refused: {}", s.setup.id, e.what());
          return;
        }
        if (kind != "none")
          spdlog::warn("worker {} misbehaves on purpose from step {}: {} x{} (console)", s.setup.id,
                       s.step, kind, scale);
        else if (was)
          spdlog::warn("worker {} is honest again from step {} (console)", s.setup.id, s.step);
      },
      // What the console's `info` shows of a worker.
      [=](info_atom) {
        auto& s = self->state;
        double checksum = 0;
        for (const auto& p : s.params) checksum += p.detach().sum().item<double>();
        const auto replica = s.replica ? s.replica->info() : nlohmann::json::object();
        return nlohmann::json{
            {"id", s.setup.id},
            {"stage", s.setup.stage},
            {"device", s.setup.device},
            {"step", s.step},
            {"applied_step", s.applied_step},
            {"inflight", s.inflight.size()},
            {"outbox", s.outbox.size()},
            {"forwards", s.forwards},
            {"rejected", s.rejected},
            {"stale", s.stale},
            {"dropped", s.faults.dropped()},
            {"slow_factor", s.faults.slow_factor()},
            {"drop_fraction", s.faults.drop_fraction()},
            {"round", replica.value("round", nlohmann::json(0))},
            {"diloco", replica.value("diloco", nlohmann::json())},
            {"samples_per_s", s.rate.value() ? nlohmann::json(*s.rate.value()) : nlohmann::json()},
            {"rate_measurements", s.rate.measurements()},
            {"bytes_sent", s.sent->to_json()},
            {"param_checksum", checksum}}
            .dump();
      },
      [=](stats_atom) {
        auto& s = self->state;
        const auto r = s.replica ? s.replica->stats() : ReplicaStats{};
        return messages::WorkerStats{
            s.setup.id,         s.rejected,          s.forwards, s.stale,     s.recomputed,
            s.faults.dropped(), s.links.frames_in(), r.reduces,  r.fallbacks, r.failures};
      },
  };
}

}  // namespace

caf::behavior stage_worker(Self* self, WorkerSetup setup) {
  set_up(self, std::move(setup));
  transport::take_frames_directly(self);
  return caf::behavior(hop_handlers(self)
                           .or_else(step_handlers(self))
                           .or_else(diloco_handlers(self))
                           .or_else(console_handlers(self)));
}

}  // namespace swarmrt::actors
