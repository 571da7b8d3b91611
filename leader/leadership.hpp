// A coordinator replica's claim to lead a run: one etcd key per run, held under a lease.
// The replica that creates the key leads; its epoch is the revision of that write, which every
// later leader's exceeds. The lease is renewed every third of its TTL on a thread of its own;
// when a renewal finds it expired (the process was frozen, or cut off from etcd past the TTL)
// the replica has been replaced and must step down.
//
// The fence: a leader may change the run (a metrics record, a checkpoint) only while `holds()`,
// i.e. while etcd confirmed its lease within the TTL, counted on the monotonic clock from when
// the renewal was sent. That clock runs on while a process is stopped, so a leader thawed after
// its lease lapsed is fenced at once, before its renewal thread even runs.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "leader/etcd.hpp"

namespace swarmrt::leader {

class Leadership {
 public:
  // `key`: the run's leader key; `value`: who this replica is (shown to the others).
  Leadership(Etcd etcd, std::string key, std::string value, int64_t ttl_s);
  ~Leadership();

  // Blocks until this replica leads, keeping its own lease alive while it waits; returns the
  // epoch, or 0 when `give_up()` turned true. `on_wait(holder)` is told each new leader it
  // waits behind. Throws EtcdError when etcd cannot be reached for a whole TTL.
  int64_t campaign(const std::function<bool()>& give_up,
                   const std::function<void(const std::string&)>& on_wait);
  // A key that says this replica is there, standby or leader: written under its lease each
  // time campaign() takes one, so it goes when the process does (or resigns). Call before
  // campaign().
  void announce(std::string key, std::string value);
  // Renews the lease from now on; `on_lost(why)` is called once, from the renewal thread,
  // when the lease is gone.
  void keep(std::function<void(const std::string&)> on_lost);
  bool holds() const;
  int64_t epoch() const { return epoch_; }
  int64_t ttl_s() const { return ttl_s_; }
  Etcd& etcd() { return etcd_; }
  // At the run's end: the key goes now, not a TTL later.
  void resign();

 private:
  bool renew();  // true while the lease lives; updates the fence
  void stop_renewing();
  Etcd etcd_;
  std::string key_, value_;
  std::string presence_key_, presence_value_;
  int64_t ttl_s_;
  int64_t lease_ = 0;
  int64_t epoch_ = 0;
  std::atomic<int64_t> confirmed_until_ns_{0};  // steady clock
  std::atomic<bool> stop_{false};
  std::mutex stop_mu_;  // with stop_cv_: resign() wakes the renewal thread at once
  std::condition_variable stop_cv_;
  std::thread thread_;
};

}  // namespace swarmrt::leader
