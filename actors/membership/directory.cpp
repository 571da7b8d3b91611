#include "actors/membership/directory.hpp"

#include "messages/device.hpp"
#include "messages/run_id.hpp"

#include <spdlog/spdlog.h>

#include <cstdio>

#include "config/fingerprint.hpp"
#include "credential/credential.hpp"
#include "messages/metrics.hpp"
#include "policy/balancer.hpp"
#include "supervisors/entitled.hpp"
#include "supervisors/roster.hpp"

namespace swarmrt::actors {
using namespace swarmrt::atoms;
using Self = caf::stateful_actor<directory_state>;

size_t expected_workers(const config::RunConfig& config) {
  return static_cast<size_t>(config.swarm.stages * config.swarm.workers_per_stage);
}

namespace {

size_t joined_workers(const directory_state& s) {
  size_t n = 0;
  for (const auto& stage : s.membership.stages) n += stage.size();
  return n;
}

caf::error refuse(Self* self, const messages::JoinRequest& r, const std::string& why) {
  ++self->state.refused;
  spdlog::warn("refused node '{}': {}", r.node_name, why);
  return caf::make_error(caf::sec::invalid_argument, why);
}

// Why `r` may not join, or empty.
std::string check_join(const directory_state& s, const messages::JoinRequest& r) {
  if (r.protocol != config::kProtocolVersion)
    return "protocol version " + std::to_string(r.protocol) + ", the coordinator speaks " +
           std::to_string(config::kProtocolVersion);
  // TLS already proved the node holds the cluster secret; the join checks it once more
  // (defence in depth), in constant time.
  if (!s.setup.secret.empty() && !credential::equal_secrets(r.secret, s.setup.secret))
    return r.secret.empty() ? "this swarm requires a secret (--secret-file or SWARMRT_SECRET)"
                            : "wrong secret";
  // A node started for one run (launch passes --run-id) never joins another that took over
  // the address, e.g. after a restart.
  if (r.run_id != 0 && r.run_id != s.setup.ctx->run_id)
    return "this node was started for run " + messages::run_id_text(r.run_id) +
           ", this coordinator runs " + messages::run_id_text(s.setup.ctx->run_id);
  if (!r.fingerprint.empty()) {
    auto diff = config::fingerprint_mismatch(s.setup.fingerprint_text, r.fingerprint);
    if (!diff.empty()) {
      std::string why = "config differs from the coordinator's:";
      for (auto line : diff) {
        if (auto at = line.find(" here, "); at != std::string::npos)
          line.replace(at, 7, " on the coordinator, ");
        if (line.size() >= 6 && line.compare(line.size() - 6, 6, " there") == 0)
          line.replace(line.size() - 6, 6, " on the joining node");
        why += " " + line + ";";
      }
      why.pop_back();
      return why;
    }
  }
  if (auto ban = s.banned_nodes.find(r.node_name); ban != s.banned_nodes.end())
    return "node '" + r.node_name + "' is banned from this run: " + ban->second;
  if (r.workers == 0 || r.workers > 1000) return "a node brings 1 to 1000 workers";
  if (auto why = messages::device_name_problem(r.device); !why.empty()) return why;
  return {};
}

void maybe_ready(Self* self) {
  auto& s = self->state;
  if (joined_workers(s) < expected_workers(s.setup.ctx->config)) return;
  s.full = true;
  for (auto& p : s.ready) p.deliver(caf::unit);
  s.ready.clear();
}

// Once every node of a world that launch --from-env started has joined and the swarm is still
// short, nothing more will come: says how many workers the config wants, how many the nodes
// brought, and which setting fills the swarm (once).
void explain_short_world(Self* self) {
  auto& s = self->state;
  const auto& cfg = s.setup.ctx->config;
  const uint32_t world = s.setup.world_nodes;
  if (world == 0 || s.full || s.short_world_said) return;
  size_t nodes = 0;
  for (const auto& [agent, node] : s.nodes) nodes += node.workers.empty() ? 0 : 1;
  const size_t joined = joined_workers(s), wanted = expected_workers(cfg);
  if (nodes < world || joined >= wanted) return;
  s.short_world_said = true;
  const size_t per_node = (wanted + world - 1) / world;
  std::string fill = fmt::format("give each node {} worker(s) (launch --from-env --workers {})",
                                 per_node, per_node);
  const auto stages = static_cast<size_t>(cfg.swarm.stages);
  if (joined / stages >= 1)
    fill += fmt::format(", or train with what came: swarm.workers_per_stage = {}", joined / stages);
  const auto why = fmt::format(
      "every one of the world's {} node(s) has joined and they brought {} worker(s), but the "
      "config wants {} (swarm.stages = {} x swarm.workers_per_stage = {}): the swarm will not "
      "fill; {}",
      world, joined, wanted, stages, cfg.swarm.workers_per_stage, fill);
  spdlog::error("{}", why);
  messages::send_metrics(self, s.setup.sink,
                         {{"event", "short_world"},
                          {"world_nodes", world},
                          {"workers", joined},
                          {"wanted", wanted},
                          {"why", why}});
}

// Admits a node's workers on `stages` (one per worker): ids, the reply, the node book.
messages::JoinReply admit(Self* self, const messages::JoinRequest& r,
                          const std::vector<uint32_t>& stages, const std::string& how) {
  auto& s = self->state;
  messages::JoinReply reply;
  reply.config_toml = s.setup.config_toml;
  reply.run_id = s.setup.ctx->run_id;
  reply.node_index = s.next_node++;
  for (uint32_t k : stages) {
    ++s.assigned[k];
    reply.stages.push_back(k);
    reply.worker_ids.push_back(worker_id(static_cast<int64_t>(k), s.next_replica[k]++));
  }
  reply.tracker = s.setup.tracker;
  reply.averagers = s.setup.averagers;
  reply.groups = s.setup.groups;
  reply.endpoint = s.setup.endpoint;
  if (s.setup.replicas) reply.replicas = s.setup.replicas();
  std::string ids;
  for (size_t i = 0; i < reply.worker_ids.size(); ++i)
    ids += fmt::format("{}{} (stage {})", i ? ", " : "", reply.worker_ids[i], reply.stages[i]);
  spdlog::info("node '{}' joined as node {} ({}): workers {}{}", r.node_name, reply.node_index,
               r.device, ids, how);
  s.setup.nodes->put({r.node_name, reply.node_index, r.inspector, reply.worker_ids, true});
  return reply;
}

// Stages for n workers, each to the stage with the fewest workers (ties: the lowest stage).
std::vector<uint32_t> fewest_first(const directory_state& s, uint32_t n) {
  auto assigned = s.assigned;
  std::vector<uint32_t> stages;
  for (uint32_t i = 0; i < n; ++i) {
    size_t k = 0;
    for (size_t j = 1; j < assigned.size(); ++j)
      if (assigned[j] < assigned[k]) k = j;
    ++assigned[k];
    stages.push_back(static_cast<uint32_t>(k));
  }
  return stages;
}

// Takes worker `id` out of the membership; its stage's slot is free for a newcomer.
void remove_member(directory_state& s, uint32_t id) {
  for (size_t k = 0; k < s.membership.stages.size(); ++k) {
    auto& st = s.membership.stages[k];
    const auto before = st.size();
    st.erase(
        std::remove_if(st.begin(), st.end(), [&](const messages::Member& w) { return w.id == id; }),
        st.end());
    if (st.size() != before && s.assigned[k] > 0) --s.assigned[k];
  }
}

}  // namespace

namespace {

// The directory's state, and the down handler that takes a node that went away out.
void set_up_directory(Self* self, DirectorySetup setup) {
  auto& s = self->state;
  s.setup = std::move(setup);
  const auto stages = static_cast<size_t>(s.setup.ctx->config.swarm.stages);
  s.membership.stages.resize(stages);
  s.assigned.assign(stages, 0);
  s.next_replica.assign(stages, 0);
  s.rng.seed(static_cast<uint64_t>(s.setup.ctx->config.chaos.seed));
  // Its handle is every node's: a stray exit signal from one of them must not end the swarm.
  supervisors::quit_only_from_this_process(self, "the directory");
  self->set_down_handler([=](const caf::down_msg& down) {
    auto& s = self->state;
    auto it = s.nodes.find(down.source);
    if (it == s.nodes.end()) return;
    // After the directory told every node to stop, a node's connection closing is the stop
    // it was asked for, not a fault.
    if (down.reason && !s.stopped)
      spdlog::warn("node '{}' (node {}) is gone: {}", it->second.name, it->second.index,
                   self->system().render(down.reason));
    else
      spdlog::info("node '{}' (node {}) stopped{}", it->second.name, it->second.index,
                   s.stopped ? ", as the coordinator asked" : "");
    // Its workers leave the membership (the tracker has removed them already, through its
    // own monitors); their stages may take a new node's workers.
    for (auto id : it->second.workers) remove_member(s, id);
    s.setup.nodes->lost(it->second.index);
    s.nodes.erase(it);
    ++s.membership.version;
    self->send(s.setup.tracker, members_atom::value, s.membership);
  });
}

// Answers an admitted join with its workers' stages: where the balancer places them in a
// running swarm (when there is one), else evenly (the stage with the fewest workers first).
void place(Self* self, const messages::JoinRequest& r, caf::response_promise promise) {
  auto& s = self->state;
  caf::actor balancer;
  if (s.full && s.setup.ctx->config.balancer.enabled && s.setup.roster)
    if (auto b = s.setup.roster->find("balancer")) balancer = *b;
  if (!balancer) {
    promise.deliver(admit(self, r, fewest_first(s, r.workers), ""));
    return;
  }
  const auto timeout = config::as_duration(s.setup.ctx->config.supervision.query_timeout_s);
  self->request(balancer, timeout, place_atom::value, r.workers, s.membership)
      .then(
          [=](const std::vector<uint32_t>& stages) mutable {
            auto& s = self->state;
            const bool placed = stages.size() == r.workers;
            // A stage without a worker takes them first (the balancer places among the
            // workers that serve now, but its speeds are a period old).
            promise.deliver(admit(
                self, r,
                placed ? policy::fill_empty_stages(stages, s.assigned) : fewest_first(s, r.workers),
                placed ? " where the balancer placed them" : ""));
          },
          [=](const caf::error&) mutable {
            promise.deliver(admit(self, r, fewest_first(self->state, r.workers), ""));
          });
}

// Joins, workers up, restarts, and who asks for the membership or the swarm's fullness.
caf::message_handler membership_handlers(Self* self) {
  return {
      [=](join_atom, const messages::JoinRequest& r) -> caf::result<messages::JoinReply> {
        auto& s = self->state;
        if (s.stopped) return refuse(self, r, "the coordinator is stopping");
        if (self->current_sender() && s.banned_processes.count(self->current_sender()->node()))
          return refuse(self, r, "this process's node is banned from this run");
        if (auto why = check_join(s, r); !why.empty()) return refuse(self, r, why);
        if (const auto& sender = self->current_sender()) s.joined.insert(sender->node());
        // The states the node kept when its coordinator was lost (a takeover may continue
        // from them): the tracker hears of them before the node's workers join.
        if (r.keeper && !r.held_stages.empty() && r.held_stages.size() == r.held_steps.size() &&
            self->current_sender() && r.keeper.node() == self->current_sender()->node())
          self->send(s.setup.tracker, held_atom::value, r.keeper, r.held_stages, r.held_steps);
        auto promise = self->make_response_promise<messages::JoinReply>();
        // chaos.kill_at_phase = "join": this process may die here, with the join unanswered.
        const auto& chaos = s.setup.ctx->config.chaos;
        std::optional<caf::actor> control;
        if (s.full && !chaos.kill.empty() && chaos.kill_at_phase == config::KillPhase::join &&
            s.setup.roster)
          control = s.setup.roster->find("chaos");
        if (!control) {
          place(self, r, promise);
          return promise;
        }
        self->request(*control,
                      config::as_duration(s.setup.ctx->config.supervision.query_timeout_s),
                      join_atom::value)
            .then([=](bool) mutable { place(self, r, promise); },
                  [=](const caf::error&) mutable { place(self, r, promise); });
        return promise;
      },
      [=](replicas_atom) {
        auto& s = self->state;
        return s.setup.replicas ? s.setup.replicas() : std::vector<std::string>{};
      },
      [=](workers_atom, const std::string& node_name, uint32_t node_index,
          const std::vector<messages::Member>& workers) {
        auto& s = self->state;
        auto agent = caf::actor_cast<caf::actor>(self->current_sender());
        if (!agent) return;
        // Only the agent of a process that joined brings workers into the membership.
        if (!s.joined.count(agent.node()) && agent.node() != self->node())
          return supervisors::rejected(self, "the directory",
                                       "workers of a node that never joined");
        if (s.banned_processes.count(agent.node()))
          return supervisors::rejected(self, "the directory", "workers of a banned node");
        auto& node = s.nodes[agent.address()];
        if (node.workers.empty()) self->monitor(agent);
        node.name = node_name;
        node.index = node_index;
        for (const auto& w : workers) {
          if (w.stage >= s.membership.stages.size()) continue;
          node.workers.push_back(w.id);
          s.membership.stages[w.stage].push_back(w);
        }
        ++s.membership.version;
        self->send(s.setup.tracker, members_atom::value, s.membership);
        spdlog::info("swarm has {}/{} workers (membership version {})", joined_workers(s),
                     expected_workers(s.setup.ctx->config), s.membership.version);
        maybe_ready(self);
        explain_short_world(self);
      },
      // A node's stage supervisor restarted one of its workers: same id, new handle.
      [=](restarted_atom, const messages::Member& w) {
        auto& s = self->state;
        if (!w.handle) return;  // its node is gone already
        if (s.banned_workers.count(w.id)) {
          spdlog::warn("ignored a restart of worker {}: it is banned", w.id);
          return;
        }
        for (const auto& [addr, node] : s.nodes) {
          if (addr.node() != w.handle.node() ||
              std::find(node.workers.begin(), node.workers.end(), w.id) == node.workers.end())
            continue;
          // A worker already in the membership came back under its id: a restart. A new id
          // is a balancer's move, which the balancer records itself.
          bool known = false;
          for (auto& st : s.membership.stages) {
            const auto before = st.size();
            st.erase(std::remove_if(st.begin(), st.end(),
                                    [&](const messages::Member& x) { return x.id == w.id; }),
                     st.end());
            known = known || st.size() != before;
          }
          if (w.stage < s.membership.stages.size()) s.membership.stages[w.stage].push_back(w);
          ++s.membership.version;
          self->send(s.setup.tracker, members_atom::value, s.membership);
          spdlog::info("node '{}' restarted worker {} (membership version {})", node.name, w.id,
                       s.membership.version);
          // The node's supervisor has no metrics sink of its own (the run's is here), so the
          // restart is recorded where an in-process supervisor records it.
          if (known)
            messages::send_metrics(
                self, s.setup.sink,
                {{"event", "recovered"},
                 {"kind", "restart"},
                 {"actor", supervisors::worker_name(w.id) + "@node" + std::to_string(node.index)},
                 {"node", node.name}});
          return;
        }
        spdlog::warn("ignored a restart of worker {} from a node that does not own it", w.id);
      },
      [=](ready_atom) -> caf::result<void> {
        auto& s = self->state;
        if (s.stopped) return caf::make_error(caf::sec::request_receiver_down, "stopped");
        auto p = self->make_response_promise();
        s.ready.push_back(p);
        maybe_ready(self);
        return p;
      },
      [=](ask_members_atom) { return self->state.membership; },
      // A console (any holder of the cluster credential) asks where to send its commands.
      [=](inspector_atom) { return self->state.setup.inspector; },
  };
}

// A worker a spot check found wrong (actors/tracker/verify.cpp): it and its node are refused
// for the rest of the run, and a node in another process is told to stop (the coordinator's
// own process stays: it runs the swarm).
void ban_worker(Self* self, uint32_t worker, const std::string& why) {
  auto& s = self->state;
  s.banned_workers[worker] = why;
  remove_member(s, worker);
  auto owner = std::find_if(s.nodes.begin(), s.nodes.end(), [&](const auto& entry) {
    const auto& w = entry.second.workers;
    return std::find(w.begin(), w.end(), worker) != w.end();
  });
  if (owner == s.nodes.end() || owner->first.node() == self->node()) {
    spdlog::warn("worker {} banned: {}", worker,
                 owner == s.nodes.end() ? "no node of this run holds it"
                                        : "its node is this process, which stays");
    return;
  }
  const auto name = owner->second.name;
  s.banned_nodes[name] = "worker " + std::to_string(worker) + " failed " + why;
  s.banned_processes.insert(owner->first.node());
  spdlog::error("node '{}' banned for the rest of the run: its worker {} failed {}", name, worker,
                why);
  if (auto agent = caf::actor_cast<caf::actor>(owner->first)) self->send(agent, stop_atom::value);
}

// What the coordinator's own actors ask of the nodes: a chaos kill, a balancer's move, stop.
caf::message_handler command_handlers(Self* self) {
  return {
      // Fault injection: a node kill or a kill of an actor the coordinator does not host goes
      // to a node drawn at random.
      [=](kill_atom, const std::string& target) {
        auto& s = self->state;
        // Fault injection comes from this process's chaos control, never from a peer.
        if (!supervisors::from_this_process(self))
          return supervisors::rejected(self, "the directory", "kill " + target);
        if (s.nodes.empty()) return;
        auto it = s.nodes.begin();
        std::advance(it, static_cast<long>(s.rng() % s.nodes.size()));
        spdlog::warn("chaos: '{}' goes to node '{}'", target, it->second.name);
        if (auto agent = caf::actor_cast<caf::actor>(it->first))
          self->send(agent, kill_atom::value, target);
      },
      // The balancer's move of a worker on a node: the directory picks the new id (joins
      // take ids from the same counter), owns it to the node at once (the node announces the
      // new worker as a restart, which may come before this answer) and asks the node.
      [=](move_atom, uint32_t old_id, uint32_t stage, uint32_t) -> caf::result<int64_t> {
        auto& s = self->state;
        if (!supervisors::from_this_process(self)) {
          supervisors::rejected(self, "the directory", "move");
          return int64_t{-1};
        }
        if (stage >= s.membership.stages.size()) return int64_t{-1};
        auto owner = std::find_if(s.nodes.begin(), s.nodes.end(), [&](const auto& entry) {
          const auto& w = entry.second.workers;
          return std::find(w.begin(), w.end(), old_id) != w.end();
        });
        if (owner == s.nodes.end()) return int64_t{-1};
        auto agent = caf::actor_cast<caf::actor>(owner->first);
        if (!agent) return int64_t{-1};
        const uint32_t new_id = worker_id(stage, s.next_replica[stage]++);
        owner->second.workers.push_back(new_id);
        const auto addr = owner->first;
        auto promise = self->make_response_promise<int64_t>();
        const auto timeout = config::as_duration(s.setup.ctx->config.supervision.reply_timeout_s);
        self->request(agent, timeout, move_atom::value, old_id, stage, new_id)
            .then(
                [=](int64_t id) mutable {
                  auto& s = self->state;
                  auto it = s.nodes.find(addr);
                  if (it != s.nodes.end()) {
                    auto& w = it->second.workers;
                    // Moved: the old id is no longer the node's; not moved: the new one is not.
                    const uint32_t gone = id >= 0 ? old_id : new_id;
                    w.erase(std::remove(w.begin(), w.end(), gone), w.end());
                  }
                  if (id >= 0) {
                    remove_member(s, old_id);
                    ++s.assigned[stage];
                    ++s.membership.version;
                    self->send(s.setup.tracker, members_atom::value, s.membership);
                  }
                  promise.deliver(id);
                },
                [=](const caf::error& e) mutable {
                  auto& s = self->state;
                  spdlog::warn("moving worker {} failed: {}", old_id, self->system().render(e));
                  auto it = s.nodes.find(addr);
                  if (it != s.nodes.end()) {
                    auto& w = it->second.workers;
                    w.erase(std::remove(w.begin(), w.end(), new_id), w.end());
                  }
                  promise.deliver(int64_t{-1});
                });
        return promise;
      },
      // The tracker found a worker wrong (a spot check): ban_worker.
      [=](ban_atom, uint32_t worker, const std::string& why) {
        if (!supervisors::from_this_process(self))
          return supervisors::rejected(self, "the directory", "ban");
        ban_worker(self, worker, why);
      },
      [=](stop_atom) {
        auto& s = self->state;
        // Stopping the swarm is the coordinator's own decision (its signal handler, its end
        // of the run), never a peer's.
        if (!supervisors::from_this_process(self))
          return supervisors::rejected(self, "the directory", "stop");
        s.stopped = true;
        for (auto& p : s.ready)
          p.deliver(caf::make_error(caf::sec::request_receiver_down, "stopped"));
        s.ready.clear();
        for (const auto& [addr, node] : s.nodes)
          if (auto agent = caf::actor_cast<caf::actor>(addr)) self->send(agent, stop_atom::value);
      },
  };
}

}  // namespace

caf::behavior directory(Self* self, DirectorySetup setup) {
  set_up_directory(self, std::move(setup));
  return caf::behavior(membership_handlers(self).or_else(command_handlers(self)));
}

}  // namespace swarmrt::actors
