#include "leader/replicas.hpp"

#include <unistd.h>

#include <algorithm>
#include <chrono>

#include "credential/endpoint.hpp"

namespace swarmrt::leader {

std::string run_key(const std::string& run_id, const std::string& leaf) {
  return "/swarmrt/runs/" + run_id + "/" + leaf;
}

std::string host_name() {
  char host[256] = {0};
  gethostname(host, sizeof(host) - 1);
  return host;
}

nlohmann::json lone_coordinator_row(const std::string& address) {
  return {{"role", "only"},
          {"epoch", nullptr},
          {"pid", static_cast<int64_t>(getpid())},
          {"host", host_name()},
          {"address", address}};
}

std::vector<std::string> replica_addresses(const nlohmann::json& rows) {
  std::vector<std::string> out;
  if (!rows.is_array()) return out;
  for (const auto& r : rows) {
    if (!r.is_object() || !r.contains("address") || !r["address"].is_string()) continue;
    credential::HostPort at;
    try {
      at = credential::parse_host_port(r["address"].get<std::string>(), true);
    } catch (const std::exception&) {
      continue;
    }
    if (at.port == 0) continue;
    if (at.host == "0.0.0.0" || at.host == "::" || at.host.empty()) {
      at.host = r.value("host", "");
      if (at.host.empty()) continue;
    }
    auto text = credential::host_port_text(at);
    if (std::find(out.begin(), out.end(), text) == out.end()) out.push_back(std::move(text));
  }
  return out;
}

namespace {
// Each replica's presence under `prefix` (their keys' JSON values), in key order.
nlohmann::json rows_under(Etcd& etcd, const std::string& prefix) {
  auto rows = nlohmann::json::array();
  for (const auto& [key, kv] : etcd.get_prefix(prefix)) {
    auto r = nlohmann::json::parse(kv.value, nullptr, false);
    if (r.is_object()) rows.push_back(std::move(r));
  }
  return rows;
}
}  // namespace

ReplicaList leader_first(Etcd& etcd, const std::string& run_id) {
  const auto leader = etcd.get(run_key(run_id, "leader"));
  auto rows = nlohmann::json::array();
  bool found = false;
  for (auto& r : rows_under(etcd, run_key(run_id, "replicas/"))) {
    const bool leads = leader && r.value("who", "") == leader->value;
    found |= leads;
    rows.insert(leads ? rows.begin() : rows.end(), std::move(r));
  }
  ReplicaList out;
  out.addresses = replica_addresses(rows);
  // A leader on port 0 is not among the addresses: then the first is not the leader's.
  out.leader_first = found && !replica_addresses(nlohmann::json::array({rows[0]})).empty();
  return out;
}

std::vector<std::string> replica_addresses_in(Etcd& etcd, const std::string& run_id) {
  return replica_addresses(rows_under(etcd, run_key(run_id, "replicas/")));
}

ReplicaView::ReplicaView(Etcd etcd, std::string prefix, std::string leader_who, int64_t epoch,
                         nlohmann::json self)
    : etcd_(std::move(etcd)),
      prefix_(std::move(prefix)),
      leader_who_(std::move(leader_who)),
      epoch_(epoch) {
  self["role"] = "leader";
  self["epoch"] = epoch_;
  self.erase("who");
  rows_ = nlohmann::json::array({self});
  thread_ = std::thread([this] {
    while (!stop_) {
      try {
        auto rows = nlohmann::json::array();
        for (auto r : rows_under(etcd_, prefix_)) {
          const bool leads = r.value("who", "") == leader_who_;
          r["role"] = leads ? "leader" : "standby";
          r["epoch"] = leads ? nlohmann::json(epoch_) : nlohmann::json();
          r.erase("who");
          rows.insert(leads ? rows.begin() : rows.end(), r);
        }
        std::lock_guard<std::mutex> lock(mu_);
        if (!rows.empty()) rows_ = rows;
      } catch (const std::exception&) {
        // The last list stands; the lease's own renewal says when etcd is gone for good.
      }
      for (int i = 0; i < 10 && !stop_; ++i)
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  });
}

ReplicaView::~ReplicaView() {
  stop_ = true;
  if (thread_.joinable()) thread_.join();
}

nlohmann::json ReplicaView::rows() const {
  std::lock_guard<std::mutex> lock(mu_);
  return rows_;
}

}  // namespace swarmrt::leader
