#include "transport/channel.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>
#include <algorithm>
#include <atomic>
#include <cerrno>
#include <climits>
#include <csignal>
#include <cstring>
#include <mutex>
#include <stdexcept>
#include <vector>

#include "credential/cluster_tls.hpp"
#include "credential/credential.hpp"

namespace swarmrt::transport {
namespace {

std::atomic<EncryptMode> g_mode{EncryptMode::automatic};

// One client and one server context per cluster secret, made at first use.
struct Contexts {
  std::mutex mutex;
  std::string secret;
  SSL_CTX* client = nullptr;
  SSL_CTX* server = nullptr;
};
SSL_CTX* context(bool server) {
  static Contexts* c = new Contexts;  // never destroyed: reader threads may outlive main
  const auto secret = credential::cluster_secret();
  std::lock_guard<std::mutex> lock(c->mutex);
  if (c->secret != secret || !c->client) {
    // Connections made with the old contexts keep them alive (SSL objects hold a reference).
    if (c->client) SSL_CTX_free(c->client);
    if (c->server) SSL_CTX_free(c->server);
    c->client = credential::make_cluster_tls_context(secret, false);
    c->server = credential::make_cluster_tls_context(secret, true);
    c->secret = secret;
  }
  return server ? c->server : c->client;
}

bool loopback_peer(int fd) {
  sockaddr_storage a{};
  socklen_t len = sizeof(a);
  if (getpeername(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0) return false;
  if (a.ss_family == AF_UNIX) return true;
  if (a.ss_family == AF_INET)
    return (ntohl(reinterpret_cast<sockaddr_in*>(&a)->sin_addr.s_addr) >> 24) == 127;
  if (a.ss_family == AF_INET6) {
    const auto& in6 = reinterpret_cast<sockaddr_in6*>(&a)->sin6_addr;
    if (IN6_IS_ADDR_LOOPBACK(&in6)) return true;
    return IN6_IS_ADDR_V4MAPPED(&in6) && in6.s6_addr[12] == 127;
  }
  return false;
}

bool read_byte(int fd, uint8_t& b, std::chrono::milliseconds timeout) {
  pollfd p{fd, POLLIN, 0};
  if (::poll(&p, 1, static_cast<int>(timeout.count())) != 1) return false;
  return ::recv(fd, &b, 1, 0) == 1;
}

void set_timeouts(int fd, std::chrono::milliseconds t) {
  timeval tv{static_cast<time_t>(t.count() / 1000),
             static_cast<suseconds_t>(t.count() % 1000 * 1000)};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
}

std::string ssl_error() {
  std::string msg;
  while (const auto e = ERR_get_error()) {
    char buf[256];
    ERR_error_string_n(e, buf, sizeof(buf));
    msg += (msg.empty() ? "" : "; ") + std::string(buf);
  }
  return msg.empty() ? std::string(std::strerror(errno)) : msg;
}

}  // namespace

void set_encrypt_mode(EncryptMode mode) {
  g_mode = mode;
}

EncryptMode encrypt_mode() {
  return g_mode.load();
}

Channel::Channel(int fd, bool initiator, std::chrono::milliseconds timeout) : fd_(fd) {
  // TLS writes with write(2), not send(..., MSG_NOSIGNAL): a peer gone mid-write must be an
  // error, not a signal that ends the process.
  static std::once_flag no_sigpipe;
  std::call_once(no_sigpipe, [] { std::signal(SIGPIPE, SIG_IGN); });
  error_ = open(initiator, timeout);
  if (!error_.empty()) {
    ::close(fd_);
    fd_ = -1;
  }
}

std::string Channel::open(bool initiator, std::chrono::milliseconds timeout) {
  if (auto why = credential::authenticate(fd_, initiator, timeout); !why.empty()) return why;
  // Encrypted if either end asks: each asks by its transport.encrypt and the peer's address.
  const auto mode = g_mode.load();
  const bool want =
      mode == EncryptMode::on || (mode == EncryptMode::automatic && !loopback_peer(fd_));
  const uint8_t mine = want ? 'T' : 'P';
  uint8_t theirs = 0;
  if (::send(fd_, &mine, 1, MSG_NOSIGNAL) != 1 || !read_byte(fd_, theirs, timeout) ||
      (theirs != 'T' && theirs != 'P'))
    return "the peer did not agree on encryption";
  if (!want && theirs != 'T') return {};
  auto* ssl = SSL_new(context(!initiator));
  if (!ssl) return "cannot start TLS: " + ssl_error();
  // A buffer between TLS and the socket: records (16 KiB each) leave in 1 MiB writes and come
  // in 1 MiB reads instead of one or two system calls per record (write_all flushes).
  BIO* socket_bio = BIO_new_socket(fd_, BIO_NOCLOSE);
  BIO* buffer_bio = BIO_new(BIO_f_buffer());
  if (!socket_bio || !buffer_bio || BIO_set_buffer_size(buffer_bio, 1 << 20) != 1) {
    BIO_free(socket_bio);
    BIO_free(buffer_bio);
    SSL_free(ssl);
    return "cannot start TLS: " + ssl_error();
  }
  BIO_push(buffer_bio, socket_bio);
  SSL_set_bio(ssl, buffer_bio, buffer_bio);
  set_timeouts(fd_, timeout);  // the TLS handshake is bounded like the challenge
  const int r = initiator ? SSL_connect(ssl) : SSL_accept(ssl);
  set_timeouts(fd_, std::chrono::milliseconds(0));
  if (r != 1) {
    const std::string why = ssl_error();
    SSL_free(ssl);
    return "TLS handshake failed: " + why;
  }
  ssl_ = ssl;
  return {};
}

Channel::~Channel() {
  if (ssl_) SSL_free(static_cast<SSL*>(ssl_));
  if (fd_ >= 0) ::close(fd_);
}

bool Channel::read_all(void* buf, size_t n) {
  auto* p = static_cast<char*>(buf);
  while (n > 0) {
    const int part = static_cast<int>(std::min<size_t>(n, INT_MAX));
    const ssize_t r = ssl_ ? SSL_read(static_cast<SSL*>(ssl_), p, part) : ::read(fd_, p, part);
    if (r <= 0) {
      if (!ssl_ && r < 0 && errno == EINTR) continue;
      return false;
    }
    p += r;
    n -= static_cast<size_t>(r);
  }
  return true;
}

bool Channel::write_all(const void* buf, size_t n) {
  iovec one{const_cast<void*>(buf), n};
  return write_all(&one, 1);
}

bool Channel::write_all(const iovec* iov, int n) {
  if (ssl_) {
    for (int i = 0; i < n; ++i) {
      const auto* p = static_cast<const char*>(iov[i].iov_base);
      for (size_t left = iov[i].iov_len; left > 0;) {
        const int part = static_cast<int>(std::min<size_t>(left, INT_MAX));
        const int r = SSL_write(static_cast<SSL*>(ssl_), p, part);
        if (r <= 0) return false;
        p += r;
        left -= static_cast<size_t>(r);
      }
    }
    return BIO_flush(SSL_get_wbio(static_cast<SSL*>(ssl_))) == 1;
  }
  std::vector<iovec> rest(iov, iov + n);
  size_t first = 0;
  while (first < rest.size()) {
    msghdr m{};
    m.msg_iov = rest.data() + first;
    m.msg_iovlen = std::min<size_t>(rest.size() - first, IOV_MAX);
    const ssize_t r = ::sendmsg(fd_, &m, MSG_NOSIGNAL);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;
    // Skip what was written: whole buffers, then into the one it stopped in.
    for (auto left = static_cast<size_t>(r); left > 0;) {
      auto& v = rest[first];
      const size_t take = std::min(left, v.iov_len);
      v.iov_base = static_cast<char*>(v.iov_base) + take;
      v.iov_len -= take;
      left -= take;
      if (v.iov_len == 0) ++first;
    }
    while (first < rest.size() && rest[first].iov_len == 0) ++first;
  }
  return true;
}

void Channel::set_read_timeout(std::chrono::milliseconds t) {
  timeval tv{static_cast<time_t>(t.count() / 1000),
             static_cast<suseconds_t>(t.count() % 1000 * 1000)};
  ::setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
}

void Channel::shutdown() {
  if (fd_ >= 0) ::shutdown(fd_, SHUT_RDWR);
}

}  // namespace swarmrt::transport
