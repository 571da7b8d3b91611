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

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "credential/cluster_tls.hpp"
#include "leader/leadership.hpp"
#include "leader/replicas.hpp"

namespace swarmrt::leader {

struct LeaderOptions {
  std::string etcd;  // client URLs; empty: this coordinator runs alone
  int64_t lease_ttl_s = 5;
  EtcdTls tls;
};

// How a swarmrt process talks to etcd at `urls`: with the files given (--etcd-ca/--etcd-cert/
// --etcd-key) when there are any; else, for https members, with the cluster's own certificates
// from `secret` (the private etcd of `launch --coordinators` and one set up with `swarmrt tls`
// trust those), written to a private directory that `files` names (remove it at exit); else
// plain http. Throws std::invalid_argument when https needs the secret and there is none.
EtcdTls etcd_tls(const std::string& urls, const EtcdTls& given, const std::string& secret,
                 credential::TlsFiles& files);

struct Leading {
  credential::TlsFilesGuard etcd_files;  // the certificates this replica shows etcd
  std::unique_ptr<Leadership> lead;      // null without --etcd
  bool took_over = false;                // an earlier leader started this run: continue it
  std::string previous;                  // who that was
  double previous_wall = 0;  // when that leader's last metrics record was written (0: none)
  int exit_code = -1;        // >= 0: stop now with this code (refused, run already over, signal)
  std::string done_key;      // where finish() says the run is over
  std::shared_ptr<ReplicaView> replicas;  // null without --etcd
};

// Opens this replica's port while it stands by, answering with what the lister gives; what it
// returns keeps the port open until released (null: no port).
using DoorOpener = std::function<std::shared_ptr<void>(ReplicaLister)>;

// Stands for leader of run `run_id` (16 hex digits; empty: none was given), blocking while a
// standby; `address` is where this replica listens once it leads (with its host and pid it
// says who this replica is, to the others and to `ctl`). While it stands by, `open_door` opens
// its port to say where the leader is; the port is closed again before this returns.
Leading stand_for_leader(const LeaderOptions& o, const std::string& run_id,
                         const std::string& fingerprint, const std::string& secret,
                         const std::string& address, const std::function<bool()>& give_up,
                         const DoorOpener& open_door = {});
// From now on the run directory is written only under the lease; when it lapses this process
// stops at once (exit 4) without another write.
void fence_and_keep(Leading& l, const std::string& run_dir);
// The run ended under this leader (completed, stopped on purpose, failed): no standby takes it
// up. Then the lease is revoked.
void finish(Leading& l, const std::string& how);

}  // namespace swarmrt::leader
