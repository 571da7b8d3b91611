#include "leader/leadership.hpp"

#include <spdlog/spdlog.h>

namespace swarmrt::leader {
namespace {

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace

Leadership::Leadership(Etcd etcd, std::string key, std::string value, int64_t ttl_s)
    : etcd_(std::move(etcd)), key_(std::move(key)), value_(std::move(value)), ttl_s_(ttl_s) {}

Leadership::~Leadership() {
  stop_renewing();
}

void Leadership::stop_renewing() {
  {
    std::lock_guard<std::mutex> lock(stop_mu_);
    stop_ = true;
  }
  stop_cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

bool Leadership::renew() {
  // Sent before etcd renews, so etcd's own expiry is at least this plus the TTL.
  const int64_t sent = now_ns();
  if (etcd_.keepalive(lease_) <= 0) {
    confirmed_until_ns_ = 0;
    return false;
  }
  confirmed_until_ns_ = sent + ttl_s_ * 1'000'000'000;
  return true;
}

bool Leadership::holds() const {
  return epoch_ != 0 && now_ns() < confirmed_until_ns_.load();
}

int64_t Leadership::campaign(const std::function<bool()>& give_up,
                             const std::function<void(const std::string&)>& on_wait) {
  // A standby asks often (two small requests): it takes over within this of the lapse.
  const auto period =
      std::min(std::chrono::milliseconds(ttl_s_ * 1000 / 3), std::chrono::milliseconds(250));
  auto unreachable_since = std::chrono::steady_clock::now();
  std::string waiting_behind;
  int64_t holder_revision = 0;
  for (;;) {
    if (give_up && give_up()) return 0;
    try {
      // A lease of its own (again, if it lapsed while this replica waited).
      if (lease_ == 0 || !renew()) {
        lease_ = etcd_.grant(ttl_s_);
        if (!presence_key_.empty()) etcd_.put(presence_key_, presence_value_, lease_);
      }
      const int64_t sent = now_ns();
      const auto created = etcd_.create_if_absent(key_, value_, lease_);
      if (created.won) {
        epoch_ = created.revision;
        confirmed_until_ns_ = sent + ttl_s_ * 1'000'000'000;
        return epoch_;
      }
      if (created.holder.create_revision != holder_revision) {
        holder_revision = created.holder.create_revision;
        waiting_behind = created.holder.value;
        if (on_wait) on_wait(waiting_behind);
      }
      unreachable_since = std::chrono::steady_clock::now();
    } catch (const EtcdError& e) {
      if (std::chrono::steady_clock::now() - unreachable_since > std::chrono::seconds(ttl_s_))
        throw;
      spdlog::warn("etcd: {}; trying again", e.what());
    }
    std::this_thread::sleep_for(period);
  }
}

void Leadership::announce(std::string key, std::string value) {
  presence_key_ = std::move(key);
  presence_value_ = std::move(value);
}

void Leadership::keep(std::function<void(const std::string&)> on_lost) {
  thread_ = std::thread([this, on_lost = std::move(on_lost)] {
    const auto period = std::chrono::milliseconds(ttl_s_ * 1000 / 3);
    std::string why;
    while (!stop_) {
      {
        std::unique_lock<std::mutex> lock(stop_mu_);
        if (stop_cv_.wait_for(lock, period, [this] { return stop_.load(); })) return;
      }
      try {
        if (renew()) continue;
        why = "etcd says the lease of epoch " + std::to_string(epoch_) + " has expired";
      } catch (const EtcdError& e) {
        if (holds()) continue;  // renewed within the TTL: try again
        why = "no renewal of the lease within its " + std::to_string(ttl_s_) + " s TTL (" +
              e.what() + ")";
      }
      break;
    }
    if (!stop_ && on_lost) on_lost(why);
  });
}

void Leadership::resign() {
  // At once: the renewal thread no longer sleeps out its third of the TTL first.
  stop_renewing();
  if (lease_ == 0) return;
  try {
    etcd_.revoke(lease_);
  } catch (const EtcdError& e) {
    spdlog::warn("etcd: the leader's lease was not revoked ({}); it lapses in {} s", e.what(),
                 ttl_s_);
  }
  lease_ = 0;
  epoch_ = 0;
}

}  // namespace swarmrt::leader
