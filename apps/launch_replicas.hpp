// launch --local N --coordinators K: K coordinator replicas of one run (coordinator --etcd)
// on this machine, and the private etcd they elect their leader in (data under the run
// directory, client and peer ports free on loopback, stopped with the run).
#pragma once

#include <memory>
#include <string>

#include "apps/process.hpp"

namespace swarmrt::apps {

struct PrivateEtcd {
  std::unique_ptr<Child> child;
  std::string url;
};
// Starts etcd with its data in `data_dir` (made afresh) and its log in `data_dir`.log, and
// waits until it answers (20 s);
// throws std::runtime_error naming what failed.
PrivateEtcd start_private_etcd(const std::string& data_dir);
// A TCP port on `host` nothing listens on now.
uint16_t free_port(const std::string& host);
std::string random_run_id();
// How the run ended as its last leader recorded it in etcd ("completed under epoch 7"); empty
// when nothing was recorded or etcd does not answer.
std::string run_outcome(const std::string& etcd_url, const std::string& run_id);

}  // namespace swarmrt::apps
