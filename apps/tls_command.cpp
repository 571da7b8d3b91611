// swarmrt tls --out DIR --host H[,H...]: the cluster's certificates as files, for a service the
// swarm talks to over TLS, such as the etcd members of coordinator replicas. The CA comes from
// the cluster secret (credential/cluster_tls.hpp), so an etcd started with these files admits
// only holders of the secret, and the coordinators trust it without any file of their own.
#include <spdlog/spdlog.h>

#include <CLI/CLI.hpp>
#include <filesystem>

#include "apps/commands.hpp"
#include "apps/net.hpp"

namespace swarmrt::apps {

void add_tls_command(CLI::App& app, int& exit_code) {
  struct Args {
    std::string out;
    std::vector<std::string> hosts{"127.0.0.1", "localhost"};
    NetOptions net;
  };
  auto args = std::make_shared<Args>();
  auto* cmd = app.add_subcommand(
      "tls",
      "write the cluster CA certificate and a certificate with its key, all from the cluster "
      "secret, for a TLS service of the swarm (an etcd member: --trusted-ca-file ca.pem "
      "--cert-file cert.pem --key-file key.pem --client-cert-auth)");
  cmd->add_option("--out", args->out, "directory for ca.pem, cert.pem and key.pem (made 0700)")
      ->required();
  cmd->add_option("--host", args->hosts,
                  "addresses or names the service is reached at (its certificate's "
                  "subjectAltName; clients check the address they dial against it)")
      ->delimiter(',')
      ->capture_default_str();
  cmd->add_option("--secret-file", args->net.secret_file,
                  "file holding the cluster secret, first line (default: $SWARMRT_SECRET)");
  cmd->callback([args, &exit_code] {
    exit_code = 1;
    try {
      const auto secret = resolve_secret(args->net);
      if (secret.empty()) {
        spdlog::error("tls: no cluster secret (SWARMRT_SECRET or --secret-file)");
        exit_code = 2;
        return;
      }
      for (const char* f : {"ca.pem", "cert.pem", "key.pem"})
        if (std::filesystem::exists(std::filesystem::path(args->out) / f)) {
          spdlog::error("tls: {} already holds {}: remove it or choose another --out", args->out,
                        f);
          exit_code = 2;
          return;
        }
      std::string hosts;
      for (const auto& h : args->hosts) hosts += (hosts.empty() ? "" : ",") + h;
      const auto files =
          credential::write_cluster_tls(secret, "swarmrt service " + hosts, args->hosts, args->out);
      std::printf("wrote %s, %s and %s (cluster CA %s; certificate for %s)\n", files.ca.c_str(),
                  files.cert.c_str(), files.key.c_str(), credential::cluster_ca_id(secret).c_str(),
                  hosts.c_str());
      exit_code = 0;
    } catch (const std::exception& e) {
      spdlog::error("tls: {}", e.what());
    }
  });
}

}  // namespace swarmrt::apps
