// One authenticated connection of a bulk plane, plain or encrypted. Both ends first prove
// they hold the cluster credential (credential.hpp); then, if either end asks for it, the
// bytes travel inside TLS 1.3 with certificates of the secret-derived cluster CA
// (cluster_tls.hpp), verified on both sides.
//
// transport.encrypt decides what an end asks for: "on", "off", or "auto" (the default):
// encrypted unless the peer is on a loopback address, where the bytes never leave the machine
// and encryption would only cost CPU.
#pragma once

#include <sys/uio.h>

#include <chrono>
#include <memory>
#include <string>

#include "config/config.hpp"

namespace swarmrt::transport {

using EncryptMode = config::Encrypt;  // transport.encrypt, read with the rest of the config
void set_encrypt_mode(EncryptMode mode);
EncryptMode encrypt_mode();

class Channel {
 public:
  // Takes `fd` (a connected socket): runs the challenge–response and agrees on encryption
  // within `timeout`. On failure `error()` says why and the socket is closed.
  Channel(int fd, bool initiator, std::chrono::milliseconds timeout);
  ~Channel();
  Channel(const Channel&) = delete;
  Channel& operator=(const Channel&) = delete;

  bool ok() const { return error_.empty(); }
  const std::string& error() const { return error_; }
  bool encrypted() const { return ssl_ != nullptr; }
  int fd() const { return fd_; }

  // Bounds each wait of read_all (0: none). A TLS read that times out leaves the session
  // unusable: a caller treats it like a broken connection.
  void set_read_timeout(std::chrono::milliseconds t);
  // Exactly n bytes, or false (the connection ended or broke, or a read timed out). Blocking.
  bool read_all(void* buf, size_t n);
  bool write_all(const void* buf, size_t n);
  // The n buffers in order, as write_all would write them one after another, in as few
  // system calls as the socket takes (and one flush inside TLS).
  bool write_all(const iovec* iov, int n);
  // Ends the connection for both directions (another thread's blocked read returns).
  void shutdown();

 private:
  std::string open(bool initiator, std::chrono::milliseconds timeout);  // empty: ready
  int fd_;
  void* ssl_ = nullptr;  // SSL*, kept out of this header
  std::string error_;
};

}  // namespace swarmrt::transport
