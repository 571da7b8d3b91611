// Spot checks of stage work (docs/security.md; the workers' side is actors/stage/verify.cpp).
// Once every micro-batch of a step is back and before the step is reduced, each stage's work
// on each micro-batch is checked with probability verify.fraction, drawn from a seed no worker
// holds: another worker of the stage computes again, from the hop the checked worker was sent,
// what it sent on, and the next-stage worker that received that output compares the two. A
// mismatch is settled by a third worker (policy/spot_check.hpp); the worker found wrong is
// banned (it leaves the swarm, is never adopted again, and the directory refuses its node) and
// the step runs again from its first micro-batch without it, so nothing it computed is applied.
// The workers' parameters are the step's until it is applied, which waits for the checks.
#include "actors/tracker/internal.hpp"

#include <spdlog/spdlog.h>
#include <random>

#include "messages/frame.hpp"
#include "model/checks.hpp"
#include "policy/splitmix.hpp"
#include "supervisors/entitled.hpp"
#include "transport/transport.hpp"

namespace swarmrt::actors::tracker {
using namespace swarmrt::atoms;
using messages::Direction;
using Check = tracker_state::Check;

namespace {

std::vector<uint32_t> stage_ids(const tracker_state& s, uint32_t stage) {
  std::vector<uint32_t> ids;
  if (stage < s.members.stages.size())
    for (const auto& w : s.members.stages[stage]) ids.push_back(w.id);
  return ids;
}

uint64_t pick_key(const tracker_state& s, const Check& c, uint64_t round) {
  return policy::splitmix64(s.verify_seed ^ policy::splitmix64(s.step * 1000003 + c.micro_batch) ^
                            (uint64_t{c.stage} << 32) ^ round);
}

// Sends the checked stage's input to the check's verifier: the tracker's own batch for stage 0,
// else through the upstream worker, which sends its hop again as it went on the wire.
void send_check(Self* self, const Check& c) {
  auto& s = self->state;
  auto verifier = s.by_id.find(c.verifier);
  auto upstream = c.upstream ? s.by_id.find(*c.upstream) : s.by_id.end();
  // A part already lost: the check expires with that loss (expire_checks).
  if (verifier == s.by_id.end() || (c.upstream && upstream == s.by_id.end())) return;
  if (c.upstream) {
    self->send(upstream->second, verify_atom::value, s.step, c.micro_batch, c.attempt, c.verifier,
               c.checker);
    return;
  }
  const auto& m = s.micro[c.micro_batch];
  messages::MicroBatchHeader h;
  h.run_id = s.setup.ctx->run_id;
  h.step = s.step;
  h.micro_batch = c.micro_batch;
  h.attempt = c.attempt;
  h.stage = 0;
  h.direction = Direction::verify;
  h.samples = static_cast<uint32_t>(m.batch.tensors[0].size(0));
  h.pin.assign(static_cast<size_t>(s.setup.ctx->stages()), messages::kNoWorker);
  h.pin[1] = c.checker;
  h.loss_scale = s.scaler.scale();
  transport::send_frame(self, verifier->second, messages::FrameKind::microbatch,
                        messages::make_frame(std::move(h), m.batch.tensors));
}

double tolerance(const tracker_state& s) {
  const auto& cfg = s.setup.ctx->config;
  return model::spot_check_tolerance(cfg.train.precision, cfg.swarm.hop_encoding,
                                     cfg.verify.tolerance);
}

void check_record(Self* self, const Check& c, policy::CheckVerdict verdict, double difference) {
  auto& s = self->state;
  nlohmann::json r{{"event", "spot_check"},
                   {"step", s.step},
                   {"micro_batch", c.micro_batch},
                   {"stage", c.stage},
                   {"checked", c.checked},
                   {"verifier", c.first.value_or(c.verifier)},
                   {"difference", difference},
                   {"tolerance", tolerance(s)},
                   {"verdict", policy::verdict_name(verdict)}};
  if (c.first) {
    r["third"] = c.verifier;
    r["difference"] = c.first_difference;
    r["third_difference"] = difference;
  }
  write_metrics(self, std::move(r));
}

// The worker found wrong leaves the swarm for good (see the file's comment).
void ban(Self* self, uint32_t id, const std::string& why) {
  auto& s = self->state;
  if (s.banned.count(id)) return;
  s.banned[id] = why;
  ++s.tally.bans;
  s.rerun_after_ban = true;
  if (s.setup.store) {  // a restarted tracker keeps it (restore, restart.cpp)
    std::lock_guard<std::mutex> lock(s.setup.store->mu);
    s.setup.store->banned = s.banned;
    s.setup.store->tally = s.tally;
  }
  spdlog::error("step {}: worker {} banned: {}; the step runs again without it", s.step, id, why);
  write_metrics(self, {{"event", "fault"},
                       {"kind", "banned"},
                       {"worker", id},
                       {"stage", s.stage_of[id]},
                       {"step", s.step},
                       {"why", why}});
  if (s.setup.roster)
    if (auto directory = s.setup.roster->find("directory"))
      self->send(*directory, ban_atom::value, id, why);
  auto it = s.by_id.find(id);
  if (it == s.by_id.end()) return;
  const auto handle = it->second;
  // Stopped on purpose: its supervisor does not restart it (a liar's might; it stays out).
  self->send_exit(handle, caf::exit_reason::user_shutdown);
  forget_worker(self, id, handle.address(), caf::make_error(caf::sec::runtime_error, "banned"));
}

// Every check answered or expired: the step goes on, or runs again after a ban.
void maybe_checks_done(Self* self) {
  auto& s = self->state;
  if (!s.checks.empty()) return;
  if (!s.rerun_after_ban) return maybe_close_step(self);
  s.rerun_after_ban = false;
  s.checked_step = 0;  // the step's new run is drawn again
  // Above every attempt of the step so far: whatever of it is still on the wire is dropped.
  uint32_t top = s.attempt_base;
  for (const auto& m : s.micro) top = std::max(top, m.attempt);
  s.attempt_base = top + 1;
  reset_workers(self);
}

void close_check(Self* self, size_t i) {
  auto& s = self->state;
  s.checks.erase(s.checks.begin() + static_cast<long>(i));
  maybe_checks_done(self);
}

}  // namespace

bool start_checks(Self* self) {
  auto& s = self->state;
  const auto& cfg = s.setup.ctx->config;
  if (cfg.verify.fraction <= 0 || s.checked_step == s.step) return false;
  s.checked_step = s.step;
  if (s.verify_seed == 0)
    s.verify_seed = cfg.verify.seed != 0
                        ? static_cast<uint64_t>(cfg.verify.seed)
                        : (uint64_t{std::random_device{}()} << 32) ^ std::random_device{}();
  const auto stages = static_cast<uint32_t>(s.setup.ctx->stages());
  for (uint32_t mb = 0; mb < s.micro.size(); ++mb) {
    const auto& m = s.micro[mb];
    if (m.route.size() != stages) continue;
    for (uint32_t k = 0; k + 1 < stages; ++k) {
      if (!policy::spot_checked(s.verify_seed, s.step, mb, k, cfg.verify.fraction)) continue;
      Check c;
      c.micro_batch = mb;
      c.stage = k;
      c.attempt = m.attempt;
      c.checked = m.route[k];
      c.checker = m.route[k + 1];
      if (k > 0) c.upstream = m.route[k - 1];
      // Every part of the check must still be here (a lost one's work was re-run).
      if (!s.by_id.count(c.checked) || !s.by_id.count(c.checker) ||
          (c.upstream && !s.by_id.count(*c.upstream)))
        continue;
      auto verifier = policy::pick_verifier(stage_ids(s, k), {c.checked}, pick_key(s, c, 0));
      if (!verifier) continue;
      c.verifier = *verifier;
      s.checks.push_back(c);
      ++s.tally.checks;
      send_check(self, c);
    }
  }
  if (s.checks.empty()) return false;
  // Each check is a hop again, a forward and a hop; a settlement as much again.
  self->delayed_send(self, 4 * microbatch_timeout(s), verify_timer_atom::value, s.step,
                     ++s.check_round);
  return true;
}

void on_verified(Self* self, uint64_t step, uint32_t mb, uint32_t attempt, uint32_t stage,
                 uint32_t checked, uint32_t verifier, double difference) {
  auto& s = self->state;
  if (step != s.step) return;
  auto it = std::find_if(s.checks.begin(), s.checks.end(), [&](const Check& c) {
    return c.micro_batch == mb && c.stage == stage && c.attempt == attempt;
  });
  if (it == s.checks.end()) return;
  // Only the check's own checker answers it, about the workers the tracker named.
  auto checker = s.by_id.find(it->checker);
  if (checker == s.by_id.end() || !supervisors::sent_by(self, checker->second) ||
      checked != it->checked || verifier != it->verifier) {
    spdlog::warn(
        "step {}: a spot check's answer for {}/{} from someone other than worker {}, or "
        "about other workers: ignored",
        step, mb, it->checker);
    return;
  }
  auto c = *it;
  const size_t i = static_cast<size_t>(it - s.checks.begin());
  const double tol = tolerance(s);
  const bool agrees = difference <= tol;
  if (!c.first) {
    auto third =
        policy::pick_verifier(stage_ids(s, stage), {c.checked, c.verifier}, pick_key(s, c, 1));
    const auto verdict = policy::after_verifier(agrees, third.has_value());
    if (verdict != policy::CheckVerdict::agreed) ++s.tally.mismatches;
    if (verdict == policy::CheckVerdict::settle) {
      spdlog::warn(
          "step {}: stage {}'s output of micro-batch {} from worker {} differs from "
          "worker {}'s by {:.3g} (tolerance {:.3g}): worker {} settles it",
          step, stage, mb, c.checked, c.verifier, difference, tol, *third);
      it->first = c.verifier;
      it->first_difference = difference;
      it->verifier = *third;
      send_check(self, *it);
      return;
    }
    if (verdict == policy::CheckVerdict::agreed) ++s.tally.agreed;
    if (verdict == policy::CheckVerdict::unsettled) {
      ++s.tally.unsettled;
      spdlog::warn(
          "step {}: stage {}'s output of micro-batch {} from worker {} differs from "
          "worker {}'s by {:.3g}, and no third worker can settle it",
          step, stage, mb, c.checked, c.verifier, difference);
    }
    check_record(self, c, verdict, difference);
    return close_check(self, i);
  }
  const auto verdict = policy::after_third(agrees);
  check_record(self, c, verdict, difference);
  const uint32_t wrong = verdict == policy::CheckVerdict::checked_wrong ? c.checked : *c.first;
  const std::string why =
      verdict == policy::CheckVerdict::checked_wrong
          ? fmt::format(
                "a spot check of stage {}'s output of micro-batch {} at step {}: worker "
                "{}'s differs by {:.3g} from worker {}'s recomputation and by {:.3g} "
                "from worker {}'s (tolerance {:.3g})",
                stage, mb, step, c.checked, c.first_difference, *c.first, difference, c.verifier,
                tol)
          : fmt::format(
                "a spot check of stage {}'s output of micro-batch {} at step {}: its "
                "recomputation differs by {:.3g} from worker {}'s output, which worker "
                "{}'s matches ({:.3g}; tolerance {:.3g})",
                stage, mb, step, c.first_difference, c.checked, c.verifier, difference, tol);
  // Closed before the ban: the ban's re-run must not find this check open.
  s.checks.erase(s.checks.begin() + static_cast<long>(i));
  ban(self, wrong, why);
  // The banned worker's other checks say nothing more.
  s.checks.erase(std::remove_if(s.checks.begin(), s.checks.end(),
                                [&](const Check& x) {
                                  return x.checked == wrong || x.checker == wrong ||
                                         x.verifier == wrong || x.upstream == wrong;
                                }),
                 s.checks.end());
  maybe_checks_done(self);
}

void expire_checks(Self* self, std::optional<uint32_t> lost) {
  auto& s = self->state;
  const size_t before = s.checks.size();
  s.checks.erase(std::remove_if(s.checks.begin(), s.checks.end(),
                                [&](const Check& c) {
                                  const bool gone = !lost || c.checked == *lost ||
                                                    c.checker == *lost || c.verifier == *lost ||
                                                    c.upstream == *lost || c.first == *lost;
                                  if (!gone) return false;
                                  ++s.tally.expired;
                                  write_metrics(self, {{"event", "spot_check"},
                                                       {"step", s.step},
                                                       {"micro_batch", c.micro_batch},
                                                       {"stage", c.stage},
                                                       {"checked", c.checked},
                                                       {"verifier", c.verifier},
                                                       {"verdict", "expired"}});
                                  return true;
                                }),
                 s.checks.end());
  if (s.checks.size() != before && !lost)
    spdlog::warn("step {}: {} spot check(s) not answered in time: expired", s.step,
                 before - s.checks.size());
  if (s.checks.size() != before) maybe_checks_done(self);
}

void on_verify_timer(Self* self, uint64_t step, uint64_t round) {
  auto& s = self->state;
  if (step != s.step || round != s.check_round || s.checks.empty()) return;
  expire_checks(self, std::nullopt);
}

nlohmann::json verify_info(const tracker_state& s) {
  nlohmann::json banned = nlohmann::json::array();
  for (const auto& [id, why] : s.banned) banned.push_back({{"worker", id}, {"why", why}});
  return {{"fraction", s.setup.ctx->config.verify.fraction},
          {"checks", s.tally.checks},
          {"agreed", s.tally.agreed},
          {"mismatches", s.tally.mismatches},
          {"unsettled", s.tally.unsettled},
          {"expired", s.tally.expired},
          {"bans", s.tally.bans},
          {"open", s.checks.size()},
          {"banned", banned}};
}

}  // namespace swarmrt::actors::tracker
