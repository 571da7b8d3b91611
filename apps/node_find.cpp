// How a node finds a coordinator to attach to (see node_process.hpp).
#include <spdlog/spdlog.h>
#include <algorithm>
#include <thread>
#include <utility>

#include "apps/node_process.hpp"
#include "leader/replicas.hpp"
#include "messages/run_id.hpp"

namespace swarmrt::apps::node {
using namespace swarmrt::atoms;

std::string known(const NodeProcess& p) {
  std::string out;
  for (const auto& at : p.coords) out += (out.empty() ? "" : ", ") + host_port_text(at);
  return out.empty() ? "no address yet" : out;
}

namespace {

// Each of `xs` that `ys` lacks.
std::vector<std::string> missing_from(const std::vector<std::string>& xs,
                                      const std::vector<std::string>& ys) {
  std::vector<std::string> out;
  for (const auto& x : xs)
    if (std::find(ys.begin(), ys.end(), x) == ys.end()) out.push_back(x);
  return out;
}

void say(const std::string& name, const std::vector<std::string>& at, const char* what) {
  if (at.empty()) return;
  std::string list;
  for (const auto& a : at) list += (list.empty() ? "" : ", ") + a;
  spdlog::info("node '{}': coordinator replica(s) {} {}", name, list, what);
}

}  // namespace

std::function<void(const std::vector<std::string>&)> keep_listed(const NodeProcess& p) {
  return [listed = p.listed, name = p.name](const std::vector<std::string>& at) {
    std::lock_guard<std::mutex> lock(listed->mu);
    say(name, missing_from(missing_from(at, listed->known), listed->at),
        "learned from the coordinator");
    say(name, missing_from(listed->at, at), "no longer listed by the coordinator");
    listed->at = at;
  };
}

void refresh_known(NodeProcess& p) {
  std::vector<std::string> listed, known;
  {
    std::lock_guard<std::mutex> lock(p.listed->mu);
    listed = p.listed->at;
    known = p.listed->known;
  }
  if (p.etcd) {
    try {
      const auto now =
          leader::replica_addresses_in(*p.etcd, messages::run_id_text(p.request.run_id));
      say(p.name, missing_from(missing_from(now, known), listed), "learned from etcd");
      say(p.name, missing_from(p.etcd_listed, now), "no longer listed in etcd");
      p.etcd_listed = now;
      p.etcd_failed = false;
    } catch (const std::exception& e) {
      // What etcd listed last still stands.
      if (!p.etcd_failed) spdlog::warn("node '{}': etcd at {}: {}", p.name, p.args.etcd, e.what());
      p.etcd_failed = true;
    }
  }
  std::vector<HostPort> coords = p.given;
  for (const auto* list : {&listed, &p.etcd_listed})
    for (const auto& a : *list) {
      HostPort at;
      try {
        at = parse_host_port(a, false);
      } catch (const std::exception&) {
        continue;
      }
      if (std::find(coords.begin(), coords.end(), at) == coords.end()) coords.push_back(at);
    }
  p.coords = std::move(coords);
  known.clear();
  for (const auto& at : p.coords) known.push_back(host_port_text(at));
  std::lock_guard<std::mutex> lock(p.listed->mu);
  p.listed->known = std::move(known);
}

Answer ask_directory(NodeProcess& p, const caf::actor& dir, const std::string& where,
                     bool* named_new) {
  caf::scoped_actor self{p.sys};
  auto answer = Answer::silent;
  bool refused = false;
  const auto wait = std::chrono::seconds(3);
  self->request(request_watcher<caf::actor, inspector_atom>(p.sys, dir, wait), caf::infinite,
                inspector_atom::value)
      .receive([&](const caf::actor&) { answer = Answer::directory; },
               [&](const caf::error& e) {
                 refused = e != caf::sec::request_timeout && e != caf::sec::request_receiver_down;
               });
  if (!refused) return answer;
  // It answered, but not as a directory: a standby (apps/standby_door.hpp) names the replicas,
  // the leader's first. They are kept as a coordinator's list is, until one lists others.
  std::vector<std::string> named;
  self->request(request_watcher<std::vector<std::string>, replicas_atom>(p.sys, dir, wait),
                caf::infinite, replicas_atom::value)
      .receive([&](const std::vector<std::string>& at) { named = at; }, [](const caf::error&) {});
  if (named.empty()) return answer;
  answer = Answer::standby;
  std::vector<std::string> added;
  bool same = false;  // said once for each list a standby names, not in every search round
  {
    std::lock_guard<std::mutex> lock(p.listed->mu);
    added = missing_from(named, p.listed->known);
    same = p.listed->at == named;
    p.listed->at = named;
  }
  std::string list;
  for (const auto& a : named) list += (list.empty() ? "" : ", ") + a;
  if (!same)
    spdlog::info("node '{}': {} is a standby coordinator; it names the leader first: {}", p.name,
                 where, list);
  if (named_new && !added.empty()) *named_new = true;
  return answer;
}

caf::actor reach_directory(caf::actor_system& sys, const NodeArgs& args, const HostPort& coord,
                           const StopSignals& signals, int& code) {
  const auto deadline =
      std::chrono::steady_clock::now() +
      std::chrono::milliseconds(static_cast<int64_t>(args.connect_timeout_s * 1e3));
  const auto reached = reach_coordinator(
      sys, coord, deadline, true, [&] { return signals.fired(); },
      [&] {
        spdlog::warn(
            "the control-plane handshake with {} took longer than one heartbeat interval "
            "({} ms) and was dropped; trying again (on a slow link, raise --heartbeat-ms)",
            args.join, args.net.heartbeat_ms);
      });
  if (reached.refused) {
    spdlog::error(
        "the coordinator at {} refused this node: the TLS handshake failed, the two do not "
        "hold the same cluster credential (wrong secret, or a certificate of another "
        "cluster); CAF said: {}",
        args.join, reached.error);
    code = 3;
  } else if (!reached.directory) {
    spdlog::error("cannot reach the coordinator at {}: {}", args.join, reached.error);
    code = 1;
  }
  return reached.directory;
}

// The coordinator's directory at any of the --join addresses: at the start when there are
// several (replicas, of which only the leader listens), and after the coordinator's link
// became unreachable (the partition healed, a standby took over, a coordinator resumed on its
// address). Each address is tried in turn, with backoff, until --connect-timeout-s; null when
// none answered or a signal came. The caller has refreshed the addresses (refresh_known); each
// later round refreshes them again.
caf::actor find_coordinator(NodeProcess& p, std::chrono::steady_clock::time_point deadline) {
  auto wait = std::chrono::milliseconds(200);
  std::string last;
  bool named_new = false;  // a standby named an address this round did not have
  for (bool first_round = true;; first_round = false) {
    if (!first_round) refresh_known(p);
    // From the address after the coordinator last attached to: a frozen leader is asked last.
    size_t first = 0;
    for (size_t k = 0; k < p.coords.size(); ++k)
      if (p.coords[k] == p.attached) first = k + 1;
    for (size_t i = 0; i < p.coords.size(); ++i) {
      const size_t k = (first + i) % p.coords.size();
      const auto& at = p.coords[k];
      const auto where = host_port_text(at);
      // The port first, with a bounded connect: behind a link that drops packets, CAF's own
      // connect would wait for the kernel's SYN timeout, minutes past the deadline.
      if (!tcp_port_open(at.host, at.port)) {
        last = where + ": nothing listens there (or the link is down)";
        continue;
      }
      // A refusal is retried too: this node held the credential a moment ago, and CAF refuses
      // a second connection while the coordinator still holds the first one. A frozen process
      // accepts the connection but never answers: bounded per address.
      const auto reached = reach_coordinator(
          p.sys, at, std::min(deadline, std::chrono::steady_clock::now() + std::chrono::seconds(5)),
          false, [&] { return p.signals.fired(); }, nullptr);
      if (!reached.directory) {
        last = where + ": " + reached.error;
        continue;
      }
      // CAF may hand back the handle it knew for that address without a new handshake: the
      // directory must answer before the node joins it (a frozen leader's does not).
      const auto answer = ask_directory(p, reached.directory, where, &named_new);
      if (answer == Answer::directory) {
        p.attached = at;
        return reached.directory;
      }
      if (answer == Answer::standby) {
        last = where + ": a standby coordinator (the leader it names did not answer)";
        continue;
      }
      last = where + ": its directory did not answer (a frozen coordinator?)";
    }
    if (p.signals.fired() || std::chrono::steady_clock::now() + wait > deadline) break;
    // A standby named replicas not tried yet (the leader): they are tried at once.
    if (std::exchange(named_new, false)) continue;
    std::this_thread::sleep_for(wait);
    // A closed port costs one loopback or LAN round trip to find: the backoff stays short,
    // so a node attaches within half a second of a new leader listening.
    wait = std::min(wait * 2, std::chrono::milliseconds(500));
  }
  if (!p.signals.fired())
    spdlog::error("node '{}': no coordinator at {} answered within --connect-timeout-s ({} s): {}",
                  p.name, known(p), p.args.connect_timeout_s,
                  last.empty() ? "no address known" : last);
  return {};
}

}  // namespace swarmrt::apps::node
