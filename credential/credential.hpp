// The cluster credential: one secret that every process of a swarm holds, and what each plane
// derives from it (architecture §8). Nothing here knows CAF or torch.
//
//  - Bulk planes (frame links, TCP communicators) run a mutual challenge–response on every new
//    connection before any frame is read: both sides send a nonce, then an HMAC-SHA256 of both
//    nonces under a key derived from the secret (labelled by role, so a proof cannot be
//    reflected back), then a verdict byte, so both sides can say why a connection was refused.
//  - The CAF control plane runs over mutual TLS with certificates of a cluster CA whose key is
//    derived from the same secret (cluster_tls.hpp).
//
// Secrets never travel on a command line and are compared in constant time.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <string>

namespace swarmrt::credential {

// A fresh random secret (32 bytes from OpenSSL's CSPRNG, hex).
std::string generate_secret();

// Reads a secret from a file: the first line, trimmed. Throws std::runtime_error naming the
// file when it cannot be read or is empty, and warns (through the returned `warning`) when
// other users may read it.
std::string read_secret_file(const std::string& path, std::string* warning = nullptr);
// Writes `secret` to `path` with mode 0600 (temporary file, fsync, rename). Throws on failure.
void write_secret_file(const std::string& path, const std::string& secret);

// HMAC-SHA256(secret, label): the key of one use of the secret.
std::array<uint8_t, 32> derive_key(const std::string& secret, const std::string& label);

// The secret this process's bulk planes authenticate with. Until one is set, a random one is
// made at first use: such a process's planes admit only itself.
void set_cluster_secret(const std::string& secret);

// The status page's token (`coordinator --http`): hex of a key derived from the secret under
// its own label, so the page's cookie or bearer token is not the secret itself and proves
// nothing on the other planes.
std::string http_token(const std::string& secret);
// The secret set (or made) for this process's bulk planes; its TLS derives from it too.
std::string cluster_secret();

// The challenge–response on a connected socket, `initiator` being the side that connected.
// Returns an empty string when both sides hold the credential, otherwise why not (the peer
// does not hold it, it refused ours, it is not a swarmrt plane, it said nothing in time).
// Bounded: 81 bytes each way, every read waits at most until `timeout` has passed.
std::string authenticate(int fd, bool initiator, std::chrono::milliseconds timeout);
// The same with an explicit key (derive_key(secret, "swarmrt bulk plane v1")).
std::string authenticate(int fd, bool initiator, std::chrono::milliseconds timeout,
                         const std::array<uint8_t, 32>& key);

// Constant-time comparison of two byte strings (the length is not secret).
bool equal_secrets(const std::string& a, const std::string& b);

}  // namespace swarmrt::credential
