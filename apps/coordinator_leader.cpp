#include "apps/coordinator_leader.hpp"

#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <thread>

#include <fmt/format.h>

#include "messages/run_id.hpp"
#include "model/checkpoint.hpp"
#include "model/fence.hpp"
#include "model/run_dir.hpp"

namespace swarmrt::apps {
namespace fs = std::filesystem;

void add_leader_options(CLI::App& cmd, LeaderOptions& o) {
  cmd.add_option("--etcd", o.etcd,
                 "etcd client URLs (http[s]://HOST:PORT, comma-separated): run as one of several "
                 "coordinator replicas of --run-id, leading while holding the run's lease and "
                 "standing by otherwise");
  cmd.add_option("--lease-ttl-s", o.lease_ttl_s,
                 "the leader's lease in etcd: a standby takes over this long after the leader "
                 "stops renewing it")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{1}, int64_t{600}));
  add_etcd_tls_options(cmd, o.tls);
}

void add_etcd_tls_options(CLI::App& cmd, leader::EtcdTls& tls) {
  cmd.add_option("--etcd-ca", tls.ca,
                 "PEM file of the CA that signed the etcd members' certificates (default for "
                 "https members: the cluster CA from the secret, as `swarmrt tls` writes it)");
  cmd.add_option("--etcd-cert", tls.cert, "PEM client certificate for https etcd members");
  cmd.add_option("--etcd-key", tls.key, "PEM key of --etcd-cert");
}

leader::EtcdTls etcd_tls(const std::string& urls, const leader::EtcdTls& given,
                         const std::string& secret, transport::TlsFiles& files) {
  if (!given.ca.empty() || !given.cert.empty() || !given.key.empty()) return given;
  if (urls.find("https://") == std::string::npos) return given;
  if (secret.empty())
    throw std::invalid_argument(
        "--etcd over https needs the cluster secret (SWARMRT_SECRET or --secret-file) to show "
        "etcd the cluster's certificate, or --etcd-ca/--etcd-cert/--etcd-key");
  files = transport::write_cluster_tls(secret, "swarmrt etcd client");
  return {files.ca, files.cert, files.key};
}

namespace {

std::string run_key(uint64_t run_id, const char* leaf) {
  return "/swarmrt/runs/" + messages::run_id_text(run_id) + "/" + leaf;
}

}  // namespace

namespace {
std::string host_name() {
  char host[256] = {0};
  gethostname(host, sizeof(host) - 1);
  return host;
}
}  // namespace

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
    HostPort at;
    try {
      at = parse_host_port(r["address"].get<std::string>(), true);
    } catch (const std::exception&) {
      continue;
    }
    if (at.port == 0) continue;
    if (at.host == "0.0.0.0" || at.host == "::" || at.host.empty()) {
      at.host = r.value("host", "");
      if (at.host.empty()) continue;
    }
    auto text = host_port_text(at);
    if (std::find(out.begin(), out.end(), text) == out.end()) out.push_back(std::move(text));
  }
  return out;
}

namespace {
// Each replica's presence under `prefix` (their keys' JSON values), in key order.
nlohmann::json rows_under(leader::Etcd& etcd, const std::string& prefix) {
  auto rows = nlohmann::json::array();
  for (const auto& [key, kv] : etcd.get_prefix(prefix)) {
    auto r = nlohmann::json::parse(kv.value, nullptr, false);
    if (r.is_object()) rows.push_back(std::move(r));
  }
  return rows;
}

// The replicas' addresses, the leader's first: what a standby's port answers.
StandbyDoor::Replicas leader_first(leader::Etcd& etcd, uint64_t run_id) {
  const auto leader = etcd.get(run_key(run_id, "leader"));
  auto rows = nlohmann::json::array();
  bool found = false;
  for (auto& r : rows_under(etcd, run_key(run_id, "replicas/"))) {
    const bool leads = leader && r.value("who", "") == leader->value;
    found |= leads;
    rows.insert(leads ? rows.begin() : rows.end(), std::move(r));
  }
  StandbyDoor::Replicas out;
  out.addresses = replica_addresses(rows);
  // A leader on port 0 is not among the addresses: then the first is not the leader's.
  out.leader_first = found && !replica_addresses(nlohmann::json::array({rows[0]})).empty();
  return out;
}
}  // namespace

std::vector<std::string> replica_addresses_in(leader::Etcd& etcd, uint64_t run_id) {
  return replica_addresses(rows_under(etcd, run_key(run_id, "replicas/")));
}

ReplicaView::ReplicaView(leader::Etcd etcd, std::string prefix, std::string leader_who,
                         int64_t epoch, nlohmann::json self)
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

Leading stand_for_leader(const LeaderOptions& o, uint64_t run_id, const std::string& fingerprint,
                         const std::string& secret, const std::string& address,
                         const std::function<bool()>& give_up, const DoorOpener& open_door) {
  Leading l;
  if (o.etcd.empty()) return l;
  if (run_id == 0) {
    spdlog::error("--etcd needs --run-id: the replicas of one run find each other by it");
    l.exit_code = 2;
    return l;
  }
  try {
    leader::Etcd etcd(o.etcd, etcd_tls(o.etcd, o.tls, secret, l.etcd_files.files));
    // The first replica to come records the run's config; every other must have the same.
    const auto config_key = run_key(run_id, "config");
    if (!etcd.create_if_absent(config_key, fingerprint, 0).won) {
      const auto held = etcd.get(config_key);
      if (held && held->value != fingerprint) {
        spdlog::error(
            "refused: run {} in etcd has another config (fingerprint {}, this replica's {}); "
            "a replica must be started with the run's config",
            messages::run_id_text(run_id), held->value, fingerprint);
        l.exit_code = 3;
        return l;
      }
    }
    if (const auto done = etcd.get(run_key(run_id, "done"))) {
      spdlog::error("run {} is over ({}): nothing to lead", messages::run_id_text(run_id),
                    done->value);
      l.exit_code = 3;
      return l;
    }
    l.done_key = run_key(run_id, "done");
    const auto host = host_name();
    const auto who = fmt::format("{} at {} (pid {})", host, address, getpid());
    const nlohmann::json me{{"who", who},
                            {"host", host},
                            {"address", address},
                            {"pid", static_cast<int64_t>(getpid())}};
    l.lead =
        std::make_unique<leader::Leadership>(etcd, run_key(run_id, "leader"), who, o.lease_ttl_s);
    // Seen by `ctl nodes` on whichever replica leads, as long as this process holds its lease.
    const auto replicas = run_key(run_id, "replicas/");
    l.lead->announce(replicas + host + ":" + std::to_string(getpid()), me.dump());
    std::unique_ptr<StandbyDoor> door;
    const int64_t epoch = l.lead->campaign(give_up, [&](const std::string& holder) {
      spdlog::info("standby for run {}: {} leads; taking over within {} s of its lease lapsing",
                   messages::run_id_text(run_id), holder, o.lease_ttl_s);
      l.previous = holder;
      if (!door && open_door)
        door = open_door(
            [etcd = l.lead->etcd(), run_id]() mutable { return leader_first(etcd, run_id); });
    });
    door.reset();  // its port is the leader's directory's from here on
    if (epoch == 0) {
      l.exit_code = 130;
      return l;
    }
    auto& e = l.lead->etcd();
    // A run that ended while this replica stood by is not started again.
    if (const auto done = e.get(run_key(run_id, "done"))) {
      spdlog::info("run {} ended under the previous leader ({}): nothing to lead",
                   messages::run_id_text(run_id), done->value);
      finish(l, "");
      // Completed: this replica's part is done too; stopped or failed: the run did not complete.
      l.exit_code = done->value.rfind("completed", 0) == 0 ? 0 : 1;
      return l;
    }
    if (const auto before = e.get(run_key(run_id, "epochs"))) {
      l.took_over = true;
      if (l.previous.empty()) l.previous = "the leader of epoch " + before->value;
    }
    e.put(run_key(run_id, "epochs"), std::to_string(epoch));
    l.replicas = std::make_shared<ReplicaView>(e, replicas, who, epoch, me);
    spdlog::info("leading run {} (epoch {}){}", messages::run_id_text(run_id), epoch,
                 l.took_over ? ", taking over from " + l.previous : "");
  } catch (const std::invalid_argument& e) {
    spdlog::error("{}", e.what());
    l.exit_code = 2;
  } catch (const std::exception& e) {
    spdlog::error("etcd at {}: {}", o.etcd, e.what());
    l.exit_code = 1;
  }
  return l;
}

void fence_and_keep(Leading& l, const std::string& run_dir) {
  if (!l.lead) return;
  auto* lead = l.lead.get();
  const int64_t epoch = lead->epoch();
  model::set_write_fence(
      [lead, epoch, run_dir]() -> std::string {
        if (lead->holds()) return "";
        // A leader that cannot show its lease writes nothing; and one that skipped a write has
        // a gap in its run: it steps down, and a standby continues from the last checkpoint.
        spdlog::error(
            "stepping down as leader of {} (epoch {}): a write found the lease not confirmed "
            "within its TTL (etcd slow or unreachable, or this process was stopped)",
            run_dir, epoch);
        std::fflush(nullptr);
        _exit(4);
      },
      epoch);
  lead->keep([epoch, run_dir](const std::string& why) {
    // Another replica leads by now or will within the TTL: this one changes nothing more.
    spdlog::error("stepping down as leader of {} (epoch {}): {}", run_dir, epoch, why);
    std::fflush(nullptr);
    _exit(4);
  });
}

void finish(Leading& l, const std::string& how) {
  if (!l.lead) return;
  // Written only while the lease holds: a replaced leader does not end its successor's run.
  if (!how.empty() && l.lead->holds()) {
    try {
      l.lead->etcd().put(l.done_key, how + " under epoch " + std::to_string(l.lead->epoch()));
    } catch (const std::exception& e) {
      // Then a standby takes the run up from its last checkpoint: nothing is lost.
      spdlog::warn("etcd: the run's end was not recorded ({})", e.what());
    }
  }
  l.lead->resign();
}

int64_t newest_checkpoint_step(const std::string& run_dir) {
  const auto files = model::CheckpointDir((fs::path(run_dir) / "checkpoints").string()).list();
  if (files.empty()) return 0;
  const auto name = fs::path(files.front()).filename().string();  // step_XXXXXXXX.ckpt
  try {
    return std::stoll(name.substr(5));
  } catch (const std::exception&) {
    return 0;
  }
}

double drop_records_after(const std::string& run_dir, int64_t step) {
  return model::drop_records_after((fs::path(run_dir) / "metrics.jsonl").string(), step);
}

}  // namespace swarmrt::apps
