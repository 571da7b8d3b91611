#include "transport/tcp_comm.hpp"

#include <ATen/ATen.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <spdlog/spdlog.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <random>
#include <sstream>
#include <thread>

#include "credential/credential.hpp"
#include "transport/buffer_pool.hpp"

namespace swarmrt::transport {
namespace {

using Clock = std::chrono::steady_clock;

constexpr uint32_t kHelloMagic = 0x4d435753;   // "SWCM": a rank joining
constexpr uint32_t kTensorMagic = 0x54435753;  // "SWCT": a tensor follows
constexpr const char* kIdPrefix = "swarmrt-tcp-comm 2 ";
constexpr int64_t kHandshakeMs = 5000;  // a connection proves the cluster credential in this

// A joiner's first message on each of its two links.
enum Direction : uint32_t { kToRoot = 0, kFromRoot = 1 };
struct Hello {
  uint32_t magic;
  uint32_t rank;
  uint64_t token;
  uint32_t direction;
  uint32_t reserved;
};
struct Prelude {
  uint32_t magic;
  uint32_t dtype;
  uint64_t bytes;
};

Clock::time_point after(double seconds) {
  return Clock::now() + std::chrono::microseconds(static_cast<int64_t>(seconds * 1e6));
}

std::chrono::milliseconds millis(double seconds) {
  return std::chrono::milliseconds(static_cast<int64_t>(seconds * 1e3));
}

void no_delay(int fd) {
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

addrinfo* resolve(const std::string& host, uint16_t port, bool passive) {
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  if (passive) hints.ai_flags = AI_PASSIVE;
  addrinfo* res = nullptr;
  const int rc = ::getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &res);
  if (rc != 0 || !res)
    throw CommError("tcp communicator: cannot resolve '" + host + "': " + ::gai_strerror(rc));
  return res;
}

}  // namespace

TcpComm::TcpComm(int ranks, const CommOptions& options)
    : ranks_(ranks), rank_(0), timeout_s_(options.timeout_s), in_(ranks), out_(ranks) {
  if (ranks < 1) throw CommError("tcp communicator: ranks must be >= 1");
  token_ = (static_cast<uint64_t>(std::random_device{}()) << 32) ^ std::random_device{}();
  addrinfo* res = resolve(options.host, 0, true);
  listen_fd_ = ::socket(res->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  int one = 1;
  if (listen_fd_ >= 0) ::setsockopt(listen_fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  const bool ok = listen_fd_ >= 0 && ::bind(listen_fd_, res->ai_addr, res->ai_addrlen) == 0 &&
                  ::listen(listen_fd_, ranks) == 0;
  ::freeaddrinfo(res);
  if (!ok) {
    const std::string why = std::strerror(errno);
    if (listen_fd_ >= 0) ::close(listen_fd_);
    throw CommError("tcp communicator: cannot listen on " + options.host + ": " + why);
  }
  sockaddr_in addr{};
  socklen_t len = sizeof(addr);
  ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&addr), &len);
  endpoint_ = options.host + " " + std::to_string(ntohs(addr.sin_port));
  setup_ = std::thread([this] { accept_ranks(); });
  writer_ = std::thread([this] { write_loop(); });
}

TcpComm::TcpComm(const std::vector<uint8_t>& id, int ranks, int rank, const CommOptions& options)
    : ranks_(ranks), rank_(rank), timeout_s_(options.timeout_s), in_(ranks), out_(ranks) {
  const std::string text(id.begin(), id.end());
  const std::string prefix = kIdPrefix;
  std::string host;
  unsigned port = 0;
  std::string token_hex;
  if (text.compare(0, prefix.size(), prefix) == 0) {
    std::istringstream in(text.substr(prefix.size()));
    in >> host >> port >> token_hex;
  }
  if (host.empty() || port == 0 || port > 65535 || token_hex.empty())
    throw CommError("tcp communicator: malformed id of " + std::to_string(id.size()) + " bytes");
  if (rank < 1 || rank >= ranks)
    throw CommError("tcp communicator: rank " + std::to_string(rank) + " of " +
                    std::to_string(ranks) + " cannot join (rank 0 creates it)");
  token_ = std::stoull(token_hex, nullptr, 16);
  endpoint_ = host + " " + std::to_string(port);
  setup_ = std::thread([this, host, port] { connect_to_root(host, static_cast<uint16_t>(port)); });
  writer_ = std::thread([this] { write_loop(); });
}

TcpComm::~TcpComm() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
    for (auto* links : {&in_, &out_})
      for (auto& l : *links)
        if (l) l->shutdown();
  }
  cv_.notify_all();
  if (setup_.joinable()) setup_.join();
  if (writer_.joinable()) writer_.join();
  if (listen_fd_ >= 0) ::close(listen_fd_);
}

std::vector<uint8_t> TcpComm::id() const {
  char hex[17];
  std::snprintf(hex, sizeof(hex), "%016llx", static_cast<unsigned long long>(token_));
  const std::string text = kIdPrefix + endpoint_ + " " + hex;
  return std::vector<uint8_t>(text.begin(), text.end());
}

int TcpComm::encrypted_links() const {
  std::lock_guard<std::mutex> lock(mu_);
  int n = 0;
  for (auto* links : {&in_, &out_})
    for (auto& l : *links) n += l && l->encrypted() ? 1 : 0;
  return n;
}

void TcpComm::fail(const std::string& why) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (error_.empty()) error_ = why;
  }
  cv_.notify_all();
}

void TcpComm::accept_ranks() {
  const auto deadline = after(timeout_s_);
  const int wanted = 2 * (ranks_ - 1);  // a link each way per joining rank
  int joined = 0;
  while (joined < wanted) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (stopping_) return;
    }
    if (Clock::now() >= deadline) {
      fail("tcp communicator: " + std::to_string(joined / 2) + " of " + std::to_string(ranks_ - 1) +
           " ranks joined within " + std::to_string(timeout_s_) + " s");
      return;
    }
    pollfd pfd{listen_fd_, POLLIN, 0};
    if (::poll(&pfd, 1, 100) <= 0) continue;
    const int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) {
      // Out of descriptors: wait a little instead of spinning; the deadline still holds.
      if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM)
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
      continue;
    }
    no_delay(fd);
    // The cluster credential first (credential/credential.hpp), then the communicator's token.
    auto link = std::make_unique<Channel>(fd, false, std::chrono::milliseconds(kHandshakeMs));
    if (!link->ok()) {
      spdlog::warn("tcp communicator: refused a connection: {}", link->error());
      continue;
    }
    Hello h{};
    link->set_read_timeout(millis(std::min(5.0, timeout_s_)));
    if (!link->read_all(&h, sizeof(h))) {
      spdlog::warn("tcp communicator: a connection sent no hello; dropped");
      continue;
    }
    link->set_read_timeout(millis(timeout_s_));
    std::lock_guard<std::mutex> lock(mu_);
    auto* slot = h.direction == kToRoot ? &in_ : h.direction == kFromRoot ? &out_ : nullptr;
    if (h.magic != kHelloMagic || h.token != token_ || h.rank < 1 ||
        h.rank >= static_cast<uint32_t>(ranks_) || !slot || (*slot)[h.rank]) {
      spdlog::warn("tcp communicator: refused a connection (not a rank of this communicator)");
      continue;
    }
    (*slot)[h.rank] = std::move(link);
    ++joined;
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    ready_ = true;
  }
  cv_.notify_all();
}

void TcpComm::connect_to_root(const std::string& host, uint16_t port) {
  const auto deadline = after(timeout_s_);
  const std::string root = host + ":" + std::to_string(port);
  std::string why = "timed out";
  for (const uint32_t direction : {kToRoot, kFromRoot}) {
    std::unique_ptr<Channel> link;
    while (!link) {
      {
        std::lock_guard<std::mutex> lock(mu_);
        if (stopping_) return;
      }
      if (Clock::now() >= deadline) {
        fail("tcp communicator: cannot reach rank 0 at " + root + ": " + why);
        return;
      }
      addrinfo* res = nullptr;
      try {
        res = resolve(host, port, false);
      } catch (const CommError& e) {
        fail(e.what());
        return;
      }
      const int fd = ::socket(res->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
      // A connect to an unreachable host gives up after a second and is tried again.
      timeval tv{1, 0};
      if (fd >= 0) ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
      const bool connected = fd >= 0 && ::connect(fd, res->ai_addr, res->ai_addrlen) == 0;
      ::freeaddrinfo(res);
      if (!connected) {
        why = std::strerror(errno);
        if (fd >= 0) ::close(fd);
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
        continue;
      }
      timeval none{0, 0};
      ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &none, sizeof(none));
      no_delay(fd);
      link = std::make_unique<Channel>(fd, true, std::chrono::milliseconds(kHandshakeMs));
      if (!link->ok()) {
        // Another credential does not change by trying again.
        fail("tcp communicator: rank 0 at " + root + " refused: " + link->error());
        return;
      }
      const Hello h{kHelloMagic, static_cast<uint32_t>(rank_), token_, direction, 0};
      if (!link->write_all(&h, sizeof(h))) {
        why = "the connection broke during the hello";
        link.reset();
      }
    }
    link->set_read_timeout(millis(timeout_s_));
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_) return;
    (direction == kToRoot ? out_ : in_)[0] = std::move(link);
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    ready_ = true;
  }
  cv_.notify_all();
}

void TcpComm::write_loop() {
  for (;;) {
    Channel* link = nullptr;
    int peer = 0;
    at::Tensor t;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] { return stopping_ || !error_.empty() || (ready_ && !queue_.empty()); });
      if (stopping_ || !error_.empty()) return;
      peer = queue_.front().first;
      t = std::move(queue_.front().second);
      queue_.pop_front();
      link = out_[peer].get();
    }
    const Prelude p{kTensorMagic, static_cast<uint32_t>(t.scalar_type()),
                    static_cast<uint64_t>(t.numel()) * t.element_size()};
    if (!link->write_all(&p, sizeof(p)) || !link->write_all(t.data_ptr(), p.bytes)) {
      fail("tcp communicator: sending to rank " + std::to_string(peer) +
           " failed: the connection broke");
      return;
    }
  }
}

Channel& TcpComm::link_for(int peer, bool sending) {
  if (peer < 0 || peer >= ranks_ || peer == rank_ || (rank_ != 0 && peer != 0))
    throw CommError("tcp communicator: rank " + std::to_string(rank_) + " has no link to rank " +
                    std::to_string(peer));
  std::unique_lock<std::mutex> lock(mu_);
  // A little past the join's own deadline, so that a failed join reports why it failed.
  cv_.wait_until(lock, after(timeout_s_ + 1),
                 [&] { return ready_ || stopping_ || !error_.empty(); });
  if (!error_.empty()) throw CommError(error_);
  if (stopping_) throw CommError("tcp communicator: closed");
  if (!ready_)
    throw CommError("tcp communicator: not connected within " + std::to_string(timeout_s_) + " s");
  return *(sending ? out_ : in_)[peer];
}
void TcpComm::send(const at::Tensor& t, int peer) {
  if (peer < 0 || peer >= ranks_ || peer == rank_ || (rank_ != 0 && peer != 0))
    throw CommError("tcp communicator: rank " + std::to_string(rank_) + " has no link to rank " +
                    std::to_string(peer));
  // Copied to the CPU and made contiguous here: the writer thread reads the bytes later.
  auto c = t.to(at::kCPU).contiguous();
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!error_.empty()) throw CommError(error_);
    queue_.emplace_back(peer, std::move(c));
  }
  cv_.notify_all();
}

at::Tensor TcpComm::recv(const messages::TensorMeta& meta, int peer) {
  Channel& link = link_for(peer, false);
  const std::string what = "tcp communicator: receiving from rank " + std::to_string(peer);
  const std::string broke =
      ": the peer closed the connection, or sent nothing for " + std::to_string(timeout_s_) + " s";
  try {
    Prelude p{};
    if (!link.read_all(&p, sizeof(p))) throw CommError(what + broke);
    if (p.magic != kTensorMagic) throw CommError(what + ": the stream is out of step");
    auto t = pooled_empty(meta.shape, meta.dtype);
    const uint64_t expected = static_cast<uint64_t>(t.numel()) * t.element_size();
    if (p.dtype != static_cast<uint32_t>(meta.dtype) || p.bytes != expected)
      throw CommError(what + ": " + std::to_string(p.bytes) + " bytes of dtype " +
                      std::to_string(p.dtype) + " came, the header says " +
                      std::to_string(expected) + " bytes of " + c10::toString(meta.dtype));
    if (!link.read_all(t.data_ptr(), expected)) throw CommError(what + broke);
    return t;
  } catch (const CommError& e) {
    // The stream is at an unknown place now: the communicator is done.
    fail(e.what());
    throw;
  }
}

void TcpComm::all_reduce_sum(at::Tensor& t) {
  if (ranks_ == 1) return;
  const auto meta = messages::meta_of(t);
  if (rank_ == 0) {
    auto sum = t.to(at::kCPU).clone();
    for (int k = 1; k < ranks_; ++k) sum.add_(recv(meta, k));
    for (int k = 1; k < ranks_; ++k) send(sum, k);
    t.copy_(sum);
  } else {
    send(t.to(at::kCPU).clone(), 0);
    t.copy_(recv(meta, 0));
  }
}

}  // namespace swarmrt::transport
