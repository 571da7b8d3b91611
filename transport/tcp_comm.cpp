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

#include "transport/buffer_pool.hpp"
#include "transport/credential.hpp"

namespace swarmrt::transport {
namespace {

using Clock = std::chrono::steady_clock;

constexpr uint32_t kHelloMagic = 0x4d435753;   // "SWCM": a rank joining
constexpr uint32_t kTensorMagic = 0x54435753;  // "SWCT": a tensor follows
constexpr const char* kIdPrefix = "swarmrt-tcp-comm 1 ";
constexpr int64_t kHandshakeMs = 5000;  // a connection proves the cluster credential in this

struct Hello {
  uint32_t magic;
  uint32_t rank;
  uint64_t token;
};
struct Prelude {
  uint32_t magic;
  uint32_t dtype;
  uint64_t bytes;
};

Clock::time_point after(double seconds) {
  return Clock::now() + std::chrono::microseconds(static_cast<int64_t>(seconds * 1e6));
}

int ms_left(Clock::time_point deadline) {
  const auto left =
      std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
  return left < 0 ? 0 : static_cast<int>(std::min<int64_t>(left, 100));
}

// Reads exactly n bytes before `deadline`; throws CommError naming `what`.
void read_exact(int fd, void* buf, size_t n, Clock::time_point deadline, const std::string& what) {
  auto* p = static_cast<char*>(buf);
  while (n > 0) {
    if (Clock::now() >= deadline) throw CommError(what + ": nothing came within the timeout");
    pollfd pfd{fd, POLLIN, 0};
    const int r = ::poll(&pfd, 1, ms_left(deadline));
    if (r < 0 && errno != EINTR) throw CommError(what + ": " + std::strerror(errno));
    if (r <= 0) continue;
    const ssize_t k = ::recv(fd, p, n, 0);
    if (k == 0) throw CommError(what + ": the peer closed the connection");
    if (k < 0) {
      if (errno == EINTR || errno == EAGAIN) continue;
      throw CommError(what + ": " + std::strerror(errno));
    }
    p += k;
    n -= static_cast<size_t>(k);
  }
}

bool write_all(int fd, const void* buf, size_t n) {
  const auto* p = static_cast<const char*>(buf);
  while (n > 0) {
    const ssize_t r = ::send(fd, p, n, MSG_NOSIGNAL);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;
    p += r;
    n -= static_cast<size_t>(r);
  }
  return true;
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
    : ranks_(ranks), rank_(0), timeout_s_(options.timeout_s), fds_(ranks, -1) {
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
    : ranks_(ranks), rank_(rank), timeout_s_(options.timeout_s), fds_(ranks, -1) {
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
    for (int fd : fds_)
      if (fd >= 0) ::shutdown(fd, SHUT_RDWR);
  }
  cv_.notify_all();
  if (setup_.joinable()) setup_.join();
  if (writer_.joinable()) writer_.join();
  for (int fd : fds_)
    if (fd >= 0) ::close(fd);
  if (listen_fd_ >= 0) ::close(listen_fd_);
}

std::vector<uint8_t> TcpComm::id() const {
  char hex[17];
  std::snprintf(hex, sizeof(hex), "%016llx", static_cast<unsigned long long>(token_));
  const std::string text = kIdPrefix + endpoint_ + " " + hex;
  return std::vector<uint8_t>(text.begin(), text.end());
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
  int joined = 0;
  while (joined < ranks_ - 1) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (stopping_) return;
    }
    if (Clock::now() >= deadline) {
      fail("tcp communicator: " + std::to_string(joined) + " of " + std::to_string(ranks_ - 1) +
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
    // The cluster credential first (transport/credential.hpp), then the communicator's token.
    if (const auto why = authenticate(fd, false, std::chrono::milliseconds(kHandshakeMs));
        !why.empty()) {
      spdlog::warn("tcp communicator: refused a connection: {}", why);
      ::close(fd);
      continue;
    }
    Hello h{};
    try {
      read_exact(fd, &h, sizeof(h), after(std::min(5.0, timeout_s_)), "tcp communicator hello");
    } catch (const CommError& e) {
      spdlog::warn("{}; connection dropped", e.what());
      ::close(fd);
      continue;
    }
    std::lock_guard<std::mutex> lock(mu_);
    if (h.magic != kHelloMagic || h.token != token_ || h.rank < 1 ||
        h.rank >= static_cast<uint32_t>(ranks_) || fds_[h.rank] >= 0) {
      spdlog::warn("tcp communicator: refused a connection (not a rank of this communicator)");
      ::close(fd);
      continue;
    }
    no_delay(fd);
    fds_[h.rank] = fd;
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
  std::string why = "timed out";
  for (;;) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (stopping_) return;
    }
    if (Clock::now() >= deadline) {
      fail("tcp communicator: cannot reach rank 0 at " + host + ":" + std::to_string(port) + ": " +
           why);
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
    if (const auto refused = authenticate(fd, true, std::chrono::milliseconds(kHandshakeMs));
        !refused.empty()) {
      ::close(fd);
      // Another credential does not change by trying again.
      fail("tcp communicator: rank 0 at " + host + ":" + std::to_string(port) +
           " refused: " + refused);
      return;
    }
    const Hello h{kHelloMagic, static_cast<uint32_t>(rank_), token_};
    if (!write_all(fd, &h, sizeof(h))) {
      why = std::strerror(errno);
      ::close(fd);
      continue;
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (stopping_) {
        ::close(fd);
        return;
      }
      fds_[0] = fd;
      ready_ = true;
    }
    cv_.notify_all();
    return;
  }
}

void TcpComm::write_loop() {
  for (;;) {
    int fd = -1;
    int peer = 0;
    at::Tensor t;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] { return stopping_ || !error_.empty() || (ready_ && !queue_.empty()); });
      if (stopping_ || !error_.empty()) return;
      peer = queue_.front().first;
      t = std::move(queue_.front().second);
      queue_.pop_front();
      fd = fds_[peer];
    }
    const Prelude p{kTensorMagic, static_cast<uint32_t>(t.scalar_type()),
                    static_cast<uint64_t>(t.numel()) * t.element_size()};
    if (!write_all(fd, &p, sizeof(p)) || !write_all(fd, t.data_ptr(), p.bytes)) {
      fail("tcp communicator: sending to rank " + std::to_string(peer) +
           " failed: " + std::strerror(errno));
      return;
    }
  }
}

int TcpComm::socket_for(int peer) {
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
  return fds_[peer];
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
  const int fd = socket_for(peer);
  const std::string what = "tcp communicator: receiving from rank " + std::to_string(peer);
  try {
    Prelude p{};
    const auto deadline = after(timeout_s_);
    read_exact(fd, &p, sizeof(p), deadline, what);
    if (p.magic != kTensorMagic) throw CommError(what + ": the stream is out of step");
    auto t = pooled_empty(meta.shape, meta.dtype);
    const uint64_t expected = static_cast<uint64_t>(t.numel()) * t.element_size();
    if (p.dtype != static_cast<uint32_t>(meta.dtype) || p.bytes != expected)
      throw CommError(what + ": " + std::to_string(p.bytes) + " bytes of dtype " +
                      std::to_string(p.dtype) + " came, the header says " +
                      std::to_string(expected) + " bytes of " + c10::toString(meta.dtype));
    read_exact(fd, t.data_ptr(), expected, deadline, what);
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
