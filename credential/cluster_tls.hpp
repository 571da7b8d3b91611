// Certificates for the CAF control plane's mutual TLS, derived from the cluster secret.
//
// Every holder of the secret derives the same cluster CA key (ECDSA P-256, private scalar =
// HMAC-SHA256(secret, "swarmrt cluster ca v1") reduced into the curve's range), writes a CA
// certificate for it, and signs a fresh key pair of its own with it. So a node needs nothing
// but the secret it already needs to join: no key files to copy to every machine, nothing to
// rotate separately (a new secret is a new CA), and a peer of another cluster (another
// secret) has a certificate no process of this cluster can verify. The cost: anyone holding
// the secret can mint certificates; that is the same trust the secret already grants.
#pragma once

#include <string>
#include <utility>
#include <vector>

struct ssl_ctx_st;  // OpenSSL's SSL_CTX

namespace swarmrt::credential {

struct TlsFiles {
  std::string dir;   // private directory (0700) holding the three files
  std::string ca;    // the cluster CA certificate (PEM)
  std::string cert;  // this process's certificate, signed by the cluster CA (PEM)
  std::string key;   // this process's private key (PEM, 0600)
};

// Writes the cluster CA certificate and a fresh key pair with a certificate for `name` into a
// new private directory under $TMPDIR (or /tmp), or into `dir` (made 0700 if missing) when
// given. `hosts` (IP addresses or DNS names) go into the certificate's subjectAltName, which a
// TLS server such as an etcd member needs: its clients check the address they dialled against
// it. Throws std::runtime_error with the reason.
TlsFiles write_cluster_tls(const std::string& secret, const std::string& name,
                           const std::vector<std::string>& hosts = {}, const std::string& dir = "");
// Removes the files and their directory (a `dir` given to write_cluster_tls stays if it holds
// anything else).
void remove_cluster_tls(const TlsFiles& files);

// A TLS 1.3 context (client or server side) with a fresh certificate of the cluster CA derived
// from `secret`, requiring and verifying the peer's against that CA. Free with SSL_CTX_free.
ssl_ctx_st* make_cluster_tls_context(const std::string& secret, bool server);

// The SHA-256 fingerprint (hex, first 16 digits) of the cluster CA's public key, for logs:
// two processes with the same secret print the same one.
std::string cluster_ca_id(const std::string& secret);

// Removes the TLS files when it goes out of scope (moved, they go with the move).
struct TlsFilesGuard {
  TlsFiles files;
  explicit TlsFilesGuard(TlsFiles f = {}) : files(std::move(f)) {}
  TlsFilesGuard(TlsFilesGuard&& o) noexcept : files(std::exchange(o.files, {})) {}
  TlsFilesGuard& operator=(TlsFilesGuard&&) = delete;
  ~TlsFilesGuard() { remove_cluster_tls(files); }
};

}  // namespace swarmrt::credential
