// The parts of etcd's v3 API a coordinator's leadership needs, over etcd's JSON gateway
// (POST /v3/kv/*, /v3/lease/*; keys and values base64 in JSON). Every call is bounded (2 s to
// connect, 3 s to answer) and tries the cluster's members in turn, so one member down costs
// one timeout, not the call. A call no member answers throws EtcdError naming each member's
// failure. The connection to a member is kept open between calls (a standby asks every
// 250 ms: one TLS handshake per call would be most of its cost) and opened again after a
// failure; calls from several threads on one object take turns.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace swarmrt::leader {

struct EtcdError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// https members: the client proves itself with `cert`/`key` and checks the member against
// `ca` (PEM files; empty: the system's roots and no client certificate).
struct EtcdTls {
  std::string ca, cert, key;
};

struct KeyValue {
  std::string value;
  int64_t create_revision = 0;
  int64_t lease = 0;
};

class Etcd {
 public:
  // "http://HOST:PORT[,...]" or https; throws std::invalid_argument naming a malformed URL.
  explicit Etcd(const std::string& urls, EtcdTls tls = {});
  // A copy talks to the same members over connections of its own.
  Etcd(const Etcd& o);
  Etcd& operator=(const Etcd& o);
  Etcd(Etcd&& o) noexcept;
  Etcd& operator=(Etcd&& o) noexcept;
  ~Etcd();

  int64_t grant(int64_t ttl_s);
  // The lease's remaining TTL in seconds after renewing it; 0 when it has expired.
  int64_t keepalive(int64_t lease);
  void revoke(int64_t lease);

  // Creates `key` = `value` under `lease` if no such key exists. Won: the transaction's
  // revision (a number every later write of etcd exceeds). Lost: the holder's value and the
  // key's create revision.
  struct Created {
    bool won = false;
    int64_t revision = 0;
    KeyValue holder;
  };
  Created create_if_absent(const std::string& key, const std::string& value, int64_t lease);
  std::optional<KeyValue> get(const std::string& key);
  // Every key that starts with `prefix`, in key order.
  std::vector<std::pair<std::string, KeyValue>> get_prefix(const std::string& prefix);
  void put(const std::string& key, const std::string& value, int64_t lease = 0);
  const std::vector<std::string>& members() const { return urls_; }

 private:
  std::string post(const std::string& path, const std::string& body);
  std::vector<std::string> urls_;
  EtcdTls tls_;
  size_t next_ = 0;    // the member that answered last is asked first
  struct Connections;  // one open client per member, and the mutex calls take turns on
  std::unique_ptr<Connections> conn_;
};

}  // namespace swarmrt::leader
