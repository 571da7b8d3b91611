// swarmrt launch --local N --config FILE         (a coordinator and N nodes on this machine)
// swarmrt launch --hostfile FILE --config FILE --listen HOST:PORT   (nodes over ssh)
// swarmrt launch --from-env --config FILE   (one task of a Slurm, Kubernetes or torchrun job)
// Its options; launch/launch.cpp starts the coordinator, then the nodes once it listens,
// streams every process's output with a prefix, and stops them all by pid when the run ends,
// on Ctrl-C, or when no node is left.
#include <CLI/CLI.hpp>
#include <memory>

#include "apps/commands.hpp"
#include "apps/net.hpp"
#include "apps/options.hpp"
#include "launch/launch.hpp"

namespace swarmrt::apps {

void add_launch_command(CLI::App& app, int& exit_code) {
  auto args = std::make_shared<launch::LaunchArgs>();
  auto* cmd = app.add_subcommand("launch", "start a coordinator and its nodes, here or over ssh");
  auto* local = cmd->add_option("--local", args->local, "run N nodes on this machine")
                    ->check(CLI::Range(1, 64));
  auto* hostfile =
      cmd->add_option("--hostfile", args->hostfile, "start one node per hostfile line over ssh")
          ->excludes(local);
  cmd->add_flag("--from-env", args->from_env,
                "be the coordinator (rank 0) or a node of a job that Slurm (srun), Kubernetes "
                "(an Indexed Job) or a torchrun-style launcher started, as its variables say")
      ->excludes(local)
      ->excludes(hostfile);
  add_config_options(*cmd, args->config, args->overrides);
  add_run_dir_options(*cmd, args->out, args->resume, args->overwrite);
  cmd->add_option("--workers,-w", args->workers,
                  "workers per node (default: --local spreads the swarm's evenly, --from-env "
                  "runs one per CPU or GPU of the task)");
  cmd->add_option("--port", args->env.port,
                  "--from-env: rank 0's port (default MASTER_PORT, under Slurm 20000 + "
                  "SLURM_JOB_ID % 20000)");
  cmd->add_option("--listen-addr", args->env.listen_addr,
                  "--from-env: the address other hosts reach this node on (default: its host "
                  "name's, SLURMD_NODENAME or POD_IP)");
  cmd->add_option("--stop-grace-s", args->env.stop_grace_s,
                  "--from-env: after SIGTERM or SIGUSR1 a node serves this long more, for the "
                  "coordinator's checkpoint and stop")
      ->capture_default_str();
  cmd->add_option("--signal-checkpoint-s", args->env.signal_checkpoint_s,
                  "--from-env: after SIGTERM or SIGUSR1 the coordinator waits this long for a "
                  "checkpoint before it stops the swarm")
      ->capture_default_str();
  cmd->add_option("--connect-timeout-s", args->env.connect_timeout_s,
                  "--from-env: a node keeps trying to reach rank 0 this long")
      ->capture_default_str();
  cmd->add_flag("--dry-run", args->env.dry_run,
                "--from-env: print this rank's place and the command it would run, and exit");
  cmd->add_option("--listen", args->listen, "the coordinator's HOST:PORT")->capture_default_str();
  cmd->add_option("--http", args->http,
                  "the coordinator's status page and /metrics on HOST:PORT (its token in "
                  "RUN_DIR/http_token)");
  cmd->add_option("--ssh-option", args->ssh_options, "an ssh -o option (repeatable)");
  cmd->add_option("--grace-s", args->grace_s,
                  "after the coordinator exits, wait this long for nodes before SIGTERM")
      ->capture_default_str();
  cmd->add_option("--coordinators", args->coordinators,
                  "--local: coordinator replicas; above 1 they elect a leader in a private etcd "
                  "(under the run directory) and a standby continues the run if the leader dies")
      ->capture_default_str()
      ->check(CLI::Range(1, 9));
  cmd->add_option("--lease-ttl-s", args->lease_ttl_s,
                  "with --coordinators above 1: the leader's lease (a standby takes over this "
                  "long after the leader stops renewing it)")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{1}, int64_t{600}));
  add_net_options(*cmd, args->net);
  cmd->callback([args, &exit_code] { exit_code = launch::run(*args); });
}

}  // namespace swarmrt::apps
