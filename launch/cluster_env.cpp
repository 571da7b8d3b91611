#include "launch/cluster_env.hpp"

#include <cstdlib>
#include <limits>

namespace swarmrt::launch {
namespace {

// Records what was read, so the log line and every refusal show the values they rest on.
struct Reader {
  const Env& env;
  std::vector<std::string>& read;

  std::optional<std::string> get(const std::string& name) {
    auto v = env(name);
    if (v) read.push_back(name + "=" + *v);
    return v;
  }
  // An unsigned decimal number, or nothing when the variable is not set.
  std::optional<uint64_t> number(const std::string& name, uint64_t max) {
    const auto v = get(name);
    if (!v) return std::nullopt;
    if (v->empty() || v->size() > 19 || v->find_first_not_of("0123456789") != std::string::npos)
      throw PlaceError(name + "='" + *v + "': not a non-negative integer");
    const uint64_t n = std::stoull(*v);
    if (n > max)
      throw PlaceError(name + "=" + *v + ": above the largest allowed, " + std::to_string(max));
    return n;
  }
  uint64_t required(const std::string& name, uint64_t max, const std::string& why) {
    const auto n = number(name, max);
    if (!n) throw PlaceError(name + " is not set: " + why);
    return *n;
  }
  std::string text(const std::string& name, const std::string& why) {
    auto v = get(name);
    if (!v || v->empty()) throw PlaceError(name + " is not set: " + why);
    return *v;
  }
  // The first of several names that is set (torchrun's and Kubeflow's PET_ spellings).
  std::optional<std::string> first_set(std::initializer_list<const char*> names) {
    for (const char* n : names)
      if (env(n)) return std::string(n);
    return std::nullopt;
  }
};

constexpr uint64_t kMaxRank = std::numeric_limits<uint32_t>::max();

// Two variables that both say the same thing must agree (a torchrun under srun, a
// hand-set WORLD_SIZE beside Slurm's).
void must_agree(Reader& r, const std::string& ours, uint64_t value, const std::string& other) {
  const auto theirs = r.number(other, kMaxRank);
  if (theirs && *theirs != value)
    throw PlaceError(ours + "=" + std::to_string(value) + " but " + other + "=" +
                     std::to_string(*theirs) + ": the two disagree");
}

uint16_t port_from(Reader& r, const PlaceOptions& o, const std::string& name, bool required) {
  if (o.port != 0) return o.port;
  const auto p = r.number(name, 65535);
  if (p && *p == 0) throw PlaceError(name + "=0: not a port");
  if (p) return static_cast<uint16_t>(*p);
  if (required) throw PlaceError(name + " is not set: the ranks cannot find rank 0's port");
  return 0;
}

std::vector<std::string> visible_gpus(Reader& r) {
  std::vector<std::string> gpus;
  const auto v = r.get("CUDA_VISIBLE_DEVICES");
  // Slurm writes NoDevFiles when a job has no GPU; an empty list hides every GPU.
  if (!v || v->empty() || *v == "NoDevFiles") return gpus;
  size_t start = 0;
  while (start <= v->size()) {
    const size_t end = v->find(',', start);
    const std::string item =
        v->substr(start, end == std::string::npos ? std::string::npos : end - start);
    if (item.empty()) throw PlaceError("CUDA_VISIBLE_DEVICES='" + *v + "': an empty entry");
    gpus.push_back(item);
    if (end == std::string::npos) break;
    start = end + 1;
  }
  return gpus;
}

Place slurm_place(Reader& r, const PlaceOptions& o) {
  Place p;
  p.scheduler = Scheduler::slurm;
  p.rank = static_cast<uint32_t>(r.required("SLURM_PROCID", kMaxRank, ""));
  p.world = static_cast<uint32_t>(
      r.required("SLURM_NTASKS", kMaxRank, "srun sets it beside SLURM_PROCID; run under srun"));
  p.local_rank = static_cast<uint32_t>(r.number("SLURM_LOCALID", kMaxRank).value_or(0));
  must_agree(r, "SLURM_NTASKS", p.world, "WORLD_SIZE");
  const auto job = r.number("SLURM_JOB_ID", std::numeric_limits<uint64_t>::max() / 2);
  // MASTER_ADDR, when the job script sets one, names the head; else the step's first node,
  // where srun's block distribution puts task 0.
  if (auto addr = r.get("MASTER_ADDR"); addr && !addr->empty()) {
    p.head = *addr;
  } else {
    const auto list_name = r.first_set({"SLURM_STEP_NODELIST", "SLURM_JOB_NODELIST"});
    const std::string list =
        r.text(list_name.value_or("SLURM_JOB_NODELIST"), "cannot tell which host runs rank 0");
    p.head = o.first_host ? o.first_host(list) : first_slurm_host(list);
    if (p.head.empty()) throw PlaceError(*list_name + "='" + list + "': no host name in the list");
  }
  p.port = port_from(r, o, "MASTER_PORT", false);
  if (p.port == 0) {
    // One port per job, so two jobs sharing a node do not collide.
    if (!job)
      throw PlaceError(
          "SLURM_JOB_ID is not set and neither MASTER_PORT nor --port is given: no port for "
          "rank 0");
    p.port = static_cast<uint16_t>(20000 + *job % 20000);
  }
  p.job = "slurm:" + (job ? std::to_string(*job) : p.head + ":" + std::to_string(p.port));
  if (auto n = r.get("SLURMD_NODENAME")) p.self_host = *n;
  p.cpus = static_cast<uint32_t>(r.number("SLURM_CPUS_PER_TASK", 4096).value_or(0));
  p.gpus = visible_gpus(r);
  return p;
}

// torchrun, Kubeflow's PyTorchJob (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT) and its
// Trainer v2 (PET_NODE_RANK, PET_NNODES, PET_MASTER_ADDR, PET_MASTER_PORT); a Kubernetes
// Indexed Job's JOB_COMPLETION_INDEX stands for the rank where no RANK is set.
Place torchrun_place(Reader& r, const PlaceOptions& o, const std::string& rank_name) {
  Place p;
  p.scheduler = rank_name == "JOB_COMPLETION_INDEX" ? Scheduler::kubernetes : Scheduler::torchrun;
  p.rank = static_cast<uint32_t>(r.required(rank_name, kMaxRank, ""));
  const std::string world_name = r.first_set({"WORLD_SIZE", "PET_NNODES"}).value_or("WORLD_SIZE");
  p.world = static_cast<uint32_t>(
      r.required(world_name, kMaxRank,
                 p.scheduler == Scheduler::kubernetes
                     ? "an Indexed Job does not tell its pods how many there are; set it to "
                       "the Job's completions"
                     : "the launcher sets it beside the rank"));
  if (world_name == "WORLD_SIZE") must_agree(r, "WORLD_SIZE", p.world, "PET_NNODES");
  p.local_rank = static_cast<uint32_t>(r.number("LOCAL_RANK", kMaxRank).value_or(0));
  const std::string addr_name =
      r.first_set({"MASTER_ADDR", "PET_MASTER_ADDR"}).value_or("MASTER_ADDR");
  p.head = r.text(addr_name, "the ranks cannot find rank 0");
  const std::string port_name =
      r.first_set({"MASTER_PORT", "PET_MASTER_PORT"}).value_or("MASTER_PORT");
  p.port = port_from(r, o, port_name, true);
  p.job = std::string(name_of(p.scheduler)) + ":" + p.head + ":" + std::to_string(p.port);
  // A pod's own address, where the manifest passes it (downward API), else its host name.
  if (auto ip = r.get("POD_IP"); ip && !ip->empty()) p.self_host = *ip;
  // No launcher of these says how many CPUs a task has; a pod's manifest can, from its CPU
  // request (downward API).
  p.cpus = static_cast<uint32_t>(r.number("SWARMRT_CPUS", 4096).value_or(0));
  p.gpus = visible_gpus(r);
  return p;
}

}  // namespace

Env process_env() {
  return [](const std::string& name) -> std::optional<std::string> {
    const char* v = std::getenv(name.c_str());
    if (!v) return std::nullopt;
    return std::string(v);
  };
}

const char* name_of(Scheduler s) {
  switch (s) {
    case Scheduler::slurm:
      return "slurm";
    case Scheduler::torchrun:
      return "torchrun";
    case Scheduler::kubernetes:
      return "kubernetes";
  }
  return "?";
}

uint32_t Place::workers() const {
  if (!gpus.empty()) return static_cast<uint32_t>(gpus.size());
  return cpus > 0 ? cpus : 1;
}

uint64_t Place::run_id() const {
  // FNV-1a over what every rank of the job reads alike.
  const std::string key =
      std::string("swarmrt|") + name_of(scheduler) + "|" + job + "|world=" + std::to_string(world);
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : key) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h == 0 ? 1 : h;
}

std::string Place::describe() const {
  std::string s = std::string(name_of(scheduler)) + " rank " + std::to_string(rank) + " of " +
                  std::to_string(world) + " (";
  for (size_t i = 0; i < read.size(); ++i) s += (i ? " " : "") + read[i];
  return s + ")";
}

Place read_place(const Env& env, const PlaceOptions& options) {
  std::vector<std::string> read;
  Reader r{env, read};
  Place p;
  // The launcher closest to this process wins: torchrun sets RANK for the processes it
  // starts, also when srun started torchrun.
  if (env("RANK")) {
    p = torchrun_place(r, options, "RANK");
  } else if (env("PET_NODE_RANK")) {
    p = torchrun_place(r, options, "PET_NODE_RANK");
  } else if (env("SLURM_PROCID")) {
    p = slurm_place(r, options);
  } else if (env("JOB_COMPLETION_INDEX")) {
    p = torchrun_place(r, options, "JOB_COMPLETION_INDEX");
  } else {
    throw PlaceError(
        "no scheduler's variables in the environment: launch --from-env reads SLURM_PROCID "
        "(under srun), RANK with WORLD_SIZE, MASTER_ADDR and MASTER_PORT (torchrun, Kubeflow), "
        "or JOB_COMPLETION_INDEX with WORLD_SIZE, MASTER_ADDR and MASTER_PORT (a Kubernetes "
        "Indexed Job)");
  }
  p.read = read;
  const std::string rank_var =
      read.empty() ? "rank" : read.front().substr(0, read.front().find('='));
  if (p.world < 2)
    throw PlaceError("world size " + std::to_string(p.world) + " (" + p.describe() +
                     "): a swarm needs rank 0, the coordinator, and at least one node");
  if (p.rank >= p.world)
    throw PlaceError(rank_var + "=" + std::to_string(p.rank) + " is not below the world size " +
                     std::to_string(p.world) + " (" + p.describe() + ")");
  return p;
}

std::string first_slurm_host(const std::string& nodelist) {
  // The first entry before a top-level comma; in each bracket, the first number of the first
  // range ("[03-05,9]" -> "03", zero padding kept).
  std::string host;
  size_t i = 0;
  while (i < nodelist.size() && nodelist[i] != ',') {
    const char c = nodelist[i];
    if (c == '[') {
      const size_t close = nodelist.find(']', i);
      if (close == std::string::npos)
        throw PlaceError("node list '" + nodelist + "': a '[' without its ']'");
      const std::string inside = nodelist.substr(i + 1, close - i - 1);
      const size_t end = inside.find_first_of(",-");
      const std::string first = inside.substr(0, end);
      if (first.empty() || first.find_first_not_of("0123456789") != std::string::npos)
        throw PlaceError("node list '" + nodelist + "': '[" + inside + "]' is not a range");
      host += first;
      i = close + 1;
    } else if (c == ']') {
      throw PlaceError("node list '" + nodelist + "': a ']' without its '['");
    } else {
      host += c;
      ++i;
    }
  }
  if (host.empty()) throw PlaceError("node list '" + nodelist + "': no host name");
  return host;
}

}  // namespace swarmrt::launch
