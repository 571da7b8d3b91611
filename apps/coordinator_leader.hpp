// coordinator --etcd: coordinator replicas of one run, one leading. Each replica stands for
// the run's leader key in etcd before it touches the run directory; the one that holds it
// trains, the others wait as standbys. A standby that wins after an earlier leader (its lease
// lapsed: killed, frozen, cut off) continues that leader's run from its newest checkpoint in
// the shared run directory, and the nodes, which know or learn every replica's address (the
// --join list, the leader's replica lists, etcd), attach to it.
// Keys, under /swarmrt/runs/RUN_ID/: leader (the holder, under its lease), config (the run's
// fingerprint: a replica of another config is refused), epochs (the last leader's epoch: a
// run was started), done (the run ended on purpose: no standby continues it).
#pragma once

#include <CLI/CLI.hpp>
#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "apps/net.hpp"
#include "apps/standby_door.hpp"
#include "leader/leadership.hpp"
#include "transport/cluster_tls.hpp"

namespace swarmrt::apps {

struct LeaderOptions {
  std::string etcd;  // client URLs; empty: this coordinator runs alone
  int64_t lease_ttl_s = 5;
  leader::EtcdTls tls;
};
void add_leader_options(CLI::App& cmd, LeaderOptions& o);
// --etcd-ca, --etcd-cert, --etcd-key: the PKI shown to https etcd members (replicas, nodes, ctl).
void add_etcd_tls_options(CLI::App& cmd, leader::EtcdTls& tls);

// How a swarmrt process talks to etcd at `urls`: with the files given (--etcd-ca/--etcd-cert/
// --etcd-key) when there are any; else, for https members, with the cluster's own certificates
// from `secret` (the private etcd of `launch --coordinators` and one set up with `swarmrt tls`
// trust those), written to a private directory that `files` names (remove it at exit); else
// plain http. Throws std::invalid_argument when https needs the secret and there is none.
leader::EtcdTls etcd_tls(const std::string& urls, const leader::EtcdTls& given,
                         const std::string& secret, transport::TlsFiles& files);

// The run's coordinator replicas as etcd lists them (each replica's key under
// /swarmrt/runs/ID/replicas/, held under its lease), for the console's `nodes`: refreshed every
// second on a thread of its own, so a console never waits on etcd.
class ReplicaView {
 public:
  ReplicaView(leader::Etcd etcd, std::string prefix, std::string leader_who, int64_t epoch,
              nlohmann::json self);
  ~ReplicaView();
  // [{role: leader|standby, epoch (the leader's; null for a standby), pid, host, address}]
  nlohmann::json rows() const;

 private:
  leader::Etcd etcd_;
  const std::string prefix_, leader_who_;
  const int64_t epoch_;
  mutable std::mutex mu_;
  nlohmann::json rows_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

struct Leading {
  TlsFilesGuard etcd_files;  // the cluster certificates this replica shows etcd (outlives `lead`)
  std::unique_ptr<leader::Leadership> lead;  // null without --etcd
  bool took_over = false;                    // an earlier leader started this run: continue it
  std::string previous;                      // who that was
  double previous_wall = 0;  // when that leader's last metrics record was written (0: none)
  int exit_code = -1;        // >= 0: stop now with this code (refused, run already over, signal)
  std::string done_key;      // where finish() says the run is over
  std::shared_ptr<ReplicaView> replicas;  // null without --etcd
};

// Opens this replica's port while it stands by (null: none), given what it answers with.
using DoorOpener = std::function<std::unique_ptr<StandbyDoor>(StandbyDoor::Lister)>;

// Stands for leader (blocking while a standby); `address` is where this replica listens once
// it leads (with its host and pid it says who this replica is, to the others and to `ctl`).
// While it stands by, `open_door` opens its port to say where the leader is; the port is
// closed again before this returns.
Leading stand_for_leader(const LeaderOptions& o, uint64_t run_id, const std::string& fingerprint,
                         const std::string& secret, const std::string& address,
                         const std::function<bool()>& give_up, const DoorOpener& open_door = {});
// HOST:PORT of each replica in `rows` (ReplicaView::rows, or etcd's replica keys as they
// are): where a node may find the next leader. A replica that listens on a wildcard address
// is named by its host; one without a fixed port is left out.
std::vector<std::string> replica_addresses(const nlohmann::json& rows);
// The replicas' addresses of run `run_id` as etcd lists them now (for a node given --etcd).
// Throws on an etcd error.
std::vector<std::string> replica_addresses_in(leader::Etcd& etcd, uint64_t run_id);
// This coordinator's row of `ctl nodes` when it has no replicas (role "only").
nlohmann::json lone_coordinator_row(const std::string& address);
// From now on the run directory is written only under the lease; when it lapses this process
// stops at once (exit 4) without another write.
void fence_and_keep(Leading& l, const std::string& run_dir);
// The run ended under this leader (completed, stopped on purpose, failed): no standby takes it
// up. Then the lease is revoked.
void finish(Leading& l, const std::string& how);
// A takeover re-runs the steps after where it continues (the nodes' kept states or its
// checkpoint): their step and eval records go from metrics.jsonl (written aside and renamed),
// and a torn last line with them. Returns the latest wall time of any record: the previous
// leader's last sign of life.
double drop_records_after(const std::string& run_dir, int64_t step);
// The step of the newest checkpoint file in the run directory; 0 when there is none.
int64_t newest_checkpoint_step(const std::string& run_dir);

}  // namespace swarmrt::apps
