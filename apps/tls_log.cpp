// Names the certificates the control plane refuses, on the refusing side too.
//
// CAF 0.17's openssl module builds every session's SSL_CTX itself and gives no hook to learn
// why a handshake failed, so a coordinator could not say that it refused a node of another
// cluster (architecture §8: a refusal is named on both sides). This executable therefore defines
// SSL_CTX_set_verify: the dynamic linker binds libcaf_openssl's call to this definition (the
// executable comes first in symbol lookup), which passes it on to OpenSSL's own with a
// callback that logs each certificate it refuses, and an info callback that logs the fatal
// alert of a peer that refused ours and clears OpenSSL's error queue (see on_tls_event);
// neither changes a verdict. SSL_get_error is wrapped for the same reason (see below).
#include <dlfcn.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <spdlog/spdlog.h>

#include <string>

namespace {

std::string common_name(X509* cert) {
  if (!cert) return "no certificate";
  char cn[256] = {0};
  if (X509_NAME_get_text_by_NID(X509_get_subject_name(cert), NID_commonName, cn, sizeof(cn)) <= 0)
    return "a certificate without a name";
  return std::string("'") + cn + "'";
}

int log_refusals(int preverify_ok, X509_STORE_CTX* store) {
  if (!preverify_ok) {
    const int err = X509_STORE_CTX_get_error(store);
    spdlog::warn(
        "control plane: refused a peer's certificate: {} ({}, depth {}): it is not of this "
        "cluster (another secret)",
        X509_verify_cert_error_string(err), common_name(X509_STORE_CTX_get_current_cert(store)),
        X509_STORE_CTX_get_error_depth(store));
  }
  return preverify_ok;
}

// A peer that finds our certificate not of its cluster says so with an alert before it shows
// its own (the client checks the server first): the refusing side here is the peer, and this
// side learns why only from the alert.
//
// It also keeps one failed handshake from ending every other connection: CAF 0.17's session
// never clears OpenSSL's error queue, which is per thread, and all of CAF's connections share
// one I/O thread; SSL_get_error reports SSL_ERROR_SSL while the queue holds anything, so the
// next ordinary "want read" of a healthy connection looked like a failure and CAF closed it (a
// stranger's failed handshake dropped every node). The queue is cleared when a handshake step
// ends and when an alert goes or comes: the failing connection still fails (CAF closes it on
// the SSL_ERROR_SYSCALL it then sees), the others no longer do.
void on_tls_event(const SSL*, int where, int ret) {
  if ((where & SSL_CB_ALERT) && (where & SSL_CB_READ) && (ret >> 8) == SSL3_AL_FATAL)
    spdlog::warn(
        "control plane: a peer ended the TLS handshake with '{}': it does not hold this "
        "cluster's credential (another secret)",
        SSL_alert_desc_string_long(ret));
  if ((where & SSL_CB_EXIT) || (where & SSL_CB_ALERT)) ERR_clear_error();
}

using SetVerify = void (*)(SSL_CTX*, int, SSL_verify_cb);
using GetError = int (*)(const SSL*, int);

}  // namespace

// The same hole after the handshake: a connection that fails later (a peer gone without
// close_notify, an alert that could not be sent) leaves its error queued, and the next healthy
// connection on CAF's I/O thread would read it. CAF asks SSL_get_error about every failed call,
// so once the verdict is taken for the connection it belongs to, the queue is emptied. A node's
// connection dropped at the moment another node's join was dropped (net.namespaces, 1 run of
// about 10 under load) is what this closes.
extern "C" int SSL_get_error(const SSL* ssl, int ret) {
  static const auto real = reinterpret_cast<GetError>(dlsym(RTLD_NEXT, "SSL_get_error"));
  if (!real) return SSL_ERROR_SSL;
  const int verdict = real(ssl, ret);
  if (verdict == SSL_ERROR_SSL || verdict == SSL_ERROR_SYSCALL) ERR_clear_error();
  return verdict;
}

extern "C" void SSL_CTX_set_verify(SSL_CTX* ctx, int mode, SSL_verify_cb callback) {
  static const auto real = reinterpret_cast<SetVerify>(dlsym(RTLD_NEXT, "SSL_CTX_set_verify"));
  if (!real) return;  // cannot happen while libssl is loaded; without it nothing verifies
  real(ctx, mode, (mode & SSL_VERIFY_PEER) && !callback ? log_refusals : callback);
  // A peer gone without close_notify is a closed connection (BASP and the frame links frame
  // their own lengths, so a truncation cannot pass for a whole message), not a queued error.
  if (mode & SSL_VERIFY_PEER) SSL_CTX_set_options(ctx, SSL_OP_IGNORE_UNEXPECTED_EOF);
  if ((mode & SSL_VERIFY_PEER) && !SSL_CTX_get_info_callback(ctx))
    SSL_CTX_set_info_callback(ctx, on_tls_event);
}
