// The console's eyes (architecture §9): the probe every actor is spawned with, and the
// inspector driven through its console messages against a live run in one process — list,
// kill with restarts, a group's round, a worker's trace, events — with every micro-batch still
// counted once.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <future>
#include <nlohmann/json.hpp>
#include <thread>

#include "../run_util.hpp"
#include "actors/console/inspector.hpp"
#include "actors/console/internal.hpp"
#include "inspect/probe.hpp"
#include "messages/console_commands.hpp"
#include "model/run_dir.hpp"

using namespace swarmrt;
using json = nlohmann::json;
using swarmrt::testing::micro_run;
namespace fs = std::filesystem;

namespace {

struct blocker_state {
  static inline const char* name = "blocker";
};

// Says it `entered` and waits on `gate` while handling an atom: the messages sent meanwhile wait
// in its mailbox.
caf::behavior blocker(caf::stateful_actor<blocker_state>*, std::shared_future<void> gate,
                      std::shared_ptr<std::promise<void>> entered) {
  return {
      [=](caf::atom_value) {
        entered->set_value();
        gate.wait();
      },
      [=](int) { inspect::annotate("an int"); },
  };
}

// The inspector of an in-process run, as the coordinator spawns it.
caf::actor spawn_inspector(caf::actor_system& sys, const actors::CoreActors& core) {
  actors::InspectorSetup is;
  is.roster = core.roster;
  is.nodes = std::make_shared<actors::NodeBook>();
  is.metrics = core.sink;
  return inspect::spawn_probed(sys, actors::inspector, is);
}

}  // namespace

TEST(Probe, CountsWaitingAndHandledMessagesOfABusyActor) {
  caf::actor_system_config cfg;
  caf::actor_system sys{cfg};
  std::promise<void> open;
  auto entered = std::make_shared<std::promise<void>>();
  auto a = inspect::spawn_probed(sys, blocker, open.get_future().share(), entered);
  auto* probe = inspect::probe_of(a);
  ASSERT_NE(probe, nullptr);
  caf::anon_send(a, caf::atom("hold"));
  // The actor is stuck in its first message; what comes now waits.
  entered->get_future().wait();
  for (int i = 0; i < 5; ++i) caf::anon_send(a, i);
  EXPECT_GE(probe->waiting(), 5u);
  EXPECT_EQ(probe->handled(), 0u);
  probe->start_trace(100, inspect::ActorProbe::Clock::now() + std::chrono::seconds(30));
  open.set_value();
  for (int i = 0; i < 1000 && probe->handled() < 6; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  EXPECT_EQ(probe->handled(), 6u);
  EXPECT_EQ(probe->waiting(), 0u);
  const auto trace = probe->take_trace();
  // The five ints were taken while traced (the atom began before the trace).
  ASSERT_EQ(trace.size(), 5u);
  for (const auto& t : trace) {
    EXPECT_EQ(t.dir, "in");
    EXPECT_EQ(t.kind, "@i32");  // CAF's name of int32_t
    EXPECT_EQ(t.detail, "an int");
  }
  EXPECT_FALSE(probe->tracing());
  EXPECT_FALSE(inspect::any_traced());
  caf::anon_send_exit(a, caf::exit_reason::user_shutdown);
}

TEST(Probe, ATraceStopsItselfAtItsLimit) {
  caf::actor_system_config cfg;
  caf::actor_system sys{cfg};
  std::promise<void> open;
  open.set_value();
  auto a = inspect::spawn_probed(sys, blocker, open.get_future().share(),
                                 std::make_shared<std::promise<void>>());
  auto* probe = inspect::probe_of(a);
  probe->start_trace(3, inspect::ActorProbe::Clock::now() + std::chrono::seconds(30));
  for (int i = 0; i < 10; ++i) caf::anon_send(a, i);
  for (int i = 0; i < 1000 && probe->handled() < 10; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  EXPECT_FALSE(probe->tracing());  // full: it stopped by itself
  EXPECT_EQ(probe->take_trace().size(), 3u);
  caf::anon_send_exit(a, caf::exit_reason::user_shutdown);
}

namespace {

// What the console script below saw.
struct Seen {
  json shared_a, shared_b;
  json actors, confirm, killed, group, trace, restarted, events, unknown, healed, saved, self_cut;
  std::vector<json> workers;
  bool saved_file = false;
  std::vector<json> slowed;
  std::string error;
};

// What `swarmrt ctl` would send, from a blocking actor of the same process.
json ask_console(caf::blocking_actor* self, const caf::actor& inspector,
                 std::vector<std::string> args, bool yes = false) {
  json out;
  self->request(inspector, std::chrono::seconds(150), atoms::console_atom::value,
                messages::ConsoleRequest{std::move(args), "test console", yes})
      .receive([&](const std::string& s) { out = json::parse(s); },
               [&](const caf::error& e) {
                 out = {{"ok", false}, {"error", to_string(e)}};
               });
  return out;
}

// Polls `done` every 100 ms for at most 60 s.
template <class Done>
bool wait_for(caf::blocking_actor* self, Done&& done) {
  for (int i = 0; i < 600; ++i) {
    if (done()) return true;
    self->receive(caf::after(std::chrono::milliseconds(100)) >> [] {});
  }
  return false;
}

// A console in the same process: a detached blocking actor (the system waits for it) that
// sends the inspector what `swarmrt ctl` would, then stops the inspector.
void console_script(caf::blocking_actor* self, caf::actor inspector, std::shared_ptr<Seen> seen) {
  auto ask = [&](std::vector<std::string> args, bool yes = false) {
    return ask_console(self, inspector, std::move(args), yes);
  };
  auto wait_for = [&](auto&& done) { return ::wait_for(self, done); };
  if (!wait_for([&] {
        auto s = ask({"stats"});
        return s.value("ok", false) && !s["last_step"].is_null() && s["last_step"]["step"] >= 3;
      }))
    seen->error = "the run never reached step 3";
  // Slowed down, the run outlasts this script by far: every command below sees it alive.
  for (const auto* w : {"stage0/worker0", "stage0/worker1", "stage1/worker0", "stage1/worker1"})
    seen->slowed.push_back(ask({"slow", w, "10"}));
  seen->actors = ask({"actors", "--kind", "worker"});
  {
    // Two consoles asking at once: the second question arrives while the first is being
    // gathered (the inspector's own part queues behind it), so both get the same list,
    // message counts and all, from one gathering.
    auto ask_later = [&](std::vector<std::string> args) {
      return self->request(inspector, std::chrono::seconds(150), atoms::console_atom::value,
                           messages::ConsoleRequest{std::move(args), "test console", false});
    };
    // The list the `actors` above gathered is shared for 500 ms: past that, the first of the
    // two starts a gathering and the second joins it.
    self->receive(caf::after(std::chrono::milliseconds(600)) >> [] {});
    auto a = ask_later({"actors"});
    auto b = ask_later({"actors", "stage0/*"});
    auto keep = [](json& to) { return [&to](const std::string& s) { to = json::parse(s); }; };
    auto lost = [](const caf::error&) {};
    a.receive(keep(seen->shared_a), lost);
    b.receive(keep(seen->shared_b), lost);
  }
  seen->unknown = ask({"launch-missiles"});
  // Before the kill: a worker restarted during a step joins the membership (and so the
  // checkpoints) at the next step.
  seen->saved = ask({"checkpoint"});
  seen->saved_file =
      seen->saved.value("ok", false) && fs::exists(seen->saved["path"].get<std::string>());
  seen->confirm = ask({"kill", "stage1/worker*"});
  seen->killed = ask({"kill", "stage1/worker*"}, true);
  seen->group = ask({"info", "stage0/diloco"});
  wait_for([&] {
    seen->restarted = ask({"actors", "stage1/*", "--kind", "worker"});
    size_t back = 0;
    for (const auto& r : seen->restarted["actors"]) back += r["restarts"] == 1 ? 1 : 0;
    return back == 2;
  });
  for (const auto* w : {"stage0/worker0", "stage0/worker1", "stage1/worker0", "stage1/worker1"})
    seen->workers.push_back(ask({"info", w}));
  seen->self_cut = ask({"partition", "coordinator", "coordinator"});
  seen->events = ask({"events"});
  // A slowed worker under a loaded machine may handle nothing in one short trace: traces are
  // taken until one shows a forward hop in and a backward hop out (at most 20).
  for (int i = 0; i < 20; ++i) {
    seen->trace = ask({"trace", "stage1/worker0", "1"});
    bool forward = false, backward = false;
    for (const auto& e : seen->trace.value("trace", json::array())) {
      forward = forward || e["detail"].get<std::string>().rfind("forward", 0) == 0;
      backward = backward || e["dir"] == "out";
    }
    if (forward && backward) break;
  }
  seen->healed = ask({"heal", "all"});
  self->send_exit(inspector, caf::exit_reason::user_shutdown);
}

}  // namespace

// Test of the console issue against a live run in one process.
TEST(Inspector, ListsKillsRestartsTracesAndRecordsALiveRun) {
  auto config = micro_run("diloco-swarm", 2, 2, 300);
  config.diloco.inner_steps = 5;
  const auto dir = fs::temp_directory_path() / ("swarmrt-inspector-" + std::to_string(getpid()));
  fs::remove_all(dir);
  model::RunDir rd(dir.string(), config, model::RunStart::fresh);
  auto seen = std::make_shared<Seen>();
  actors::RuntimeOptions o;
  o.run = &rd;
  o.on_core = [&](caf::actor_system& sys, const actors::CoreActors& core) {
    auto inspector = spawn_inspector(sys, core);
    sys.spawn<caf::detached>(console_script, inspector, seen);
  };
  const auto result = swarmrt::testing::run(config, o);
  fs::remove_all(dir);
  ASSERT_EQ(seen->error, "");

  // Every worker is listed with its name, kind, stage and mailbox.
  ASSERT_TRUE(seen->actors["ok"]) << seen->actors.dump();
  std::set<std::string> names;
  for (const auto& r : seen->actors["actors"]) {
    names.insert(r["name"].get<std::string>());
    EXPECT_EQ(r["kind"], "worker");
    EXPECT_TRUE(r.contains("mailbox") && r.contains("handled")) << r.dump();
    EXPECT_EQ(r["stage"], r["name"].get<std::string>()[5] - '0') << r.dump();
  }
  EXPECT_EQ(names, (std::set<std::string>{"stage0/worker0", "stage0/worker1", "stage1/worker0",
                                          "stage1/worker1"}));
  for (const auto& s : seen->slowed) EXPECT_TRUE(s["ok"]) << s.dump();
  EXPECT_EQ(seen->healed["healed"].size(), 4u) << seen->healed.dump();
  // The list asked twice at once was gathered once: stage 0's rows are the same to the last
  // message count in both answers (the workers handle messages all the while).
  ASSERT_TRUE(seen->shared_a["ok"] && seen->shared_b["ok"]) << seen->shared_a.dump();
  json stage0 = json::array();
  for (const auto& r : seen->shared_a["actors"])
    if (r["name"].get<std::string>().rfind("stage0/", 0) == 0) stage0.push_back(r);
  EXPECT_GE(stage0.size(), 3u);  // two workers, their group, ...
  EXPECT_EQ(stage0, seen->shared_b["actors"]);
  EXPECT_FALSE(seen->unknown["ok"]);
  EXPECT_TRUE(seen->unknown["usage"]);

  // A kill of more than one actor needs confirming; confirmed, both die and come back.
  EXPECT_TRUE(seen->confirm["confirm"]) << seen->confirm.dump();
  EXPECT_EQ(seen->confirm["matches"].size(), 2u);
  ASSERT_TRUE(seen->killed["ok"]) << seen->killed.dump();
  EXPECT_EQ(seen->killed["killed"].size(), 2u);
  ASSERT_EQ(seen->restarted["actors"].size(), 2u) << seen->restarted.dump();
  for (const auto& r : seen->restarted["actors"]) EXPECT_EQ(r["restarts"], 1) << r.dump();

  // The group reports its round.
  ASSERT_TRUE(seen->group["ok"]) << seen->group.dump();
  EXPECT_TRUE(seen->group["actor"]["info"].contains("round")) << seen->group.dump();

  // The trace of a stage-1 worker shows forward and backward hops.
  ASSERT_TRUE(seen->trace["ok"]) << seen->trace.dump();
  bool forward = false, backward = false;
  for (const auto& t : seen->trace["trace"]) {
    const auto d = t["detail"].get<std::string>();
    forward = forward || d.rfind("forward", 0) == 0;
    backward = backward || t["dir"] == "out";  // its input gradient goes back to stage 0
  }
  EXPECT_TRUE(forward) << seen->trace.dump();
  EXPECT_TRUE(backward) << seen->trace.dump();

  // Each worker's info: its own compute rate (null until it has done a micro-batch) and the
  // bytes it sent, by kind; the workers of stage 0 sent activations between them.
  double rate = 0;
  uint64_t activations = 0;
  for (const auto& w : seen->workers) {
    ASSERT_TRUE(w["ok"]) << w.dump();
    const auto& info = w["actor"]["info"];
    ASSERT_TRUE(info.contains("samples_per_s") && info.contains("bytes_sent")) << info.dump();
    if (info["samples_per_s"].is_number()) rate += info["samples_per_s"].get<double>();
    if (info["stage"] == 0) activations += info["bytes_sent"]["activations"].get<uint64_t>();
  }
  EXPECT_GT(rate, 0);
  EXPECT_GT(activations, 0u);

  // A checkpoint on demand: written once the open step closed, its file there.
  ASSERT_TRUE(seen->saved["ok"]) << seen->saved.dump();
  EXPECT_GE(seen->saved["step"].get<uint64_t>(), 3u) << seen->saved.dump();
  EXPECT_EQ(seen->saved["workers"], 4) << seen->saved.dump();
  EXPECT_TRUE(seen->saved_file) << seen->saved.dump();

  // One process cannot be partitioned from itself.
  EXPECT_FALSE(seen->self_cut["ok"]) << seen->self_cut.dump();
  EXPECT_NE(seen->self_cut["error"].get<std::string>().find("two different processes"),
            std::string::npos)
      << seen->self_cut.dump();

  // The kill is an event with the console's name.
  bool recorded = false;
  for (const auto& e : seen->events["events"])
    recorded = recorded || (e["event"] == "console" && e["console"] == "test console" &&
                            e["command"] == "kill stage1/worker*");
  EXPECT_TRUE(recorded) << seen->events.dump();
  bool saved = false;
  for (const auto& e : seen->events["events"])
    saved = saved || (e["event"] == "console" && e["command"] == "checkpoint");
  EXPECT_TRUE(saved) << seen->events.dump();

  // The run completed with every micro-batch counted once.
  ASSERT_EQ(result.report.losses.size(), 300u);
  for (size_t i = 0; i < result.report.completed.size(); ++i) {
    EXPECT_EQ(result.report.completed[i], config.train.micro_batches) << "step " << i + 1;
    EXPECT_EQ(result.report.duplicates[i], 0) << "step " << i + 1;
    EXPECT_EQ(result.report.missing_samples[i], 0) << "step " << i + 1;
    EXPECT_EQ(result.report.extra_samples[i], 0) << "step " << i + 1;
  }
}

namespace {

struct Rejoined {
  json killed, tracker, workers;
  bool restarted = false, rejoined = false;
  std::string error;
};

// The tracker's members, by address, against the live workers the roster lists.
bool members_are_the_live_workers(const json& tracker, const json& workers) {
  std::set<std::string> members, live;
  for (const auto& m : tracker["actor"]["info"]["members"]) members.insert(m["addr"]);
  for (const auto& w : workers["actors"]) live.insert(w["addr"]);
  return !live.empty() && members == live;
}

void rejoin_script(caf::blocking_actor* self, caf::actor inspector, caf::actor tracker,
                   std::shared_ptr<Rejoined> seen) {
  auto ask = [&](std::vector<std::string> args, bool yes = false) {
    return ask_console(self, inspector, std::move(args), yes);
  };
  if (!wait_for(self, [&] {
        seen->tracker = ask({"info", "tracker"});
        return seen->tracker.value("ok", false) && seen->tracker["actor"]["info"]["step"] >= 3;
      }))
    seen->error = "the run never reached step 3: " + seen->tracker.dump();
  for (const auto* w : {"stage0/worker0", "stage1/worker0"}) ask({"slow", w, "20"});
  seen->killed = ask({"kill", "stage*/worker0"}, true);
  seen->restarted = wait_for(self, [&] {
    seen->workers = ask({"actors", "--kind", "worker"});
    size_t back = 0;
    for (const auto& r : seen->workers["actors"]) back += r["restarts"] == 1 ? 1 : 0;
    return back == 2;
  });
  seen->rejoined = wait_for(self, [&] {
    seen->tracker = ask({"info", "tracker"});
    seen->workers = ask({"actors", "--kind", "worker"});
    return members_are_the_live_workers(seen->tracker, seen->workers) &&
           !seen->tracker["actor"]["info"]["paused"].get<bool>();
  });
  ask({"heal", "all"});
  // A swarm that lost a worker for good never finishes: stop it, so the test reports it.
  if (!seen->rejoined) self->send(tracker, atoms::stop_atom::value);
  self->send_exit(inspector, caf::exit_reason::user_shutdown);
}

}  // namespace

// Both workers of a one-worker-per-stage pipeline killed at once: their supervisors restart
// them, the tracker takes both new workers into its membership and the run completes. (Before
// the restart handler composed with a restart not yet adopted, the later of two restarts could
// drop the earlier worker: its stage stayed empty, the pipeline paused for good, 1 run in 20.)
TEST(Inspector, BothWorkersOfAOneWorkerPipelineKilledAtOnceRejoinTheMembership) {
  auto config = micro_run("diloco-swarm", 2, 1, 400);
  config.diloco.inner_steps = 5;
  auto seen = std::make_shared<Rejoined>();
  actors::RuntimeOptions o;
  o.on_core = [&](caf::actor_system& sys, const actors::CoreActors& core) {
    auto inspector = spawn_inspector(sys, core);
    sys.spawn<caf::detached>(rejoin_script, inspector, core.tracker, seen);
  };
  actors::RuntimeResult result;
  std::string failed;  // a stopped run throws: what the console saw is reported first
  try {
    result = swarmrt::testing::run(config, o);
  } catch (const std::exception& e) {
    failed = e.what();
  }
  ASSERT_EQ(seen->error, "");
  ASSERT_TRUE(seen->killed["ok"]) << seen->killed.dump();
  EXPECT_EQ(seen->killed["killed"].size(), 2u) << seen->killed.dump();
  EXPECT_TRUE(seen->restarted) << seen->workers.dump();
  EXPECT_TRUE(seen->rejoined) << "tracker: " << seen->tracker.dump()
                              << "\nworkers: " << seen->workers.dump();
  ASSERT_EQ(failed, "");
  ASSERT_EQ(result.report.losses.size(), 400u);
  for (size_t i = 0; i < result.report.completed.size(); ++i) {
    EXPECT_EQ(result.report.duplicates[i], 0) << "step " << i + 1;
    EXPECT_EQ(result.report.missing_samples[i], 0) << "step " << i + 1;
  }
}

// One table of console commands (messages/console_commands.hpp): the coordinator has a handler
// for every command it is sent, and none for the console's own loops.
TEST(ConsoleTable, EveryCommandTheCoordinatorRunsHasAHandlerAndOnlyThose) {
  for (const auto& c : messages::console_commands())
    EXPECT_EQ(actors::console::runs_console_command(c.name), !c.ctl_only) << c.name;
  EXPECT_FALSE(actors::console::runs_console_command("frobnicate"));
  // Every command that changes the swarm is one the coordinator runs (it records them).
  for (const auto& c : messages::console_commands()) {
    if (c.destructive) {
      EXPECT_FALSE(c.ctl_only) << c.name;
    }
  }
}
