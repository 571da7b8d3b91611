#include "leader/takeover.hpp"

#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <cstdio>
#include <nlohmann/json.hpp>

#include "leader/fence.hpp"

namespace swarmrt::leader {

EtcdTls etcd_tls(const std::string& urls, const EtcdTls& given, const std::string& secret,
                 credential::TlsFiles& files) {
  if (!given.ca.empty() || !given.cert.empty() || !given.key.empty()) return given;
  if (urls.find("https://") == std::string::npos) return given;
  if (secret.empty())
    throw std::invalid_argument(
        "--etcd over https needs the cluster secret (SWARMRT_SECRET or --secret-file) to show "
        "etcd the cluster's certificate, or --etcd-ca/--etcd-cert/--etcd-key");
  files = credential::write_cluster_tls(secret, "swarmrt etcd client");
  return {files.ca, files.cert, files.key};
}

Leading stand_for_leader(const LeaderOptions& o, const std::string& run_id,
                         const std::string& fingerprint, const std::string& secret,
                         const std::string& address, const std::function<bool()>& give_up,
                         const DoorOpener& open_door) {
  Leading l;
  if (o.etcd.empty()) return l;
  if (run_id.empty()) {
    spdlog::error("--etcd needs --run-id: the replicas of one run find each other by it");
    l.exit_code = 2;
    return l;
  }
  try {
    Etcd etcd(o.etcd, etcd_tls(o.etcd, o.tls, secret, l.etcd_files.files));
    // The first replica to come records the run's config; every other must have the same.
    const auto config_key = run_key(run_id, "config");
    if (!etcd.create_if_absent(config_key, fingerprint, 0).won) {
      const auto held = etcd.get(config_key);
      if (held && held->value != fingerprint) {
        spdlog::error(
            "refused: run {} in etcd has another config (fingerprint {}, this replica's {}); "
            "a replica must be started with the run's config",
            run_id, held->value, fingerprint);
        l.exit_code = 3;
        return l;
      }
    }
    if (const auto done = etcd.get(run_key(run_id, "done"))) {
      spdlog::error("run {} is over ({}): nothing to lead", run_id, done->value);
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
    l.lead = std::make_unique<Leadership>(etcd, run_key(run_id, "leader"), who, o.lease_ttl_s);
    // Seen by `ctl nodes` on whichever replica leads, as long as this process holds its lease.
    const auto replicas = run_key(run_id, "replicas/");
    l.lead->announce(replicas + host + ":" + std::to_string(getpid()), me.dump());
    std::shared_ptr<void> door;
    const int64_t epoch = l.lead->campaign(give_up, [&](const std::string& holder) {
      spdlog::info("standby for run {}: {} leads; taking over within {} s of its lease lapsing",
                   run_id, holder, o.lease_ttl_s);
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
      spdlog::info("run {} ended under the previous leader ({}): nothing to lead", run_id,
                   done->value);
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
    spdlog::info("leading run {} (epoch {}){}", run_id, epoch,
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
  set_write_fence(
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

}  // namespace swarmrt::leader
