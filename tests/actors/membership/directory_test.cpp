// The membership directory message by message on CAF's deterministic test scheduler: puppet
// node agents join, are refused, leave (they die) and join again, and a puppet tracker keeps
// every membership the directory announces, so each change is seen in order.
#include <gtest/gtest.h>

#include "../deterministic.hpp"

#include "actors/membership/directory.hpp"
#include "actors/runtime/runtime.hpp"
#include "config/fingerprint.hpp"

using namespace swarmrt;
using namespace swarmrt::atoms;

namespace {

using Memberships = std::shared_ptr<std::vector<messages::Membership>>;

caf::behavior tracker_puppet(caf::event_based_actor*, Memberships seen) {
  return {[seen](members_atom, const messages::Membership& m) { seen->push_back(m); }};
}

// What a puppet node agent got: the directory's reply, or why it was refused.
struct Outcome {
  std::optional<messages::JoinReply> reply;
  std::string refusal;
};

// A node agent reduced to its protocol: it asks to join and, once admitted, reports its
// workers up (each worker's handle is the agent's own: the directory only passes them on).
caf::behavior agent_puppet(caf::event_based_actor* self, caf::actor dir,
                           messages::JoinRequest request, std::shared_ptr<Outcome> out) {
  self->request(dir, caf::infinite, join_atom::value, request)
      .then(
          [=](const messages::JoinReply& r) {
            out->reply = r;
            std::vector<messages::Member> workers;
            for (size_t i = 0; i < r.worker_ids.size(); ++i)
              workers.push_back(
                  {r.worker_ids[i], r.stages[i], caf::actor_cast<caf::actor>(self), "", "cpu"});
            self->send(dir, workers_atom::value, request.node_name, r.node_index, workers);
          },
          [=](const caf::error& e) { out->refusal = self->system().render(e); });
  return {[](int) {}};
}

struct DirectoryFixture : ::testing::Test, swarmrt::testing::DeterministicSystem {
  std::shared_ptr<actors::SwarmContext> ctx = std::make_shared<actors::SwarmContext>();
  Memberships seen = std::make_shared<std::vector<messages::Membership>>();
  caf::actor dir, tracker;

  void SetUp() override {
    ctx->config = config::parse_config(
        "[model]\npreset = \"tiny\"\n[data]\npath = \"unused\"\n"
        "[swarm]\nmode = \"pp\"\nstages = 2\nworkers_per_stage = 1\n"
        "[balancer]\nenabled = false\n",
        "directory_test");
    ctx->run_id = 42;
    tracker = sys->spawn(tracker_puppet, seen);
    actors::DirectorySetup ds;
    ds.ctx = ctx;
    ds.config_toml = config::to_toml(ctx->config);
    ds.fingerprint_text = config::fingerprint_text(ctx->config);
    ds.secret = "the cluster's secret";
    ds.tracker = tracker;
    dir = sys->spawn(actors::directory, ds);
    sched->run();
  }

  messages::JoinRequest request(const std::string& name, uint32_t workers) const {
    messages::JoinRequest r;
    r.protocol = config::kProtocolVersion;
    r.secret = "the cluster's secret";
    r.node_name = name;
    r.workers = workers;
    r.device = "cpu";
    return r;
  }

  std::pair<caf::actor, std::shared_ptr<Outcome>> join(const messages::JoinRequest& r) {
    auto out = std::make_shared<Outcome>();
    auto agent = sys->spawn(agent_puppet, dir, r, out);
    sched->run();
    return {agent, out};
  }

  size_t workers_in(const messages::Membership& m) const {
    size_t n = 0;
    for (const auto& st : m.stages) n += st.size();
    return n;
  }

  void TearDown() override {
    caf::anon_send_exit(dir, caf::exit_reason::kill);
    caf::anon_send_exit(tracker, caf::exit_reason::kill);
    sched->run();
  }
};

}  // namespace

TEST_F(DirectoryFixture, AJoinedNodesWorkersFillTheStagesEvenlyAndReachTheTracker) {
  auto [agent, out] = join(request("a", 2));
  ASSERT_TRUE(out->reply) << out->refusal;
  EXPECT_EQ(out->reply->worker_ids, (std::vector<uint32_t>{0, 1000}));
  EXPECT_EQ(out->reply->stages, (std::vector<uint32_t>{0, 1}));
  EXPECT_EQ(out->reply->run_id, 42u);
  ASSERT_FALSE(seen->empty());
  EXPECT_EQ(workers_in(seen->back()), 2u);
  caf::anon_send_exit(agent, caf::exit_reason::kill);
  sched->run();
}

TEST_F(DirectoryFixture, RefusalsNameWhatDiffersAndAdmitNothing) {
  auto wrong_secret = request("b", 1);
  wrong_secret.secret = "a guess";
  auto other_run = request("c", 1);
  other_run.run_id = 7;
  auto other_config = request("d", 1);
  auto changed = ctx->config;
  changed.model.n_layer += 2;
  other_config.fingerprint = config::fingerprint_text(changed);
  auto old_protocol = request("e", 1);
  old_protocol.protocol = config::kProtocolVersion + 1;
  for (const auto& [r, why] : std::vector<std::pair<messages::JoinRequest, std::string>>{
           {wrong_secret, "wrong secret"},
           {other_run, "this node was started for run"},
           {other_config, "model.n_layer"},
           {old_protocol, "protocol version"}}) {
    auto [agent, out] = join(r);
    EXPECT_FALSE(out->reply) << r.node_name;
    EXPECT_NE(out->refusal.find(why), std::string::npos) << out->refusal;
    caf::anon_send_exit(agent, caf::exit_reason::kill);
    sched->run();
  }
  EXPECT_TRUE(seen->empty()) << "a refused node changed the membership";
}

TEST_F(DirectoryFixture, ANodeThatLeavesTakesItsWorkersOutAndANewOneTakesTheirStages) {
  auto [a, out_a] = join(request("a", 1));
  auto [b, out_b] = join(request("b", 1));
  ASSERT_TRUE(out_a->reply && out_b->reply);
  EXPECT_EQ(out_a->reply->stages, (std::vector<uint32_t>{0}));
  EXPECT_EQ(out_b->reply->stages, (std::vector<uint32_t>{1}));
  const auto version_full = seen->back().version;
  EXPECT_EQ(workers_in(seen->back()), 2u);
  // Node b dies: its worker leaves, in a membership of its own.
  caf::anon_send_exit(b, caf::exit_reason::kill);
  sched->run();
  EXPECT_GT(seen->back().version, version_full);
  EXPECT_EQ(workers_in(seen->back()), 1u);
  EXPECT_TRUE(seen->back().stages[1].empty());
  // A node joining now takes the emptied stage, with a worker id of its own.
  auto [c, out_c] = join(request("c", 1));
  ASSERT_TRUE(out_c->reply) << out_c->refusal;
  EXPECT_EQ(out_c->reply->stages, (std::vector<uint32_t>{1}));
  EXPECT_EQ(out_c->reply->worker_ids, (std::vector<uint32_t>{1001}));
  EXPECT_EQ(workers_in(seen->back()), 2u);
  for (const auto& agent : {a, c}) caf::anon_send_exit(agent, caf::exit_reason::kill);
  sched->run();
}
