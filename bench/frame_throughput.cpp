// Loopback throughput of tensor frames between two processes: swarmrt's chunked frames over
// CAF's middleman (BASP over TCP) against a plain TCP socket copy of the same bytes. The
// receiver is a separate process (this binary, re-executed with --serve). Both paths keep
// four frames in flight and count a frame when the receiver acknowledges it; the CAF receiver
// rebuilds the tensors from the chunks, the TCP receiver only reads the bytes.
// Usage: bench_frame_throughput SIZE_MIB FRAMES bulk|bulk-tls|caf|comm|tcp   -> one JSON line
//   bulk: swarmrt's frame link (bytes on a TCP link of their own, no CAF message; the default
//   between processes), plaintext after the credential handshake; bulk-tls: the same inside
//   TLS 1.3 (transport.encrypt = "on"); caf: the same chunks inside CAF messages; comm: the tensors
//   on a TCP communicator link (transport.links = "comm"; acknowledged on the link, headers not
//   counted); tcp: the plain socket copy.
#include <ATen/ATen.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>
#include <caf/all.hpp>
#include <caf/io/all.hpp>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>

#include "actors/runtime/runtime.hpp"
#include "credential/credential.hpp"
#include "messages/frame.hpp"
#include "transport/bulk.hpp"
#include "transport/channel.hpp"
#include "transport/comm.hpp"
#include "transport/transport.hpp"

using namespace swarmrt;
using namespace swarmrt::atoms;
using Clock = std::chrono::steady_clock;

namespace {

const int kWindow =
    std::getenv("SWARMRT_BENCH_WINDOW") ? std::atoi(std::getenv("SWARMRT_BENCH_WINDOW")) : 4;

// Seconds to send `frames` frames with at most kWindow of them not acknowledged, after one
// warm-up frame and its ack (connection and allocations). Every path is timed by this loop.
template <class Send, class Ack>
double windowed_seconds(int frames, Send send, Ack ack) {
  send();
  ack();
  const auto start = Clock::now();
  int sent = 0, acked = 0;
  while (sent < std::min(kWindow, frames)) send(), ++sent;
  while (acked < frames) {
    ack(), ++acked;
    if (sent < frames) send(), ++sent;
  }
  return std::chrono::duration<double>(Clock::now() - start).count();
}

void configure(caf::actor_system_config& cfg) {
  actors::configure_actor_system(cfg);
  cfg.load<caf::io::middleman>();
}

// Both processes hold the same credential (the frame link and the communicator refuse any
// other); bulk-tls asks for TLS on the frame link, bulk asks for none (loopback).
void hold_the_credential() {
  credential::set_cluster_secret("frame-throughput-bench");
  if (const char* e = std::getenv("SWARMRT_BENCH_ENCRYPT"))
    transport::set_encrypt_mode(config::parse_choice<config::Encrypt>(e));
}

struct receiver_state {
  transport::ChunkReceiver chunks;
  int left = 0;
  caf::actor sender;  // who to acknowledge frames on the link to (they name no sender)
};

caf::behavior receiver(caf::stateful_actor<receiver_state>* self, int frames) {
  self->state.left = frames;
  transport::take_frames_directly(self);
  auto ack = [=](const messages::Frame& f, const caf::actor& to) {
    self->send(to ? to : self->state.sender, done_atom::value,
               static_cast<uint64_t>(f.tensors.at(0).numel()));
    if (--self->state.left == 0) self->quit();
  };
  return {
      [=](join_atom) {
        self->state.sender = caf::actor_cast<caf::actor>(self->current_sender());
        return true;
      },
      [=](chunk_atom, const std::vector<uint8_t>& chunk) {
        auto done = self->state.chunks.add(chunk, "bench receiver");
        if (done) ack(done->frame, caf::actor_cast<caf::actor>(self->current_sender()));
      },
      [=](transport::bulk_atom, uint64_t id) {
        if (auto d = transport::claim_bulk(self, id)) ack(d->frame, d->sender);
      },
      [=](transport::bulk_ready_atom, uint64_t id) {
        if (auto d = transport::take_bulk(id)) ack(d->frame, d->sender);
      },
  };
}

int serve_caf(int frames) {
  caf::actor_system_config cfg;
  configure(cfg);
  caf::actor_system sys{cfg};
  auto r = sys.spawn(receiver, frames);
  auto port = sys.middleman().publish(r, 0, "127.0.0.1", true);
  if (!port) return 1;
  std::printf("%u %s\n", *port, transport::start_bulk_server("127.0.0.1").c_str());
  std::fflush(stdout);
  sys.await_all_actors_done();
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  std::fflush(nullptr);
  _exit(0);
}

bool read_all(int fd, void* buf, size_t n) {
  auto* p = static_cast<char*>(buf);
  while (n > 0) {
    const ssize_t r = read(fd, p, n);
    if (r <= 0) return false;
    p += r, n -= static_cast<size_t>(r);
  }
  return true;
}

bool write_all(int fd, const void* buf, size_t n) {
  const auto* p = static_cast<const char*>(buf);
  while (n > 0) {
    const ssize_t r = write(fd, p, n);
    if (r <= 0) return false;
    p += r, n -= static_cast<size_t>(r);
  }
  return true;
}

int serve_tcp(int frames) {
  int s = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (bind(s, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0 || listen(s, 1) != 0) return 1;
  socklen_t len = sizeof(a);
  getsockname(s, reinterpret_cast<sockaddr*>(&a), &len);
  std::printf("%u\n", ntohs(a.sin_port));
  std::fflush(stdout);
  int c = accept(s, nullptr, nullptr);
  std::vector<char> buf;
  for (int i = 0; i < frames; ++i) {
    uint64_t n = 0;
    if (!read_all(c, &n, sizeof(n))) return 1;
    buf.resize(n);
    if (!read_all(c, buf.data(), n)) return 1;
    const char ack = 1;
    if (!write_all(c, &ack, 1)) return 1;
  }
  close(c);
  close(s);
  return 0;
}

// Rank 1 of the communicator `id`: receives `frames` tensors of `mib` MiB, acknowledging each.
int serve_comm(int frames, int mib, const std::string& id) {
  auto comm = transport::join_comm("tcp", std::vector<uint8_t>(id.begin(), id.end()), 2, 1, {});
  const auto meta = messages::meta_of(at::empty({static_cast<int64_t>(mib) << 18}));
  const auto ack = at::ones({1});
  for (int i = 0; i < frames; ++i) {
    comm->recv(meta, 0);
    comm->send(ack, 0);
  }
  // The last acknowledgement must leave before the communicator closes.
  comm->recv(messages::meta_of(ack), 0);
  return 0;
}

double run_comm(const char* self_path, const at::Tensor& t, int frames, int mib) {
  auto [comm, id] = transport::create_comm("tcp", 2, {});
  const pid_t pid = fork();
  if (pid == 0) {
    const std::string n = std::to_string(frames + 1), m = std::to_string(mib);
    const std::string text(id.begin(), id.end());
    execl(self_path, self_path, "--serve-comm", n.c_str(), m.c_str(), text.c_str(), nullptr);
    _exit(127);
  }
  const auto ack_meta = messages::meta_of(at::ones({1}));
  auto send = [&] { comm->send(t, 1); };
  auto ack = [&] { comm->recv(ack_meta, 1); };
  const double secs = windowed_seconds(frames, send, ack);
  comm->send(at::ones({1}), 1);
  int status;
  waitpid(pid, &status, 0);
  return secs;
}

// Starts this binary as the receiver and returns its pid and port.
struct Server {
  pid_t pid;
  uint16_t port;
  std::string bulk;
};
Server start_server(const char* self_path, const std::string& kind, int frames) {
  int p[2];
  if (pipe(p) != 0) std::exit(1);
  const pid_t pid = fork();
  if (pid == 0) {
    dup2(p[1], STDOUT_FILENO);
    close(p[0]);
    close(p[1]);
    const std::string n = std::to_string(frames);
    execl(self_path, self_path, "--serve", kind.c_str(), n.c_str(), nullptr);
    _exit(127);
  }
  close(p[1]);
  char line[128] = {0};
  size_t got = 0;
  while (got < sizeof(line) - 1 && read(p[0], line + got, 1) == 1 && line[got] != '\n') ++got;
  close(p[0]);
  const std::string text(line, got);
  const auto space = text.find(' ');
  return {pid, static_cast<uint16_t>(std::atoi(line)),
          space == std::string::npos ? std::string() : text.substr(space + 1)};
}

// `bulk`: frames on swarmrt's own TCP link (micro-batch frames, delivered by the link's reader
// thread); otherwise as chunks inside CAF messages.
double run_caf(const char* self_path, const at::Tensor& t, int frames, bool bulk) {
  auto [pid, port, endpoint] = start_server(self_path, "caf", frames + 1);
  caf::actor_system_config cfg;
  configure(cfg);
  caf::actor_system sys{cfg};
  auto remote = sys.middleman().remote_actor("127.0.0.1", port);
  if (!remote) std::exit(1);
  caf::scoped_actor self{sys};
  messages::MicroBatchHeader h;
  h.samples = 1;
  auto frame = messages::make_frame(h, {t});
  const char* chunk_env = std::getenv("SWARMRT_BENCH_CHUNK_KIB");
  transport::ChunkTransport chunks(chunk_env ? size_t(std::atoi(chunk_env)) << 10
                                             : messages::kDefaultMaxChunk);
  transport::BulkTransport link;
  if (bulk) transport::register_endpoint(remote->node(), endpoint);
  transport::Transport& via = bulk ? static_cast<transport::Transport&>(link) : chunks;
  // Micro-batch frames on the link name no sender: the receiver learns whom to acknowledge.
  self->request(*remote, caf::infinite, join_atom::value)
      .receive([](bool) {}, [](const caf::error&) { std::exit(1); });
  auto send = [&] { via.send(self.ptr(), *remote, messages::FrameKind::microbatch, frame); };
  auto ack = [&] { self->receive([](done_atom, uint64_t) {}); };
  const double secs = windowed_seconds(frames, send, ack);
  int status;
  waitpid(pid, &status, 0);
  return secs;
}

double run_tcp(const char* self_path, const at::Tensor& t, int frames) {
  auto [pid, port, unused] = start_server(self_path, "tcp", frames + 1);
  int s = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(port);
  if (connect(s, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) std::exit(1);
  int one = 1;
  setsockopt(s, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  const uint64_t n = static_cast<uint64_t>(t.numel()) * t.element_size();
  auto send = [&] {
    write_all(s, &n, sizeof(n));
    write_all(s, t.data_ptr(), n);
  };
  auto ack = [&] {
    char c;
    read_all(s, &c, 1);
  };
  // The socket buffer holds what is in flight; a blocking write of a whole frame while the
  // receiver waits for us to read acks cannot deadlock, since the receiver reads frames whole.
  const double secs = windowed_seconds(frames, send, ack);
  close(s);
  int status;
  waitpid(pid, &status, 0);
  return secs;
}

}  // namespace

int main(int argc, char** argv) {
  hold_the_credential();
  if (argc == 5 && std::string(argv[1]) == "--serve-comm")
    return serve_comm(std::atoi(argv[2]), std::atoi(argv[3]), argv[4]);
  if (argc == 4 && std::string(argv[1]) == "--serve")
    return std::string(argv[2]) == "caf" ? serve_caf(std::atoi(argv[3]))
                                         : serve_tcp(std::atoi(argv[3]));
  if (argc != 4) {
    std::fprintf(stderr, "usage: %s SIZE_MIB FRAMES bulk|bulk-tls|caf|comm|tcp\n", argv[0]);
    return 2;
  }
  const int mib = std::atoi(argv[1]), frames = std::atoi(argv[2]);
  const std::string path = argv[3];
  // The server process is this one re-executed: it inherits the choice.
  if (path == "bulk-tls") {
    setenv("SWARMRT_BENCH_ENCRYPT", "on", 1);
    hold_the_credential();
  }
  const auto t = at::rand({static_cast<int64_t>(mib) << 18});  // mib MiB of float32
  const double secs = path == "tcp"    ? run_tcp("/proc/self/exe", t, frames)
                      : path == "comm" ? run_comm("/proc/self/exe", t, frames, mib)
                                       : run_caf("/proc/self/exe", t, frames, path != "caf");
  const double bytes = static_cast<double>(frames) * static_cast<double>(mib) * (1 << 20);
  std::printf(
      "{\"path\":\"%s\",\"size_mib\":%d,\"frames\":%d,\"seconds\":%.6f,\"mib_per_s\":%.1f}\n",
      path.c_str(), mib, frames, secs, bytes / secs / (1 << 20));
  return 0;
}
