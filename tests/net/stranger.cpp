// A stranger on a swarm's ports: a program with no cluster credential and no swarmrt header,
// only CAF's public API and plain sockets, doing what the security test asks of it. It exits 0
// when every attempt was refused the way it must be, 1 (naming what got through) otherwise,
// and 2 on bad arguments.
//
//   stranger caf HOST PORT           plain BASP and anonymous TLS: must get no actor handle
//                                    (if it got one: exit, kill and stop messages, reported)
//   stranger basp HOST PORT          a raw 32-byte BASP header announcing a 1 GiB payload
//   stranger huge HOST PORT          16 connections: a prefix announcing 4 GiB, then 8 MiB
//   stranger idle HOST PORT N SECS   N connections held open without a byte for SECS
//   stranger slow HOST PORT SECS     one byte a second on one connection for SECS
//   stranger random HOST PORT        1 MiB of random bytes on each of 16 connections
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <caf/all.hpp>
#include <caf/io/all.hpp>
#include <caf/openssl/all.hpp>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

namespace {

int connect_to(const std::string& host, int port) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  inet_pton(AF_INET, host.c_str(), &a.sin_addr);
  if (fd < 0 || connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) {
    if (fd >= 0) close(fd);
    return -1;
  }
  return fd;
}

// Writes what it can; a peer that closed the connection ends it (that is a refusal).
size_t send_some(int fd, const void* p, size_t n) {
  size_t sent = 0;
  while (sent < n) {
    const ssize_t w = send(fd, static_cast<const char*>(p) + sent, n - sent, MSG_NOSIGNAL);
    if (w <= 0) break;
    sent += static_cast<size_t>(w);
  }
  return sent;
}

// Whether the peer closed the connection within `secs` (reading and dropping what it sends).
bool closed_within(int fd, int secs) {
  timeval tv{secs, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  char buf[4096];
  for (;;) {
    const ssize_t r = recv(fd, buf, sizeof(buf), 0);
    if (r == 0) return true;
    if (r < 0) return errno != EAGAIN && errno != EWOULDBLOCK;
  }
}

int caf_attempts(const std::string& host, int port, std::vector<bool> ways = {false, true}) {
  int failures = 0;
  for (bool tls : ways) {
    caf::actor_system_config cfg;
    cfg.load<caf::io::middleman>();
    if (tls) cfg.load<caf::openssl::manager>();  // no certificate: anonymous TLS
    cfg.set("middleman.connection-timeout", caf::timespan{std::chrono::seconds(3)});
    caf::actor_system sys{cfg};
    auto found = tls ? caf::openssl::remote_actor(sys, host, static_cast<uint16_t>(port))
                     : sys.middleman().remote_actor(host, static_cast<uint16_t>(port));
    const char* how = tls ? "anonymous TLS" : "plain BASP";
    if (!found) {
      std::printf("%s: no handle (%s)\n", how, sys.render(found.error()).c_str());
      continue;
    }
    ++failures;
    std::printf("GOT THROUGH: %s gave a handle to the published actor\n", how);
    // What a stranger with a handle did before: each is reported, all must change nothing.
    caf::scoped_actor self{sys};
    self->send(*found, caf::atom("stop"));
    self->send(*found, caf::atom("kill"), std::string("node"));
    self->send_exit(*found, caf::exit_reason::kill);
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
  }
  return failures == 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 4) {
    std::fprintf(stderr, "usage: stranger MODE HOST PORT [...]\n");
    return 2;
  }
  const std::string mode = argv[1], host = argv[2];
  const int port = std::atoi(argv[3]);
  if (mode == "caf") return caf_attempts(host, port);
  if (mode == "caf-plain") return caf_attempts(host, port, {false});
  if (mode == "caf-tls") return caf_attempts(host, port, {true});
  if (mode == "basp") {
    // BASP 0.17 header: operation, 2 padding bytes, flags, payload length (32 bits, network
    // order), operation data, source and destination actor ids: 32 bytes.
    unsigned char header[32] = {0};
    header[0] = 0;  // server handshake
    const uint32_t len = htonl(1u << 30);
    std::memcpy(header + 4, &len, 4);
    const int fd = connect_to(host, port);
    if (fd < 0) return std::printf("cannot connect\n"), 1;
    send_some(fd, header, sizeof(header));
    std::vector<char> zeros(1 << 20);
    size_t sent = 0;
    for (int i = 0; i < 64; ++i) sent += send_some(fd, zeros.data(), zeros.size());
    const bool closed = closed_within(fd, 10);
    close(fd);
    std::printf("basp: %zu payload bytes accepted, connection %s\n", sent,
                closed ? "closed by the peer" : "still open");
    return closed ? 0 : 1;
  }
  if (mode == "huge") {
    // 16 connections at once, each a frame chunk prefix announcing 4 GiB followed by 8 MiB (the
    // attack that grew a node by 110 MB when memory was committed for whatever was announced).
    // Whatever the layout, these bytes are no credential and must be refused unread.
    std::vector<std::thread> conns;
    std::atomic<int> closed{0};
    std::atomic<size_t> sent{0};
    for (int c = 0; c < 16; ++c)
      conns.emplace_back([&] {
        unsigned char prefix[64];
        std::memset(prefix, 0xff, sizeof(prefix));
        const int fd = connect_to(host, port);
        if (fd < 0) return;
        send_some(fd, prefix, sizeof(prefix));
        std::vector<char> zeros(1 << 20);
        for (int i = 0; i < 8; ++i) sent += send_some(fd, zeros.data(), zeros.size());
        closed += closed_within(fd, 10) ? 1 : 0;
        close(fd);
      });
    for (auto& t : conns) t.join();
    std::printf("huge: %zu bytes sent on 16 connections, %d closed by the peer\n", sent.load(),
                closed.load());
    return closed == 16 ? 0 : 1;
  }
  if (mode == "idle" && argc >= 6) {
    const int n = std::atoi(argv[4]), secs = std::atoi(argv[5]);
    std::vector<int> fds;
    for (int i = 0; i < n; ++i) {
      const int fd = connect_to(host, port);
      if (fd >= 0) fds.push_back(fd);
    }
    std::printf("idle: %zu of %d connections opened\n", fds.size(), n);
    std::fflush(stdout);
    std::this_thread::sleep_for(std::chrono::seconds(secs));
    int open = 0;
    for (int fd : fds) {
      open += !closed_within(fd, 0) ? 1 : 0;
      close(fd);
    }
    std::printf("idle: %d still open after %d s (each must be closed by the handshake timeout)\n",
                open, secs);
    return open == 0 ? 0 : 1;
  }
  if (mode == "slow" && argc >= 5) {
    const int secs = std::atoi(argv[4]);
    const int fd = connect_to(host, port);
    if (fd < 0) return std::printf("cannot connect\n"), 1;
    int written = 0;
    for (int i = 0; i < secs; ++i) {
      const char b = 'S';
      if (send_some(fd, &b, 1) != 1) break;
      ++written;
      std::this_thread::sleep_for(std::chrono::seconds(1));
    }
    const bool closed = closed_within(fd, 1);
    close(fd);
    std::printf("slow: %d bytes written before the end, connection %s\n", written,
                closed ? "closed" : "still open");
    return closed && written < secs ? 0 : 1;
  }
  if (mode == "random") {
    std::mt19937_64 rng(42);
    std::vector<uint64_t> noise((1 << 20) / 8);
    int refused = 0;
    for (int c = 0; c < 16; ++c) {
      for (auto& x : noise) x = rng();
      const int fd = connect_to(host, port);
      if (fd < 0) continue;
      send_some(fd, noise.data(), noise.size() * 8);
      refused += closed_within(fd, 10) ? 1 : 0;
      close(fd);
    }
    std::printf("random: %d of 16 connections closed by the peer\n", refused);
    return refused == 16 ? 0 : 1;
  }
  std::fprintf(stderr, "unknown mode or missing arguments: %s\n", mode.c_str());
  return 2;
}
