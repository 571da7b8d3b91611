#include "supervisors/supervisor.hpp"

#include <spdlog/spdlog.h>
#include <nlohmann/json.hpp>

#include "messages/metrics.hpp"
#include "messages/types.hpp"
#include "model/run_dir.hpp"
#include "supervisors/entitled.hpp"

namespace swarmrt::supervisors {
using namespace swarmrt::atoms;
using Self = caf::stateful_actor<supervisor_state>;

namespace {

void write_metrics(Self* self, nlohmann::json record) {
  messages::send_metrics(self, self->state.setup.metrics, std::move(record));
}

bool is_shutdown(const caf::error& reason) {
  return !reason || reason == caf::exit_reason::user_shutdown || reason == caf::exit_reason::normal;
}

// Escalation: the children stop with their supervisor, whose watcher sees `why`.
void give_up(Self* self, caf::error why) {
  for (auto& child : self->state.setup.children)
    if (child.current) self->send_exit(child.current, caf::exit_reason::user_shutdown);
  self->quit(std::move(why));
}

void restart(Self* self, size_t i) {
  auto& s = self->state;
  auto& child = s.setup.children[i];
  try {
    child.current = child.start();
  } catch (const std::exception& e) {
    spdlog::error("{}: could not restart {}: {}", s.setup.name, child.name, e.what());
    give_up(self, caf::make_error(caf::sec::runtime_error, child.name + ": " + e.what()));
    return;
  }
  self->monitor(child.current);
  if (s.setup.roster) s.setup.roster->put(child.name, child.kind, child.current, child.stage);
  if (child.on_restart) child.on_restart(child.current);
  ++s.restarts;
  const double took =
      std::chrono::duration<double>(supervisor_state::Clock::now() - s.died_at[i]).count();
  spdlog::info("{}: restarted {} ({:.0f} ms after it died)", s.setup.name, child.name, took * 1000);
  write_metrics(
      self,
      {{"event", "recovered"}, {"kind", "restart"}, {"actor", child.name}, {"seconds", took}});
}

// A balancer's move: the old worker stops (a shutdown, which the down handler does not count
// as a fault) and the new one takes its place in the children, announced like a restart. The
// old worker is asked how slow it is first (a console's `slow` emulates slower hardware, which
// moves with the worker).
caf::result<int64_t> move_child(Self* self, uint32_t old_id, uint32_t stage, uint32_t new_id) {
  auto& s = self->state;
  const std::string old_name = worker_name(old_id);
  auto it = std::find_if(s.setup.children.begin(), s.setup.children.end(),
                         [&](const ChildSpec& c) { return c.name == old_name && c.respec; });
  if (it == s.setup.children.end()) return int64_t{-1};
  auto promise = self->make_response_promise<int64_t>();
  auto carry_out = [=](double slow_factor) mutable {
    auto& s = self->state;
    auto it = std::find_if(s.setup.children.begin(), s.setup.children.end(),
                           [&](const ChildSpec& c) { return c.name == old_name && c.respec; });
    if (it == s.setup.children.end()) {
      promise.deliver(int64_t{-1});
      return;
    }
    ChildSpec next;
    try {
      next = it->respec(new_id, stage, slow_factor);
      next.current = next.start();
    } catch (const std::exception& e) {
      spdlog::error("{}: could not start worker {} in place of {}: {}", s.setup.name, new_id,
                    old_name, e.what());
      promise.deliver(int64_t{-1});
      return;
    }
    caf::actor old = it->current;
    if (old) {
      if (s.setup.roster) s.setup.roster->remove(old_name, old);
      self->demonitor(old);
      self->send_exit(old, caf::exit_reason::user_shutdown);
    }
    *it = std::move(next);
    self->monitor(it->current);
    if (s.setup.roster) s.setup.roster->put(it->name, it->kind, it->current, it->stage);
    if (it->on_restart) it->on_restart(it->current);
    spdlog::info("{}: {} moved to stage {} as {}", s.setup.name, old_name, stage, it->name);
    promise.deliver(static_cast<int64_t>(new_id));
  };
  if (!it->current) {
    carry_out(1.0);
    return promise;
  }
  // The worker's speed, so that its successor is as slow (an emulated machine); a worker that
  // does not answer within the query timeout is treated as normal speed.
  self->request(it->current, config::as_duration(s.setup.policy.query_timeout_s), info_atom::value)
      .then(
          [=](const std::string& info) mutable {
            double slow = 1.0;
            try {
              slow = nlohmann::json::parse(info).value("slow_factor", 1.0);
            } catch (const std::exception&) {
            }
            carry_out(slow);
          },
          [=](const caf::error&) mutable { carry_out(1.0); });
  return promise;
}

}  // namespace

caf::behavior supervisor(Self* self, SupervisorSetup setup) {
  auto& s = self->state;
  s.setup = std::move(setup);
  s.policy = std::make_unique<policy::RestartPolicy>(s.setup.policy);
  s.died_at.resize(s.setup.children.size());
  for (const auto& child : s.setup.children) {
    self->monitor(child.current);
    if (s.setup.roster) s.setup.roster->put(child.name, child.kind, child.current, child.stage);
  }
  self->set_down_handler([=](const caf::down_msg& down) {
    auto& s = self->state;
    for (size_t i = 0; i < s.setup.children.size(); ++i) {
      auto& child = s.setup.children[i];
      if (!child.current || child.current.address() != down.source) continue;
      child.current = nullptr;
      if (s.setup.roster) s.setup.roster->remove(child.name);
      if (is_shutdown(down.reason)) return;  // stopped on purpose: not a fault
      const auto now = supervisor_state::Clock::now();
      const std::string reason = self->system().render(down.reason);
      write_metrics(
          self,
          {{"event", "fault"}, {"kind", child.kind}, {"actor", child.name}, {"reason", reason}});
      if (!child.start) {
        spdlog::error("{}: {} died ({}) and cannot be restarted", s.setup.name, child.name, reason);
        give_up(self, caf::make_error(caf::sec::runtime_error, child.name + " died: " + reason));
        return;
      }
      auto delay = s.policy->next(now);
      if (!delay) {
        const std::string why = fmt::format(
            "{}: {} died ({}), more than {} restarts within {} s: giving up", s.setup.name,
            child.name, reason, s.setup.policy.max_restarts, s.setup.policy.restart_window_s);
        spdlog::error("{}", why);
        write_metrics(self, {{"event", "fault"},
                             {"kind", "escalated"},
                             {"actor", child.name},
                             {"supervisor", s.setup.name}});
        give_up(self, caf::make_error(caf::sec::runtime_error, why));
        return;
      }
      s.died_at[i] = now;
      spdlog::warn("{}: {} died ({}); restarting in {} ms", s.setup.name, child.name, reason,
                   delay->count());
      self->delayed_send(self, *delay, restart_timer_atom::value, static_cast<uint64_t>(i));
      return;
    }
  });
  // Stopping the supervisor stops its children (nobody restarts them afterwards).
  self->set_exit_handler([=](const caf::exit_msg& msg) {
    for (auto& child : self->state.setup.children)
      if (child.current) self->send_exit(child.current, caf::exit_reason::user_shutdown);
    self->quit(msg.reason);
  });
  return {
      [=](restart_timer_atom, uint64_t i) {
        if (i < self->state.setup.children.size() && !self->state.setup.children[i].current)
          restart(self, i);
      },
      [=](faults_atom) { return self->state.restarts; },
      [=](move_atom, uint32_t old_id, uint32_t stage, uint32_t new_id) -> caf::result<int64_t> {
        if (!from_this_process(self)) {
          rejected(self, self->state.setup.name, "move");
          return int64_t{-1};
        }
        return move_child(self, old_id, stage, new_id);
      },
  };
}

}  // namespace swarmrt::supervisors
