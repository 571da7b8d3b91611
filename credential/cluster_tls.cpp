#include "credential/cluster_tls.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <openssl/bn.h>
#include <openssl/core_names.h>
#include <openssl/ec.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/param_build.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <memory>
#include <stdexcept>

#include "credential/credential.hpp"

namespace swarmrt::credential {
namespace {

template <class T, void (*F)(T*)>
struct Free {
  void operator()(T* p) const { F(p); }
};
using Pkey = std::unique_ptr<EVP_PKEY, Free<EVP_PKEY, EVP_PKEY_free>>;
using Cert = std::unique_ptr<X509, Free<X509, X509_free>>;
using Bn = std::unique_ptr<BIGNUM, Free<BIGNUM, BN_free>>;
using BnCtx = std::unique_ptr<BN_CTX, Free<BN_CTX, BN_CTX_free>>;
using Group = std::unique_ptr<EC_GROUP, Free<EC_GROUP, EC_GROUP_free>>;
using Point = std::unique_ptr<EC_POINT, Free<EC_POINT, EC_POINT_free>>;
using ParamBld = std::unique_ptr<OSSL_PARAM_BLD, Free<OSSL_PARAM_BLD, OSSL_PARAM_BLD_free>>;
using Params = std::unique_ptr<OSSL_PARAM, Free<OSSL_PARAM, OSSL_PARAM_free>>;
using PkeyCtx = std::unique_ptr<EVP_PKEY_CTX, Free<EVP_PKEY_CTX, EVP_PKEY_CTX_free>>;

[[noreturn]] void fail(const std::string& what) {
  std::string msg = "cluster TLS: " + what;
  if (const auto e = ERR_get_error()) {
    char buf[256];
    ERR_error_string_n(e, buf, sizeof(buf));
    msg += std::string(": ") + buf;
  }
  ERR_clear_error();
  throw std::runtime_error(msg);
}

// The CA key every holder of `secret` derives: a P-256 private scalar in [1, n-1].
Pkey derive_ca_key(const std::string& secret) {
  const auto seed = derive_key(secret, "swarmrt cluster ca v1");
  Group group(EC_GROUP_new_by_curve_name(NID_X9_62_prime256v1));
  BnCtx bn(BN_CTX_new());
  if (!group || !bn) fail("cannot set up P-256");
  Bn priv(BN_bin2bn(seed.data(), static_cast<int>(seed.size()), nullptr));
  Bn range(BN_dup(EC_GROUP_get0_order(group.get())));
  if (!priv || !range || !BN_sub_word(range.get(), 1) ||
      !BN_mod(priv.get(), priv.get(), range.get(), bn.get()) || !BN_add_word(priv.get(), 1))
    fail("cannot derive the CA scalar");
  Point pub(EC_POINT_new(group.get()));
  if (!pub || !EC_POINT_mul(group.get(), pub.get(), priv.get(), nullptr, nullptr, bn.get()))
    fail("cannot derive the CA public key");
  unsigned char pub_bytes[65];
  const size_t pub_len = EC_POINT_point2oct(group.get(), pub.get(), POINT_CONVERSION_UNCOMPRESSED,
                                            pub_bytes, sizeof(pub_bytes), bn.get());
  ParamBld bld(OSSL_PARAM_BLD_new());
  if (!bld || pub_len == 0 ||
      !OSSL_PARAM_BLD_push_utf8_string(bld.get(), OSSL_PKEY_PARAM_GROUP_NAME, "prime256v1", 0) ||
      !OSSL_PARAM_BLD_push_BN(bld.get(), OSSL_PKEY_PARAM_PRIV_KEY, priv.get()) ||
      !OSSL_PARAM_BLD_push_octet_string(bld.get(), OSSL_PKEY_PARAM_PUB_KEY, pub_bytes, pub_len))
    fail("cannot build the CA key");
  Params params(OSSL_PARAM_BLD_to_param(bld.get()));
  PkeyCtx ctx(EVP_PKEY_CTX_new_from_name(nullptr, "EC", nullptr));
  EVP_PKEY* key = nullptr;
  if (!params || !ctx || EVP_PKEY_fromdata_init(ctx.get()) != 1 ||
      EVP_PKEY_fromdata(ctx.get(), &key, EVP_PKEY_KEYPAIR, params.get()) != 1)
    fail("cannot build the CA key");
  return Pkey(key);
}

void add_ext(X509* cert, X509* issuer, int nid, const char* value) {
  X509V3_CTX ctx;
  X509V3_set_ctx_nodb(&ctx);
  X509V3_set_ctx(&ctx, issuer, cert, nullptr, nullptr, 0);
  X509_EXTENSION* ext = X509V3_EXT_nconf_nid(nullptr, &ctx, nid, value);
  if (!ext || !X509_add_ext(cert, ext, -1)) fail("cannot add a certificate extension");
  X509_EXTENSION_free(ext);
}

// "IP:10.0.0.1,DNS:node-a": an IP address where the host parses as one, a DNS name otherwise.
std::string alt_names(const std::vector<std::string>& hosts) {
  std::string out;
  for (const auto& h : hosts) {
    // The list is OpenSSL's config syntax: a comma or space in a name would change its meaning.
    if (h.empty() || h.find_first_of(", \t\n") != std::string::npos)
      throw std::runtime_error("cluster TLS: '" + h + "' is not a host name or address");
    unsigned char buf[16];
    const bool ip =
        ::inet_pton(AF_INET, h.c_str(), buf) == 1 || ::inet_pton(AF_INET6, h.c_str(), buf) == 1;
    out += (out.empty() ? "" : ",") + std::string(ip ? "IP:" : "DNS:") + h;
  }
  return out;
}

// A certificate for `key` named `cn`, signed by `ca_key` (issued by `ca`; self-signed when
// `ca` is null).
Cert make_cert(EVP_PKEY* key, const std::string& cn, EVP_PKEY* ca_key, X509* ca,
               const std::vector<std::string>& hosts = {}) {
  Cert cert(X509_new());
  if (!cert || !X509_set_version(cert.get(), 2)) fail("cannot make a certificate");
  uint64_t serial = 1;
  if (ca && RAND_bytes(reinterpret_cast<unsigned char*>(&serial), sizeof(serial)) != 1)
    fail("cannot draw a serial");
  ASN1_INTEGER_set_uint64(X509_get_serialNumber(cert.get()), serial >> 1);
  if (ca) {
    X509_gmtime_adj(X509_getm_notBefore(cert.get()), -86400);  // clocks of nodes differ
    X509_gmtime_adj(X509_getm_notAfter(cert.get()), 20L * 365 * 86400);
  } else {
    // Fixed, so every holder's CA certificate says the same.
    ASN1_TIME_set(X509_getm_notBefore(cert.get()), 1577836800);  // 2020-01-01
    ASN1_TIME_set(X509_getm_notAfter(cert.get()), 4102444800);   // 2100-01-01
  }
  X509_NAME* name = X509_get_subject_name(cert.get());
  X509_NAME_add_entry_by_txt(name, "O", MBSTRING_ASC,
                             reinterpret_cast<const unsigned char*>("swarmrt"), -1, -1, 0);
  X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_UTF8,
                             reinterpret_cast<const unsigned char*>(cn.c_str()), -1, -1, 0);
  X509_set_issuer_name(cert.get(), ca ? X509_get_subject_name(ca) : name);
  if (!X509_set_pubkey(cert.get(), key)) fail("cannot set the public key");
  X509* issuer = ca ? ca : cert.get();
  if (ca) {
    add_ext(cert.get(), issuer, NID_basic_constraints, "critical,CA:FALSE");
    add_ext(cert.get(), issuer, NID_key_usage, "critical,digitalSignature,keyAgreement");
    add_ext(cert.get(), issuer, NID_ext_key_usage, "serverAuth,clientAuth");
    if (!hosts.empty()) add_ext(cert.get(), issuer, NID_subject_alt_name, alt_names(hosts).c_str());
  } else {
    add_ext(cert.get(), issuer, NID_basic_constraints, "critical,CA:TRUE,pathlen:0");
    add_ext(cert.get(), issuer, NID_key_usage, "critical,keyCertSign,cRLSign");
  }
  if (X509_sign(cert.get(), ca_key, EVP_sha256()) == 0) fail("cannot sign a certificate");
  return cert;
}

std::string ca_subject(const std::string& secret) {
  return "swarmrt cluster " + cluster_ca_id(secret);
}

FILE* open_private(const std::string& path) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0)
    throw std::runtime_error("cluster TLS: cannot write " + path + ": " + strerror(errno));
  FILE* f = ::fdopen(fd, "w");
  if (!f) {
    ::close(fd);
    throw std::runtime_error("cluster TLS: cannot write " + path);
  }
  return f;
}

void close_checked(FILE* f, bool ok, const std::string& path) {
  ok = ok && std::fflush(f) == 0 && ::fsync(fileno(f)) == 0;
  ok = std::fclose(f) == 0 && ok;
  if (!ok) throw std::runtime_error("cluster TLS: cannot write " + path);
}

// This process's identity in the cluster: the CA certificate every holder of `secret` makes
// alike, and a fresh key pair with a certificate named `name` signed by that CA.
struct Identity {
  Cert ca;
  Pkey key;
  Cert cert;
};
Identity make_identity(const std::string& secret, const std::string& name,
                       const std::vector<std::string>& hosts = {}) {
  auto ca_key = derive_ca_key(secret);
  auto ca = make_cert(ca_key.get(), ca_subject(secret), ca_key.get(), nullptr);
  Pkey key(EVP_EC_gen("P-256"));
  if (!key) fail("cannot make a key pair");
  auto cert = make_cert(key.get(), name, ca_key.get(), ca.get(), hosts);
  return {std::move(ca), std::move(key), std::move(cert)};
}

}  // namespace

std::string cluster_ca_id(const std::string& secret) {
  auto key = derive_ca_key(secret);
  unsigned char* der = nullptr;
  const int len = i2d_PUBKEY(key.get(), &der);
  if (len <= 0) fail("cannot encode the CA public key");
  unsigned char digest[32];
  unsigned int dlen = 0;
  EVP_Digest(der, static_cast<size_t>(len), digest, &dlen, EVP_sha256(), nullptr);
  OPENSSL_free(der);
  char out[17];
  for (int i = 0; i < 8; ++i) std::snprintf(out + 2 * i, 3, "%02x", digest[i]);
  return out;
}

ssl_ctx_st* make_cluster_tls_context(const std::string& secret, bool server) {
  auto [ca, key, cert] = make_identity(secret, server ? "bulk plane server" : "bulk plane client");
  SSL_CTX* ctx = SSL_CTX_new(server ? TLS_server_method() : TLS_client_method());
  if (!ctx) fail("cannot make a TLS context");
  const bool ok =
      SSL_CTX_set_min_proto_version(ctx, TLS1_3_VERSION) == 1 &&
      // AES-128-GCM first: the fastest with AES-NI, and the bulk planes carry gigabytes.
      SSL_CTX_set_ciphersuites(ctx,
                               "TLS_AES_128_GCM_SHA256:TLS_AES_256_GCM_SHA384:"
                               "TLS_CHACHA20_POLY1305_SHA256") == 1 &&
      SSL_CTX_use_certificate(ctx, cert.get()) == 1 &&
      SSL_CTX_use_PrivateKey(ctx, key.get()) == 1 &&
      X509_STORE_add_cert(SSL_CTX_get_cert_store(ctx), ca.get()) == 1;
  if (!ok) {
    SSL_CTX_free(ctx);
    fail("cannot set up the TLS context");
  }
  SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, nullptr);
  if (server) SSL_CTX_set_num_tickets(ctx, 0);  // no resumption: connections live long
  return ctx;
}

TlsFiles write_cluster_tls(const std::string& secret, const std::string& name,
                           const std::vector<std::string>& hosts, const std::string& dir) {
  if (secret.empty()) throw std::runtime_error("cluster TLS: no cluster secret");
  auto [ca, key, cert] = make_identity(secret, name, hosts);
  std::string templ = dir;
  if (templ.empty()) {
    const char* tmpdir = std::getenv("TMPDIR");
    templ = std::string(tmpdir && *tmpdir ? tmpdir : "/tmp") + "/swarmrt-tls-XXXXXX";
    if (!::mkdtemp(templ.data()))
      throw std::runtime_error("cluster TLS: cannot make a directory under " + templ + ": " +
                               strerror(errno));
  } else if (::mkdir(templ.c_str(), 0700) != 0 && errno != EEXIST) {
    throw std::runtime_error("cluster TLS: cannot make " + templ + ": " + strerror(errno));
  }
  TlsFiles files{templ, templ + "/ca.pem", templ + "/cert.pem", templ + "/key.pem"};
  try {
    FILE* f = open_private(files.ca);
    close_checked(f, PEM_write_X509(f, ca.get()) == 1, files.ca);
    f = open_private(files.cert);
    close_checked(f, PEM_write_X509(f, cert.get()) == 1, files.cert);
    f = open_private(files.key);
    close_checked(f, PEM_write_PrivateKey(f, key.get(), nullptr, nullptr, 0, nullptr, nullptr) == 1,
                  files.key);
  } catch (...) {
    remove_cluster_tls(files);
    throw;
  }
  return files;
}

void remove_cluster_tls(const TlsFiles& files) {
  for (const auto& p : {files.ca, files.cert, files.key})
    if (!p.empty()) ::unlink(p.c_str());
  if (!files.dir.empty()) ::rmdir(files.dir.c_str());
}

}  // namespace swarmrt::credential
