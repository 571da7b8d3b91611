#include "credential/credential.hpp"

#include <fcntl.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <mutex>
#include <stdexcept>

namespace swarmrt::credential {
namespace {

constexpr char kMagic[8] = {'S', 'W', 'A', 'U', 'T', 'H', '0', '1'};
constexpr size_t kNonce = 32;
constexpr size_t kProof = 32;

struct PlaneKey {
  std::mutex mutex;
  bool set = false;
  std::string secret;
  std::array<uint8_t, 32> key{};
};
PlaneKey& plane_key() {
  static PlaneKey* k = new PlaneKey;  // never destroyed: reader threads may outlive main
  return *k;
}

std::array<uint8_t, 32> current_key() {
  auto& k = plane_key();
  std::lock_guard<std::mutex> lock(k.mutex);
  if (!k.set) {
    k.secret = generate_secret();
    k.key = derive_key(k.secret, "swarmrt bulk plane v1");
    k.set = true;
  }
  return k.key;
}

std::string hex(const uint8_t* p, size_t n) {
  static const char* digits = "0123456789abcdef";
  std::string out;
  out.reserve(2 * n);
  for (size_t i = 0; i < n; ++i) {
    out.push_back(digits[p[i] >> 4]);
    out.push_back(digits[p[i] & 15]);
  }
  return out;
}

using Clock = std::chrono::steady_clock;

// Reads exactly n bytes before `deadline`; false with `why` set otherwise.
bool read_by(int fd, void* buf, size_t n, Clock::time_point deadline, std::string& why) {
  auto* p = static_cast<char*>(buf);
  while (n > 0) {
    // Rounded up: a wait truncated to whole milliseconds gave up to 1 ms before the deadline
    // (Credential.SilenceEndsAtTheTimeout measured 299.x ms of a 300 ms timeout).
    const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (left <= 0) {
      why = "the peer sent no credential within the handshake timeout";
      return false;
    }
    pollfd pfd{fd, POLLIN, 0};
    const int r = ::poll(&pfd, 1, static_cast<int>(std::min<int64_t>(left, 1000)));
    if (r < 0 && errno != EINTR) {
      why = std::strerror(errno);
      return false;
    }
    if (r <= 0) continue;
    const ssize_t k = ::recv(fd, p, n, 0);
    if (k == 0) {
      why = "the peer closed the connection during the handshake";
      return false;
    }
    if (k < 0) {
      if (errno == EINTR || errno == EAGAIN) continue;
      why = std::strerror(errno);
      return false;
    }
    p += k;
    n -= static_cast<size_t>(k);
  }
  return true;
}

bool send_all(int fd, const void* buf, size_t n) {
  const auto* p = static_cast<const char*>(buf);
  while (n > 0) {
    const ssize_t r = ::send(fd, p, n, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (r < 0 && (errno == EINTR || errno == EAGAIN)) {
      // A handful of bytes on a fresh connection: the buffer is empty unless the peer stalls.
      pollfd pfd{fd, POLLOUT, 0};
      if (::poll(&pfd, 1, 1000) <= 0) return false;
      continue;
    }
    if (r <= 0) return false;
    p += r;
    n -= static_cast<size_t>(r);
  }
  return true;
}

// HMAC(key, role || initiator nonce || responder nonce).
std::array<uint8_t, kProof> proof(const std::array<uint8_t, 32>& key, const char* role,
                                  const uint8_t* initiator_nonce, const uint8_t* responder_nonce) {
  std::string msg(role);
  msg.append(reinterpret_cast<const char*>(initiator_nonce), kNonce);
  msg.append(reinterpret_cast<const char*>(responder_nonce), kNonce);
  std::array<uint8_t, kProof> out{};
  unsigned int len = 0;
  HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()),
       reinterpret_cast<const unsigned char*>(msg.data()), msg.size(), out.data(), &len);
  return out;
}

}  // namespace

std::string generate_secret() {
  uint8_t bytes[32];
  if (RAND_bytes(bytes, sizeof(bytes)) != 1)
    throw std::runtime_error("cannot make a secret: OpenSSL's random generator failed");
  return hex(bytes, sizeof(bytes));
}

std::string read_secret_file(const std::string& path, std::string* warning) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0)
    throw std::runtime_error("secret file " + path + ": " + std::strerror(errno));
  if (warning && (st.st_mode & 077))
    *warning = "secret file " + path + " can be read by other users (chmod 600 it)";
  if (st.st_size > 4096)
    throw std::runtime_error("secret file " + path + ": " + std::to_string(st.st_size) +
                             " bytes; a secret is one line");
  std::ifstream in(path);
  std::string line;
  if (!in || !std::getline(in, line))
    throw std::runtime_error("secret file " + path + ": cannot read it");
  const auto first = line.find_first_not_of(" \t\r");
  const auto last = line.find_last_not_of(" \t\r");
  if (first == std::string::npos) throw std::runtime_error("secret file " + path + " is empty");
  return line.substr(first, last - first + 1);
}

void write_secret_file(const std::string& path, const std::string& secret) {
  const std::string tmp = path + ".tmp";
  ::unlink(tmp.c_str());
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) throw std::runtime_error("cannot write " + tmp + ": " + std::strerror(errno));
  const std::string text = secret + "\n";
  const bool ok = ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size()) &&
                  ::fsync(fd) == 0;
  const int saved = errno;
  if (::close(fd) != 0 || !ok) {
    ::unlink(tmp.c_str());
    throw std::runtime_error("cannot write " + tmp + ": " + std::strerror(ok ? errno : saved));
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    ::unlink(tmp.c_str());
    throw std::runtime_error("cannot rename " + tmp + ": " + std::strerror(errno));
  }
}

std::array<uint8_t, 32> derive_key(const std::string& secret, const std::string& label) {
  std::array<uint8_t, 32> out{};
  unsigned int len = 0;
  HMAC(EVP_sha256(), secret.data(), static_cast<int>(secret.size()),
       reinterpret_cast<const unsigned char*>(label.data()), label.size(), out.data(), &len);
  return out;
}

std::string http_token(const std::string& secret) {
  static const char* hex = "0123456789abcdef";
  std::string out;
  for (uint8_t b : derive_key(secret, "swarmrt http token v1")) {
    out += hex[b >> 4];
    out += hex[b & 15];
  }
  return out;
}

void set_cluster_secret(const std::string& secret) {
  auto& k = plane_key();
  std::lock_guard<std::mutex> lock(k.mutex);
  k.secret = secret.empty() ? generate_secret() : secret;
  k.key = derive_key(k.secret, "swarmrt bulk plane v1");
  k.set = true;
}

std::string cluster_secret() {
  current_key();  // makes one if none was set
  auto& k = plane_key();
  std::lock_guard<std::mutex> lock(k.mutex);
  return k.secret;
}

bool equal_secrets(const std::string& a, const std::string& b) {
  return a.size() == b.size() && CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

std::string authenticate(int fd, bool initiator, std::chrono::milliseconds timeout) {
  return authenticate(fd, initiator, timeout, current_key());
}

std::string authenticate(int fd, bool initiator, std::chrono::milliseconds timeout,
                         const std::array<uint8_t, 32>& key) {
  const auto deadline = Clock::now() + timeout;
  uint8_t mine[sizeof(kMagic) + kNonce];
  std::memcpy(mine, kMagic, sizeof(kMagic));
  if (RAND_bytes(mine + sizeof(kMagic), kNonce) != 1) return "OpenSSL's random generator failed";
  if (!send_all(fd, mine, sizeof(mine))) return "cannot send the challenge";
  uint8_t theirs[sizeof(mine)];
  std::string why;
  if (!read_by(fd, theirs, sizeof(theirs), deadline, why)) return why;
  if (std::memcmp(theirs, kMagic, sizeof(kMagic)) != 0)
    return "the peer does not speak swarmrt's plane handshake";
  const uint8_t* my_nonce = mine + sizeof(kMagic);
  const uint8_t* their_nonce = theirs + sizeof(kMagic);
  const uint8_t* in_nonce = initiator ? my_nonce : their_nonce;
  const uint8_t* re_nonce = initiator ? their_nonce : my_nonce;
  const auto my_proof = proof(key, initiator ? "initiator" : "responder", in_nonce, re_nonce);
  if (!send_all(fd, my_proof.data(), my_proof.size())) return "cannot send the proof";
  std::array<uint8_t, kProof> their_proof{};
  if (!read_by(fd, their_proof.data(), their_proof.size(), deadline, why)) return why;
  const auto expected = proof(key, initiator ? "responder" : "initiator", in_nonce, re_nonce);
  const bool they_hold = CRYPTO_memcmp(expected.data(), their_proof.data(), kProof) == 0;
  const uint8_t verdict = they_hold ? 'Y' : 'N';
  send_all(fd, &verdict, 1);  // a refused peer learns why; failing to tell it changes nothing
  if (!they_hold) return "the peer does not hold the cluster credential (wrong secret)";
  uint8_t their_verdict = 0;
  if (!read_by(fd, &their_verdict, 1, deadline, why)) return why;
  if (their_verdict != 'Y') return "the peer refused this process's credential (wrong secret)";
  return {};
}

}  // namespace swarmrt::credential
