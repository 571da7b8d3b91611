// Where this process stands in a job a cluster scheduler started: its rank, the world size,
// rank 0's address and what the task was given, read from the variables Slurm (srun),
// torchrun-style launchers (torchrun, Kubeflow's PyTorchJob and Trainer) and Kubernetes
// Indexed Jobs set. `swarmrt launch --from-env` turns it into a coordinator (rank 0) or a
// node (every other rank). Plain code: no CAF, no torch, the environment passed in, so every
// refusal is unit-tested.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace swarmrt::launch {

// A variable's value, or nothing when it is not set.
using Env = std::function<std::optional<std::string>(const std::string& name)>;
// The process's own environment.
Env process_env();

enum class Scheduler { slurm, torchrun, kubernetes };
const char* name_of(Scheduler s);

struct Place {
  Scheduler scheduler = Scheduler::slurm;
  uint32_t rank = 0;
  uint32_t world = 0;
  uint32_t local_rank = 0;
  std::string head;  // rank 0's host name or address
  uint16_t port = 0;
  std::string self_host;          // this task's host as the others name it; empty: unknown
  uint32_t cpus = 0;              // CPUs given to this task; 0: not said
  std::vector<std::string> gpus;  // CUDA_VISIBLE_DEVICES' entries
  std::string job;                // what the ranks of one job share (SLURM_JOB_ID, ...)
  std::vector<std::string> read;  // NAME=VALUE of every variable the place came from

  bool coordinator() const { return rank == 0; }
  // A node serves one worker per GPU, else one per CPU (at least one).
  uint32_t workers() const;
  // The run's id, the same on every rank of a job that agrees on its world size: a rank that
  // read another world size gets another id, and the coordinator refuses its join.
  uint64_t run_id() const;
  std::string describe() const;  // "slurm rank 1 of 3 (SLURM_PROCID=1 SLURM_NTASKS=3 ...)"
};

struct PlaceOptions {
  uint16_t port = 0;  // --port; 0: from the environment
  // Slurm's node list to its first host name (`scontrol show hostnames`); empty: the
  // built-in reading (first_slurm_host).
  std::function<std::string(const std::string& nodelist)> first_host;
};

// A variable missing or holding something unusable: the message names it and its value.
struct PlaceError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Throws PlaceError naming the variable and its value when the environment does not make
// a place: no scheduler's variables, a rank not below the world, a world of one, no head
// address, two sources that disagree (SLURM_NTASKS against WORLD_SIZE), a bad number.
Place read_place(const Env& env, const PlaceOptions& options = {});

// The first host of a Slurm host list ("gpu[03-05,9],cpu1" -> "gpu03"); throws PlaceError
// on a list it cannot read.
std::string first_slurm_host(const std::string& nodelist);

}  // namespace swarmrt::launch
