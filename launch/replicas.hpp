// launch --local N --coordinators K: K coordinator replicas of one run (coordinator --etcd)
// on this machine, and the private etcd they elect their leader in (data under the run
// directory, client and peer ports free on loopback, stopped with the run).
#pragma once

#include <memory>
#include <string>

#include "launch/process.hpp"
#include "leader/etcd.hpp"

namespace swarmrt::launch {

struct PrivateEtcd {
  std::unique_ptr<Child> child;
  std::string url;         // https://127.0.0.1:PORT
  leader::EtcdTls client;  // how this process reaches it
};
// Starts etcd with its data in `data_dir` (made afresh), its log in `data_dir`.log and its
// certificates in `data_dir`-tls, and waits until it answers (20 s). Both its ports take only
// mutual TLS with the cluster CA derived from `secret` (no open port: on loopback too, only
// holders of the secret reach the run's leader key); the coordinators trust it by the same
// secret. Throws std::runtime_error naming what failed.
PrivateEtcd start_private_etcd(const std::string& data_dir, const std::string& secret);
// A TCP port on `host` nothing listens on now.
uint16_t free_port(const std::string& host);
std::string random_run_id();
// How the run ended as its last leader recorded it in etcd ("completed under epoch 7"); empty
// when nothing was recorded or etcd does not answer.
std::string run_outcome(const PrivateEtcd& etcd, const std::string& run_id);

}  // namespace swarmrt::launch
