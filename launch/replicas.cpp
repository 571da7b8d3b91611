#include "launch/replicas.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <random>
#include <stdexcept>
#include <thread>

#include "credential/cluster_tls.hpp"
#include "credential/credential.hpp"
#include "leader/etcd.hpp"
#include "messages/run_id.hpp"

namespace swarmrt::launch {

uint16_t free_port(const std::string& host) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) throw std::runtime_error("no socket for a free port");
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = 0;
  if (::inet_pton(AF_INET, host.c_str(), &a.sin_addr) != 1)
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(a);
  const bool ok = ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0 &&
                  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0;
  ::close(fd);
  if (!ok) throw std::runtime_error("no free port on " + host);
  return ntohs(a.sin_port);
}

std::string random_run_id() {
  std::random_device rd;
  uint64_t id = 0;
  while (id == 0) id = (static_cast<uint64_t>(rd()) << 32) | rd();
  return messages::run_id_text(id);
}

PrivateEtcd start_private_etcd(const std::string& data_dir, const std::string& secret) {
  std::error_code ec;
  const std::string tls_dir = data_dir + "-tls";
  std::filesystem::remove_all(data_dir, ec);
  std::filesystem::remove_all(tls_dir, ec);
  std::filesystem::create_directories(data_dir);
  std::filesystem::permissions(data_dir, std::filesystem::perms::owner_all);  // etcd wants 0700
  const auto files = credential::write_cluster_tls(secret, "swarmrt private etcd",
                                                   {"127.0.0.1", "localhost"}, tls_dir);
  const auto client = std::to_string(free_port("127.0.0.1"));
  const auto peer = std::to_string(free_port("127.0.0.1"));
  PrivateEtcd out;
  out.url = "https://127.0.0.1:" + client;
  out.client = {files.ca, files.cert, files.key};
  const std::string peer_url = "https://127.0.0.1:" + peer;
  out.child = std::make_unique<Child>(
      "etcd",
      std::vector<std::string>{
          "etcd", "--name", "swarmrt", "--data-dir", data_dir, "--logger", "zap", "--log-outputs",
          data_dir + ".log", "--listen-client-urls", out.url, "--advertise-client-urls", out.url,
          "--listen-peer-urls", peer_url, "--initial-advertise-peer-urls", peer_url,
          "--initial-cluster", "swarmrt=" + peer_url,
          // Clients and peers alike must show a certificate of the cluster CA.
          "--client-cert-auth", "--trusted-ca-file", files.ca, "--cert-file", files.cert,
          "--key-file", files.key, "--peer-client-cert-auth", "--peer-trusted-ca-file", files.ca,
          "--peer-cert-file", files.cert, "--peer-key-file", files.key});
  leader::Etcd etcd(out.url, out.client);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  std::string last;
  for (;;) {
    if (!out.child->running())
      throw std::runtime_error("etcd exited at once (is Debian's etcd-server installed?)");
    try {
      etcd.get("/swarmrt/ping");
      return out;
    } catch (const leader::EtcdError& e) {
      last = e.what();
    }
    if (std::chrono::steady_clock::now() > deadline)
      throw std::runtime_error("the private etcd did not answer within 20 s: " + last);
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
}

std::string run_outcome(const PrivateEtcd& private_etcd, const std::string& run_id) {
  try {
    leader::Etcd etcd(private_etcd.url, private_etcd.client);
    if (auto done = etcd.get("/swarmrt/runs/" + run_id + "/done")) return done->value;
  } catch (const std::exception&) {
  }
  return "";
}

}  // namespace swarmrt::launch
