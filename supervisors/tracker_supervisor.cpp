#include "supervisors/tracker_supervisor.hpp"

#include <spdlog/spdlog.h>
#include <nlohmann/json.hpp>

#include "messages/metrics.hpp"
#include "model/run_dir.hpp"
#include "supervisors/entitled.hpp"
#include "transport/relay.hpp"

namespace swarmrt::supervisors {
using namespace swarmrt::atoms;
using Self = caf::stateful_actor<tracker_supervisor_state>;

namespace {

void write_metrics(Self* self, nlohmann::json record) {
  messages::send_metrics(self, self->state.setup.metrics, std::move(record));
}

bool is_shutdown(const caf::error& reason) {
  return !reason || reason == caf::exit_reason::user_shutdown || reason == caf::exit_reason::normal;
}

// Keeps what a new tracker must be told again; true when `msg` is such a message (it is then
// replayed, not queued, while no tracker runs).
bool remember(Self* self, const caf::message& msg) {
  auto& s = self->state;
  if (msg.match_elements<members_atom, messages::Membership>()) {
    s.members = msg.get_as<messages::Membership>(1);
    return true;
  }
  if (msg.match_elements<restarted_atom, messages::Member>()) {
    // A worker restarted with the same id and a new handle: it replaces the old one.
    const auto& w = msg.get_as<messages::Member>(1);
    if (s.members && w.handle) messages::replace_member(*s.members, w);
    return true;
  }
  if (msg.match_elements<replaced_atom, std::string, uint32_t, caf::actor>()) {
    s.replaced[{msg.get_as<std::string>(1), msg.get_as<uint32_t>(2)}] = msg.get_as<caf::actor>(3);
    return true;
  }
  if (msg.match_elements<watch_atom, caf::actor>()) {
    s.watches.push_back(msg.get_as<caf::actor>(1));
    return true;
  }
  return false;
}

void ask_run(Self* self) {
  auto& s = self->state;
  if (!s.run || !s.tracker || s.stopped) return;
  const uint64_t epoch = ++s.run_epoch;
  self->request(s.tracker, caf::infinite, run_atom::value)
      .then(
          [=](const messages::RunReport& report) {
            auto& s = self->state;
            if (epoch != s.run_epoch || !s.run) return;
            s.run->deliver(report);
            s.run.reset();
          },
          [=](const caf::error& e) {
            auto& s = self->state;
            if (epoch != s.run_epoch || !s.run) return;
            // The tracker died with the request in its mailbox: its successor is asked.
            if (e == caf::sec::request_receiver_down) return;
            s.run->deliver(e);
            s.run.reset();
          });
}

void ask_state(Self* self, uint64_t key) {
  auto& s = self->state;
  auto it = s.state_asks.find(key);
  if (it == s.state_asks.end() || !s.tracker) return;
  const auto& a = it->second;
  self->request(s.tracker, caf::infinite, start_state_atom::value, a.request)
      .then(
          [=](const messages::WorkerState& st) {
            auto& s = self->state;
            auto it = s.state_asks.find(key);
            if (it == s.state_asks.end()) return;
            it->second.promise.deliver(st);
            s.state_asks.erase(it);
          },
          [=](const caf::error& e) {
            auto& s = self->state;
            auto it = s.state_asks.find(key);
            if (it == s.state_asks.end() || e == caf::sec::request_receiver_down) return;
            it->second.promise.deliver(e);
            s.state_asks.erase(it);
          });
}

void start(Self* self) {
  auto& s = self->state;
  s.tracker = s.setup.start();
  self->monitor(s.tracker);
  if (s.setup.roster) s.setup.roster->put("tracker", "tracker", s.tracker);
}

void restart(Self* self) {
  auto& s = self->state;
  try {
    start(self);
  } catch (const std::exception& e) {
    const std::string why = std::string("could not restart the step tracker: ") + e.what();
    spdlog::error("tracker supervisor: {}", why);
    if (s.run) s.run->deliver(caf::make_error(caf::sec::runtime_error, why));
    self->quit(caf::make_error(caf::sec::runtime_error, why));
    return;
  }
  ++s.restarts;
  // The restarted core actors first (the tracker announces the membership to them), then the
  // membership, then the supervisors it watches.
  for (const auto& [key, handle] : s.replaced)
    self->send(s.tracker, replaced_atom::value, key.first, key.second, handle);
  if (s.members) self->send(s.tracker, members_atom::value, *s.members);
  for (const auto& sup : s.watches) self->send(s.tracker, watch_atom::value, sup);
  auto queued = std::move(s.queued);
  s.queued.clear();
  for (auto& [promise, msg] : queued) promise.delegate(s.tracker, std::move(msg));
  ask_run(self);
  for (const auto& [key, ask] : s.state_asks) ask_state(self, key);
  const double took =
      std::chrono::duration<double>(tracker_supervisor_state::Clock::now() - s.died_at).count();
  spdlog::info("tracker supervisor: restarted the step tracker ({:.0f} ms after it died)",
               took * 1000);
  write_metrics(
      self, {{"event", "recovered"}, {"kind", "restart"}, {"actor", "tracker"}, {"seconds", took}});
}

}  // namespace

caf::behavior tracker_supervisor(Self* self, TrackerSupervisorSetup setup) {
  auto& s = self->state;
  s.setup = std::move(setup);
  s.policy = std::make_unique<policy::RestartPolicy>(s.setup.policy);
  start(self);
  // Everything this actor does not handle itself goes to the tracker, as if sent to it.
  self->set_default_handler(
      [=](caf::scheduled_actor*, caf::message_view& view) -> caf::result<caf::message> {
        auto& s = self->state;
        auto msg = view.move_content_to_message();
        const bool replayed = remember(self, msg);
        auto promise = self->make_response_promise();
        if (s.tracker)
          promise.delegate(s.tracker, std::move(msg));
        else if (!replayed)
          s.queued.emplace_back(promise, std::move(msg));
        return promise;
      });
  self->set_down_handler([=](const caf::down_msg& down) {
    auto& s = self->state;
    if (!s.tracker || s.tracker.address() != down.source) return;
    s.tracker = nullptr;
    if (s.setup.roster) s.setup.roster->remove("tracker");
    if (is_shutdown(down.reason)) return;
    const auto now = tracker_supervisor_state::Clock::now();
    const std::string reason = self->system().render(down.reason);
    write_metrics(
        self, {{"event", "fault"}, {"kind", "tracker"}, {"actor", "tracker"}, {"reason", reason}});
    auto delay = s.policy->next(now);
    if (!delay) {
      const std::string why = fmt::format(
          "tracker supervisor: the step tracker died ({}), more than {} restarts within {} s: "
          "giving up",
          reason, s.setup.policy.max_restarts, s.setup.policy.restart_window_s);
      spdlog::error("{}", why);
      write_metrics(self, {{"event", "fault"},
                           {"kind", "escalated"},
                           {"actor", "tracker"},
                           {"supervisor", "tracker supervisor"}});
      if (s.run) s.run->deliver(caf::make_error(caf::sec::runtime_error, why));
      s.run.reset();
      self->quit(caf::make_error(caf::sec::runtime_error, why));
      return;
    }
    s.died_at = now;
    spdlog::warn("tracker supervisor: the step tracker died ({}); restarting it in {} ms", reason,
                 delay->count());
    self->delayed_send(self, *delay, restart_timer_atom::value, uint64_t{0});
  });
  // Stopping the supervisor stops the tracker (nobody restarts it afterwards).
  self->set_exit_handler([=](const caf::exit_msg& msg) {
    auto& s = self->state;
    if (s.tracker) self->send_exit(s.tracker, caf::exit_reason::user_shutdown);
    self->quit(msg.reason);
  });
  return {
      [=](restart_timer_atom, uint64_t /* its one child */) {
        if (!self->state.tracker) restart(self);
      },
      [=](run_atom) -> caf::result<messages::RunReport> {
        auto& s = self->state;
        s.run = self->make_response_promise();
        ask_run(self);
        return *s.run;
      },
      [=](stop_atom) {
        auto& s = self->state;
        // Nodes hold this handle (it is the tracker's address): only this process may stop.
        if (!from_this_process(self)) return rejected(self, "the step tracker", "stop");
        s.stopped = true;
        if (s.tracker) {
          self->send(s.tracker, stop_atom::value);
        } else if (s.run) {
          s.run->deliver(caf::make_error(caf::sec::runtime_error, "stopped"));
          s.run.reset();
        }
      },
      [=](faults_atom) { return self->state.restarts; },
      [=](start_state_atom, const messages::StateRequest& r) -> caf::result<messages::WorkerState> {
        auto& s = self->state;
        auto promise = self->make_response_promise();
        const uint64_t key = s.next_ask++;
        s.state_asks[key] = {promise, r};
        ask_state(self, key);
        return promise;
      },
      // The same from a worker of another process (transport/relay.hpp): asked of this
      // supervisor, so it survives a restart of the tracker as above, and sent in slices.
      [=](relay_atom, const caf::actor& to, uint64_t ms, start_state_atom a,
          const messages::StateRequest& r) {
        transport::relay<messages::WorkerState>(self, to, ms, a, r);
      },
  };
}

}  // namespace swarmrt::supervisors
