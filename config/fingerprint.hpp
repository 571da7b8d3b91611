// What two nodes of one swarm must agree on before they train together: the protocol version
// and every config key that changes the math (model shape, batch, optimizer, mode, DiLoCo).
// Keys that are a node's own business (threads, logging, data path, checkpoints, fault
// injection) are left out, so two machines may keep their data in different places.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "config/config.hpp"

namespace swarmrt::config {

// 4: bulk planes open with the credential handshake (and may run TLS); CAF over mutual TLS.
// 5: a join names its run id. 6: counters travel as WorkerStats and GroupStats.
// 9: a join's reply lists the run's coordinator replicas.
// 10: a join names the stage states the node kept (a takeover continues from them).
constexpr uint32_t kProtocolVersion = 10;

// The shared keys as "section.key = value" lines, in a fixed order.
std::string fingerprint_text(const RunConfig& config);
// A short hash of fingerprint_text and the protocol version, for logs and handshakes.
std::string fingerprint(const RunConfig& config);

// Each shared key whose value differs, as "model.n_layer: 4 here, 6 there". Empty when the
// two fingerprints match.
std::vector<std::string> fingerprint_mismatch(const std::string& mine, const std::string& theirs);

}  // namespace swarmrt::config
