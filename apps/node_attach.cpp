// One attachment of a node to a coordinator (node_process.hpp): the join, the run's context,
// the stage workers the coordinator assigns (a supervisor per stage), the console port, and
// serving until the agent stops.
#include <spdlog/spdlog.h>
#include <torch/cuda.h>
#include <caf/all.hpp>
#include <caf/io/all.hpp>
#include <caf/openssl/publish.hpp>
#include <map>
#include <mutex>

#include "actors/console/inspector.hpp"
#include "actors/membership/node_agent.hpp"
#include "actors/runtime/runtime.hpp"
#include "apps/net.hpp"
#include "apps/node_process.hpp"
#include "inspect/probe.hpp"
#include "model/precision.hpp"
#include "supervisors/chaos_control.hpp"
#include "transport/bulk.hpp"
#include "transport/channel.hpp"

namespace swarmrt::apps::node {
using namespace swarmrt::atoms;

namespace {

caf::behavior console_door(caf::event_based_actor*, std::shared_ptr<DoorTarget> target) {
  return {[=](inspector_atom) {
    std::lock_guard<std::mutex> lock(target->mu);
    return target->inspector;
  }};
}

// The node's workers, one supervisor per stage served (it restarts a dead worker with the
// same id and tells the directory, which announces the new handle), its chaos actor and its
// agent.
caf::actor spawn_node(caf::actor_system& sys, const NodeArgs& args, const actors::ContextPtr& ctx,
                      const messages::JoinReply& reply, const caf::actor& dir,
                      const std::string& bulk, const std::shared_ptr<supervisors::Roster>& roster,
                      actors::NodeAgentSetup& setup) {
  setup.move_timeout_s = ctx->config.supervision.reply_timeout_s;
  setup.directory = dir;
  setup.index = reply.node_index;
  std::map<uint32_t, std::vector<actors::WorkerSetup>> by_stage;
  for (size_t i = 0; i < reply.worker_ids.size(); ++i) {
    auto ws = actors::worker_setup(ctx, reply.worker_ids[i], reply.stages[i], reply.tracker,
                                   reply.averagers, reply.groups);
    // "cuda": worker i on the i-th visible GPU (round robin past the last).
    ws.device = args.device == "cuda"
                    ? "cuda:" + std::to_string(i % static_cast<size_t>(torch::cuda::device_count()))
                    : args.device;
    by_stage[reply.stages[i]].push_back(ws);
  }
  for (auto& [stage, setups] : by_stage)
    setup.supervisors.push_back(actors::spawn_stage_supervisor(
        sys,
        {"node '" + setup.name + "' stage " + std::to_string(stage) + " supervisor", ctx, setups,
         bulk, dir, caf::actor{}, roster, reply.averagers, reply.groups},
        setup.workers));
  supervisors::ChaosSetup chaos;
  chaos.config = ctx->config.chaos;
  chaos.roster = roster;
  // A node kill is a crash: no goodbye to anyone, as a SIGKILL would leave it.
  chaos.kill_self = [] { std::_Exit(137); };
  setup.chaos = inspect::spawn_probed(sys, supervisors::chaos_control, chaos);
  supervisors::register_chaos(setup.chaos);
  roster->put("chaos", "chaos", setup.chaos);
  auto agent = inspect::spawn_probed(sys, actors::node_agent, setup);
  roster->put("agent", "agent", agent);
  return agent;
}

// --console: a port of this node's own through which a console reaches the whole swarm (the
// coordinator's inspector behind it), opened at the first attachment; every attachment puts
// its coordinator's inspector behind it.
void update_console_door(NodeProcess& p, const caf::actor& dir) {
  if (p.args.console.empty()) return;
  caf::scoped_actor self{p.sys};
  caf::actor coordinator_inspector;
  self->request(dir, std::chrono::seconds(10), inspector_atom::value)
      .receive([&](const caf::actor& a) { coordinator_inspector = a; },
               [&](const caf::error& e) {
                 spdlog::error("no console port: the coordinator has no inspector: {}",
                               p.sys.render(e));
               });
  if (!coordinator_inspector) return;
  {
    std::lock_guard<std::mutex> lock(p.door_target->mu);
    p.door_target->inspector = coordinator_inspector;
  }
  if (p.door) return;
  p.door = p.sys.spawn(console_door, p.door_target);
  // Over mutual TLS only, like the coordinator's port: no handle without the credential.
  auto port = caf::openssl::publish(p.door, p.console_at.port, p.console_at.host.c_str(), true);
  if (port) {
    std::printf("node console listening on %s:%u\n", p.console_at.host.c_str(), *port);
    std::fflush(stdout);
  } else {
    spdlog::error("no console port on {}: {}", p.args.console, p.sys.render(port.error()));
  }
}

// The join: asked of the coordinator's directory through a watcher (a coordinator that dies
// before it answers ends the join at once, where CAF would wait out the request's 30 s).
// The reply, or how the attachment ends: refused (final), or unanswered (attach again).
std::optional<Attachment> join(NodeProcess& p, const caf::actor& dir, messages::JoinReply& reply) {
  auto& sys = p.sys;
  caf::scoped_actor self{sys};
  std::string refusal;
  bool refused = false;
  self->request(request_watcher<messages::JoinReply, join_atom, messages::JoinRequest>(
                    sys, dir, std::chrono::seconds(30)),
                caf::infinite, join_atom::value, p.request)
      .receive([&](const messages::JoinReply& r) { reply = r; },
               [&](const caf::error& e) {
                 refusal = sys.render(e);
                 // The directory's refusals (secret, run, config, ...) are final; a join that
                 // went unanswered (a coordinator frozen or gone meanwhile) is tried elsewhere.
                 refused = e == caf::sec::invalid_argument;
               });
  if (refused) {
    spdlog::error("the coordinator at {} refused this node: {}", host_port_text(p.attached),
                  refusal);
    return Attachment{3, false, false};
  }
  if (!refusal.empty()) {
    spdlog::warn("node '{}': the join went unanswered ({}); trying the coordinator again",
                 p.request.node_name, refusal);
    return Attachment{1, true, false};
  }
  return std::nullopt;
}

// The run as the join's answer gives it, with this process's transport set up for it; null
// (the reason logged) when this node cannot take part (a config it cannot read, a compute
// dtype its device has not).
std::shared_ptr<actors::SwarmContext> run_context(NodeProcess& p, const messages::JoinReply& reply,
                                                  const caf::actor& inspector) {
  auto ctx = std::make_shared<actors::SwarmContext>();
  try {
    ctx->config = config::parse_config(reply.config_toml, "the coordinator's config");
  } catch (const std::exception& e) {
    spdlog::error("{}", e.what());
    return nullptr;
  }
  // The run's compute dtype must be one this node's device computes in (fp16: CUDA only).
  if (auto why = model::check_precision(
          ctx->config.train.precision,
          c10::Device(p.args.device == "cpu" ? std::string("cpu") : std::string("cuda")));
      !why.empty()) {
    spdlog::error("this node cannot join the run on {}: {}", p.args.device, why);
    return nullptr;
  }
  ctx->run_id = reply.run_id;
  // Its workers report this process's bytes under this name: the coordinator adds them up.
  // A node that attaches again is a new node index with counters from zero, so the
  // coordinator keeps what the earlier index reported and counts nothing twice.
  ctx->process = "node" + std::to_string(reply.node_index);
  caf::anon_send(inspector, timeouts_atom::value, ctx->config.supervision.query_timeout_s,
                 ctx->config.supervision.answer_lead_ms);
  transport::set_max_message(ctx->config.max_message_bytes());
  transport::set_encrypt_mode(ctx->config.transport.encrypt);
  transport::set_link_delay(ctx->config.chaos.link_delay_ms);
  transport::set_link_bandwidth(ctx->config.chaos.link_mbit_s);
  return ctx;
}

// Serves until the agent stops, then waits for this attachment's stage supervisors (and with
// them its workers) to go, within the time a worker may take to answer. Whether the agent
// ended with an error.
bool serve_until_stopped(NodeProcess& p, const caf::actor& agent,
                         const actors::NodeAgentSetup& setup, const actors::SwarmContext& ctx) {
  caf::scoped_actor self{p.sys};
  self->monitor(agent);
  bool failed = false;
  self->receive([&](const caf::down_msg& down) { failed = static_cast<bool>(down.reason); });
  self->send_exit(setup.chaos, caf::exit_reason::user_shutdown);
  const auto grace = config::as_duration(ctx.config.supervision.reply_timeout_s);
  for (const auto& sup : setup.supervisors) {
    self->monitor(sup);
    bool gone = false;
    self->receive([&](const caf::down_msg&) { gone = true; },
                  caf::after(grace) >>
                      [&] {
                        spdlog::warn("node '{}': a stage supervisor did not stop within {} s",
                                     setup.name, ctx.config.supervision.reply_timeout_s);
                      });
    if (!gone) break;
  }
  return failed;
}

}  // namespace

// One attachment, as named steps: the node's inspector, the join, the run's context, the
// workers it assigns, serving until the agent stops.
Attachment attach(NodeProcess& p, const caf::actor& dir) {
  auto& sys = p.sys;
  // The node's inspector exists before the join: the directory hands it to consoles. It
  // takes commands from this coordinator's process only.
  actors::InspectorSetup inspector_setup;
  inspector_setup.coordinator = false;
  inspector_setup.roster = p.roster;
  inspector_setup.coordinator_node = dir.node();
  auto inspector = inspect::spawn_probed(sys, actors::inspector, inspector_setup);
  actors::register_inspector(inspector);
  p.request.inspector = inspector;
  // Stopped when the attachment ends, or the actor system's destructor would wait for it.
  AtScopeExit stop_inspector{
      [&] { caf::anon_send_exit(inspector, caf::exit_reason::user_shutdown); }};
  // The states kept since the last coordinator was lost go to this one only; the join names
  // them (a coordinator that took over continues from them).
  if (!p.keeper) p.keeper = sys.spawn(actors::state_keeper, p.kept);
  p.kept->serve(dir.node());
  p.kept->name_in(p.request, p.keeper);
  messages::JoinReply reply;
  if (auto ended = join(p, dir, reply)) return *ended;
  keep_listed(p)(reply.replicas);
  auto ctx = run_context(p, reply, inspector);
  if (!ctx) return {3, false, false};
  // Frames travel on a TCP link of their own (see transport/bulk.hpp) unless either side
  // has none, then inside CAF messages.
  if (!reply.endpoint.empty() && p.bulk.empty())
    p.bulk = transport::start_bulk_server(p.args.listen);
  const std::string bulk = reply.endpoint.empty() ? std::string() : p.bulk;
  transport::register_endpoint(dir.node(), reply.endpoint);
  p.roster->set_node("node" + std::to_string(reply.node_index));
  p.roster->put("inspector", "inspector", inspector);
  actors::NodeAgentSetup setup;
  setup.name = p.request.node_name;
  setup.on_replicas = keep_listed(p);
  if (actors::keeps_states(*ctx)) {
    setup.kept = p.kept;
    setup.keep_each_worker = ctx->diloco();
    setup.roster = p.roster;
    setup.keep_timeout_s = ctx->config.supervision.reply_timeout_s;
  }
  auto agent = spawn_node(sys, p.args, ctx, reply, dir, bulk, p.roster, setup);
  {
    std::lock_guard<std::mutex> lock(p.targets.mu);
    p.targets.agent = agent;
    p.targets.system = &sys;
  }
  spdlog::info("node '{}' serving {} workers for the coordinator at {}; frame link {}", setup.name,
               setup.workers.size(), host_port_text(p.attached),
               bulk.empty() ? "none (over CAF)" : bulk);
  update_console_door(p, dir);
  const bool failed = serve_until_stopped(p, agent, setup, *ctx);
  const nlohmann::json sent = ctx->bytes->to_json();
  for (const auto& [kind, bytes] : sent.items())
    p.sent[kind] = p.sent.value(kind, 0.0) + bytes.get<double>();
  return {failed ? 1 : 0, *setup.lost, true};
}

}  // namespace swarmrt::apps::node
