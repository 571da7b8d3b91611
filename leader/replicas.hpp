// Where a run's coordinator replicas are, as etcd lists them: each replica's key under
// /swarmrt/runs/RUN_ID/replicas/ (held under its lease, so it goes with the process), read for
// the console's `nodes`, for a node's search for the next leader and for a standby's port.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "leader/etcd.hpp"

namespace swarmrt::leader {

// /swarmrt/runs/RUN_ID/LEAF: the run's keys (RUN_ID: its 16 hex digits).
std::string run_key(const std::string& run_id, const std::string& leaf);
// This machine's host name.
std::string host_name();

// The run's coordinator replicas as etcd lists them, refreshed every second on a thread of its
// own, so a console never waits on etcd.
class ReplicaView {
 public:
  ReplicaView(Etcd etcd, std::string prefix, std::string leader_who, int64_t epoch,
              nlohmann::json self);
  ~ReplicaView();
  // [{role: leader|standby, epoch (the leader's; null for a standby), pid, host, address}]
  nlohmann::json rows() const;

 private:
  Etcd etcd_;
  const std::string prefix_, leader_who_;
  const int64_t epoch_;
  mutable std::mutex mu_;
  nlohmann::json rows_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

// HOST:PORT of each replica in `rows` (ReplicaView::rows, or etcd's replica keys as they
// are): where a node may find the next leader. A replica that listens on a wildcard address
// is named by its host; one without a fixed port is left out.
std::vector<std::string> replica_addresses(const nlohmann::json& rows);
// The replicas' addresses of run `run_id` as etcd lists them now (for a node given --etcd).
// Throws on an etcd error.
std::vector<std::string> replica_addresses_in(Etcd& etcd, const std::string& run_id);

// The replicas' addresses (this one's too: it may lead next), the leader's first when there is
// one: what a standby's port answers.
struct ReplicaList {
  std::vector<std::string> addresses;
  bool leader_first = false;  // no leader now (its lease lapsed): the order is etcd's
};
// Throws on an etcd error.
ReplicaList leader_first(Etcd& etcd, const std::string& run_id);
using ReplicaLister = std::function<ReplicaList()>;

// This coordinator's row of `ctl nodes` when it has no replicas (role "only").
nlohmann::json lone_coordinator_row(const std::string& address);

}  // namespace swarmrt::leader
