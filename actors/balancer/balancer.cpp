#include "actors/balancer/balancer.hpp"

#include "actors/common/worker_id.hpp"

#include <spdlog/spdlog.h>

#include <cmath>
#include <limits>
#include <memory>

#include "messages/metrics.hpp"
#include "messages/types.hpp"
#include "model/stage_cost.hpp"
#include "supervisors/entitled.hpp"

namespace swarmrt::actors {
using namespace swarmrt::atoms;
using Self = caf::stateful_actor<balancer_state>;

namespace {

// Micro-batches a worker's rate must cover before the balancer takes it as measured. (On
// 2 busy cores, rates of the first micro-batches moved a worker of a balanced 2 + 2 swarm,
// 1 of 7 runs of net.balancer.) From kProvisionalMeasurements on it is provisional: counted
// only by a plan that more than doubles the pipeline (BalancerParams::provisional_gain).
constexpr int kMinMeasurements = 8;
constexpr int kProvisionalMeasurements = 3;

double now_s(Self* self) {
  return std::chrono::duration<double>(balancer_state::Clock::now() - self->state.start).count();
}

void schedule(Self* self) {
  auto& s = self->state;
  std::uniform_real_distribution<double> jitter(-0.2, 0.2);
  const double secs = s.setup.ctx->config.balancer.period_s * (1.0 + jitter(s.rng));
  self->delayed_send(self, config::as_duration(secs), balance_timer_atom::value);
}

void done(Self* self) {
  self->state.planning = false;
  schedule(self);
}

// What one period gathers: every member's measured rate, as the workers answer.
struct Poll {
  size_t waiting = 0;
  std::vector<policy::Peer> peers;
  nlohmann::json rates = nlohmann::json::array();
};

// Carries the plan out one move after the other: the host holding the worker retires it and
// starts the new one; the new id (the directory picks its own across processes) is the one
// that cools down.
void execute(Self* self, std::vector<policy::Move> moves, size_t i) {
  auto& s = self->state;
  if (i >= moves.size()) return done(self);
  const auto m = moves[i];
  const uint32_t proposed = worker_id(m.to, s.next_replica[m.to]++);
  struct Fanin {
    size_t waiting;
    int64_t id = -1;
  };
  auto fan = std::make_shared<Fanin>(Fanin{s.setup.hosts.size()});
  auto answered = [=](int64_t id) {
    if (id >= 0 && fan->id < 0) fan->id = id;
    if (--fan->waiting > 0) return;
    auto& s = self->state;
    if (fan->id < 0) {
      spdlog::warn("balancer: no host moved worker {} (gone meanwhile)", m.worker);
    } else {
      const auto id = static_cast<uint32_t>(fan->id);
      s.moved_at[id] = now_s(self);
      s.arriving[id] = now_s(self);
      // Its speed moves with it (samples/s at cost 1) until it has measured itself anew.
      for (const auto& p : s.measured)
        if (p.id == m.worker && p.speed > 0) s.carried[id] = {p.speed, p.provisional};
      ++s.moves;
      spdlog::info("balancer: worker {} moves from stage {} to stage {} as worker {} ({})",
                   m.worker, m.from, m.to, id, m.reason);
      messages::send_metrics(self, s.setup.metrics,
                             {{"event", "rebalance"},
                              {"worker", m.worker},
                              {"new_worker", id},
                              {"from", m.from},
                              {"to", m.to},
                              {"gain", std::isinf(m.gain) ? -1.0 : m.gain},
                              {"reason", m.reason}});
    }
    execute(self, moves, i + 1);
  };
  if (s.setup.hosts.empty()) return done(self);
  const auto timeout = config::as_duration(s.setup.ctx->config.supervision.reply_timeout_s);
  for (const auto& host : s.setup.hosts)
    self->request(host, timeout, move_atom::value, m.worker, m.to, proposed)
        .then([=](int64_t id) { answered(id); }, [=](const caf::error&) { answered(-1); });
}

// The stages as the policy models them: costs, and the step's micro-batches (a stage's
// workers share those few, so a slow one beside a fast one adds less than its speed).
policy::Stages stages_of(const balancer_state& s) {
  return {s.cost, {}, s.setup.ctx->config.train.micro_batches};
}

void plan(Self* self, const std::shared_ptr<Poll>& poll) {
  auto& s = self->state;
  s.measured = poll->peers;
  auto moves = policy::plan_moves(poll->peers, stages_of(s), s.params, now_s(self));
  nlohmann::json planned = nlohmann::json::array();
  for (const auto& m : moves)
    planned.push_back({{"worker", m.worker}, {"from", m.from}, {"to", m.to}, {"gain", m.gain}});
  s.last = {{"period", s.periods},
            {"at_s", now_s(self)},
            {"rates", poll->rates},
            {"stage_rates", policy::stage_rates(poll->peers, stages_of(s))},
            {"plan", planned}};
  if (moves.empty()) return done(self);
  execute(self, std::move(moves), 0);
}

void on_members(Self* self, const messages::Membership& m) {
  auto& s = self->state;
  // A worker started by a move that is not a member yet: its stage looks short, and a plan
  // now would send it a second worker. The period passes (for at most start_timeout_s).
  const double now = now_s(self);
  for (const auto& stage : m.stages)
    for (const auto& w : stage) s.arriving.erase(w.id);
  for (auto it = s.arriving.begin(); it != s.arriving.end();)
    it = now - it->second > s.setup.ctx->config.supervision.start_timeout_s ? s.arriving.erase(it)
                                                                            : std::next(it);
  if (!s.arriving.empty()) return done(self);
  auto poll = std::make_shared<Poll>();
  std::map<uint32_t, balancer_state::Carried> carried;  // of the members only
  for (const auto& stage : m.stages)
    for (const auto& w : stage) {
      ++poll->waiting;
      if (auto c = s.carried.find(w.id); c != s.carried.end()) carried.insert(*c);
      // New ids never repeat one the stage has had.
      auto& next = s.next_replica[w.stage];
      next = std::max(next, w.id % 1000 + 1);
    }
  s.carried = std::move(carried);
  if (poll->waiting == 0) return done(self);
  const auto timeout = config::as_duration(s.setup.ctx->config.supervision.query_timeout_s);
  for (const auto& stage : m.stages)
    for (const auto& w : stage) {
      const uint32_t id = w.id, k = w.stage;
      auto answered = [=](double measured, bool provisional) {
        auto& s = self->state;
        const double rate = s.setup.speed ? s.setup.speed(id, measured) : measured;
        const auto moved = s.moved_at.find(id);
        policy::Peer p{
            id, k, k < s.cost.size() ? rate * s.cost[k] : 0.0,
            moved == s.moved_at.end() ? -std::numeric_limits<double>::infinity() : moved->second};
        p.provisional = provisional && !s.setup.speed;
        // Speed at a stage of cost 1. A worker a move started keeps its speed from before the
        // move until it has measured itself as well (counted with the mean instead, a fast
        // worker joining a slow one looked like a stage still short, and the next period
        // moved two more); any other unmeasured worker (0) counts with the mean.
        const auto c = s.carried.find(id);
        const bool carried =
            c != s.carried.end() && (!(p.speed > 0) || (p.provisional && !c->second.provisional));
        if (carried)
          p.speed = c->second.speed, p.provisional = c->second.provisional;
        else if (p.speed > 0 && !p.provisional)
          s.carried.erase(id);
        poll->peers.push_back(p);
        poll->rates.push_back({{"worker", id},
                               {"stage", k},
                               {"samples_per_s", rate},
                               {"provisional", p.provisional},
                               {"carried", carried}});
        if (--poll->waiting == 0) plan(self, poll);
      };
      self->request(w.handle, timeout, info_atom::value)
          .then(
              [=](const std::string& info) {
                double measured = 0;
                bool provisional = false;
                try {
                  const auto j = nlohmann::json::parse(info);
                  // A rate of its first few micro-batches is mostly warm-up (first
                  // allocations, a cold cache): it counts once it has kMinMeasurements,
                  // provisionally from kProvisionalMeasurements.
                  const int n = j.value("rate_measurements", 0);
                  if (j.contains("samples_per_s") && j["samples_per_s"].is_number() &&
                      n >= kProvisionalMeasurements) {
                    measured = j["samples_per_s"].get<double>();
                    provisional = n < kMinMeasurements;
                  }
                } catch (const std::exception&) {
                }
                answered(measured, provisional);
              },
              [=](const caf::error&) { answered(0, false); });
    }
}

}  // namespace

caf::behavior balancer(Self* self, BalancerSetup setup) {
  auto& s = self->state;
  s.setup = std::move(setup);
  const auto& cfg = s.setup.ctx->config;
  s.cost = model::stage_costs(cfg);
  s.params.min_gain = cfg.balancer.min_gain;
  s.params.min_workers = cfg.balancer.min_workers;
  s.params.cooldown_s = cfg.balancer.cooldown_s;
  s.params.max_moves = cfg.balancer.max_moves;
  s.rng.seed(static_cast<uint64_t>(cfg.train.seed));
  supervisors::quit_only_from_this_process(self, "the balancer");
  schedule(self);
  return {
      [=](balance_timer_atom) {
        auto& s = self->state;
        if (s.planning) return;
        s.planning = true;
        ++s.periods;
        const auto timeout = config::as_duration(s.setup.ctx->config.supervision.query_timeout_s);
        self->request(s.setup.tracker, timeout, ask_members_atom::value)
            .then([=](const messages::Membership& m) { on_members(self, m); },
                  [=](const caf::error&) { done(self); });
      },
      // The directory places the workers of a node that joins a running swarm where the
      // pipeline needs them most, among the workers that serve now (`serving`, the
      // directory's membership) by the last period's measurements (a newcomer counts with
      // the mean speed).
      [=](place_atom, uint32_t n, const messages::Membership& serving) {
        auto& s = self->state;
        std::vector<uint32_t> stages;
        if (s.measured.empty()) return stages;
        std::vector<std::pair<uint32_t, uint32_t>> now;
        for (uint32_t k = 0; k < serving.stages.size(); ++k)
          for (const auto& w : serving.stages[k]) now.emplace_back(w.id, k);
        auto peers = policy::serving_peers(s.measured, now);
        for (uint32_t i = 0; i < n; ++i) {
          const uint32_t k = policy::place(peers, stages_of(s), 0);
          stages.push_back(k);
          peers.push_back({std::numeric_limits<uint32_t>::max() - i, k, 0});
        }
        return stages;
      },
      // The console's `info balancer`.
      [=](info_atom) {
        auto& s = self->state;
        const auto& b = s.setup.ctx->config.balancer;
        return nlohmann::json{
            {"periods", s.periods},   {"moves", s.moves},         {"period_s", b.period_s},
            {"min_gain", b.min_gain}, {"max_moves", b.max_moves}, {"stage_costs", s.cost},
            {"last", s.last}}
            .dump();
      },
  };
}

}  // namespace swarmrt::actors
