// The cluster credential: the plane handshake between two ends of a socket pair, secret files,
// and the secret-derived certificates of the control plane.
#include <gtest/gtest.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509_vfy.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <future>
#include <set>
#include <string>

#include "credential/cluster_tls.hpp"
#include "credential/credential.hpp"

using namespace swarmrt::credential;
using namespace std::chrono_literals;

namespace {

struct Pair {
  int fd[2] = {-1, -1};
  Pair() { EXPECT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, fd), 0); }
  ~Pair() {
    for (int f : fd)
      if (f >= 0) close(f);
  }
};

// Both ends at once; returns (initiator's answer, responder's answer).
std::pair<std::string, std::string> handshake(const std::string& a, const std::string& b) {
  Pair p;
  const auto ka = derive_key(a, "swarmrt bulk plane v1");
  const auto kb = derive_key(b, "swarmrt bulk plane v1");
  auto responder =
      std::async(std::launch::async, [&] { return authenticate(p.fd[1], false, 2s, kb); });
  auto initiator = authenticate(p.fd[0], true, 2s, ka);
  return {initiator, responder.get()};
}

X509* load_cert(const std::string& path) {
  FILE* f = std::fopen(path.c_str(), "r");
  X509* x = f ? PEM_read_X509(f, nullptr, nullptr, nullptr) : nullptr;
  if (f) std::fclose(f);
  return x;
}

// Whether `cert` verifies against the CA certificate in `ca`.
bool verifies(const std::string& ca, const std::string& cert) {
  X509_STORE* store = X509_STORE_new();
  X509* anchor = load_cert(ca);
  X509* leaf = load_cert(cert);
  X509_STORE_add_cert(store, anchor);
  X509_STORE_CTX* ctx = X509_STORE_CTX_new();
  X509_STORE_CTX_init(ctx, store, leaf, nullptr);
  const bool ok = X509_verify_cert(ctx) == 1;
  X509_STORE_CTX_free(ctx);
  X509_free(leaf);
  X509_free(anchor);
  X509_STORE_free(store);
  return ok;
}

}  // namespace

TEST(Credential, HoldersOfTheSameSecretAdmitEachOther) {
  const auto [a, b] = handshake("s3cret", "s3cret");
  EXPECT_EQ(a, "");
  EXPECT_EQ(b, "");
}

TEST(Credential, AWrongSecretIsRefusedAndBothSidesSayWhy) {
  const auto [initiator, responder] = handshake("s3cret", "guess");
  EXPECT_NE(responder.find("does not hold the cluster credential"), std::string::npos) << responder;
  // The initiator learns it from the responder's verdict, or finds the responder's proof
  // wrong itself: either way it names the credential.
  EXPECT_NE(initiator.find("credential"), std::string::npos) << initiator;
}

TEST(Credential, SomethingElseThanTheHandshakeIsRefused) {
  Pair p;
  auto responder = std::async(std::launch::async, [&] { return authenticate(p.fd[1], false, 2s); });
  const std::string junk(40, 'x');
  ASSERT_EQ(write(p.fd[0], junk.data(), junk.size()), static_cast<ssize_t>(junk.size()));
  EXPECT_NE(responder.get().find("does not speak swarmrt's plane handshake"), std::string::npos);
}

TEST(Credential, SilenceEndsAtTheTimeout) {
  Pair p;
  const auto start = std::chrono::steady_clock::now();
  const auto why = authenticate(p.fd[1], false, 300ms);
  EXPECT_NE(why.find("no credential within the handshake timeout"), std::string::npos) << why;
  EXPECT_GE(std::chrono::steady_clock::now() - start, 300ms);
}

TEST(Credential, SecretsAreRandomAndFilesArePrivate) {
  const auto a = generate_secret(), b = generate_secret();
  EXPECT_EQ(a.size(), 64u);
  EXPECT_NE(a, b);
  const auto dir = std::filesystem::temp_directory_path() / ("cred-" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  const auto path = (dir / "secret").string();
  write_secret_file(path, a);
  struct stat st {};
  ASSERT_EQ(stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  EXPECT_EQ(read_secret_file(path), a);
  std::ofstream(dir / "empty") << "\n";
  EXPECT_THROW(read_secret_file((dir / "empty").string()), std::runtime_error);
  EXPECT_THROW(read_secret_file((dir / "absent").string()), std::runtime_error);
  std::filesystem::remove_all(dir);
  EXPECT_TRUE(equal_secrets("abc", "abc"));
  EXPECT_FALSE(equal_secrets("abc", "abd"));
  EXPECT_FALSE(equal_secrets("abc", "abcd"));
}

// Every holder of a secret derives the same cluster CA: a certificate made by one process
// verifies against another's CA file; one of another cluster (another secret) does not.
TEST(ClusterTls, TheSameSecretMakesTheSameCaAnotherSecretDoesNot) {
  const auto a = write_cluster_tls("cluster-a", "node-a");
  const auto b = write_cluster_tls("cluster-a", "node-b");
  const auto c = write_cluster_tls("cluster-c", "node-c");
  EXPECT_TRUE(verifies(a.ca, b.cert));
  EXPECT_TRUE(verifies(b.ca, a.cert));
  EXPECT_FALSE(verifies(a.ca, c.cert));
  EXPECT_FALSE(verifies(c.ca, a.cert));
  EXPECT_EQ(cluster_ca_id("cluster-a"), cluster_ca_id("cluster-a"));
  EXPECT_NE(cluster_ca_id("cluster-a"), cluster_ca_id("cluster-c"));
  struct stat st {};
  ASSERT_EQ(stat(a.key.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  for (const auto& f : {a, b, c}) remove_cluster_tls(f);
  EXPECT_FALSE(std::filesystem::exists(a.dir));
}

// The status page's token: hex of 32 bytes, the same for the same secret, another for another
// secret, and never the secret itself.
TEST(Credential, HttpTokenIsDerivedNotTheSecret) {
  const std::string secret = "cluster-secret-for-the-token-test";
  const auto token = swarmrt::credential::http_token(secret);
  EXPECT_EQ(token.size(), 64u);
  EXPECT_EQ(token.find_first_not_of("0123456789abcdef"), std::string::npos);
  EXPECT_EQ(token, swarmrt::credential::http_token(secret));
  EXPECT_NE(token, swarmrt::credential::http_token(secret + "x"));
  EXPECT_EQ(token.find(secret), std::string::npos);
}
