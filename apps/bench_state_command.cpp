// swarmrt bench state [--preset gpt2-small] [--donors 1,4] [--joiners 8] [--out FILE.json]
//                     [--listen HOST] [--donor-listen HOST] [--donor-prefix "CMD ..."]
//                     ("{i}" in the last two: the donor's index, for a namespace each)
//
// How fast a joiner takes a worker's whole state from donors in other processes
// (actors/recovery/): the state of one stage holding the whole model (its parameters and
// AdamW's two moments after one step), served by donor processes (this binary again, with
// --serve-donor) over the control plane (mutual TLS) and the frame links, and fetched by this
// process. Cases:
//   from K donors    for each K of --donors: seconds and MiB/s of the fetch
//   donor killed     the most donors; one donor's process SIGKILLed halfway through (at half
//                    the time the same fetch took unharmed): chunks asked again, against that
//                    donor's window of unfinished chunks
//   joiners at once  --joiners fetchers at once from one donor serving recovery.max_joiners at a
//                    time, on a state of --joiners-layers layers (so that every joiner's copy
//                    fits in memory); the donor's peak RSS (VmHWM) against its snapshot's size
// --donor-prefix runs each donor under a command (such as `ip netns exec NS`), for links
// shaped between network namespaces (bench/state_transfer.sh).
#include <signal.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <caf/openssl/publish.hpp>
#include <caf/openssl/remote_actor.hpp>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "actors/common/tensor_list.hpp"
#include "actors/recovery/state_donor.hpp"
#include "actors/recovery/state_fetcher.hpp"
#include "apps/commands.hpp"
#include "apps/net.hpp"
#include "credential/credential.hpp"
#include "model/optim.hpp"
#include "model/stage_model.hpp"
#include "transport/bulk.hpp"

namespace swarmrt::apps {
namespace {
using namespace swarmrt::atoms;
using Clock = std::chrono::steady_clock;

struct StateArgs {
  std::string preset = "gpt2-small", out = "bench/results/state_transfer.json";
  std::vector<int> donors = {1, 4};
  int joiners = 8, joiners_layers = 2, layers = 0, chunk_mib = 4, window = 4, max_joiners = 4;
  std::string listen = "127.0.0.1", donor_listen = "127.0.0.1", donor_prefix;
  bool serve_donor = false;
};

// A stage holding the whole model after one AdamW step: what a joiner of it takes.
messages::WorkerState stage_state(const StateArgs& a, int layers) {
  auto model = config::model_preset(a.preset);
  if (layers > 0) model.n_layer = layers;
  config::TrainConfig train;
  auto module = model::make_stage_model(model, model::StageSpec{0, 1}, 1);
  auto opt = model::make_adamw(*module, train);
  at::manual_seed(2);
  for (auto& p : module->parameters()) p.mutable_grad() = at::randn_like(p) * 1e-3;
  model::adamw_step(*opt);
  messages::WorkerState st;
  st.params = actors::to_list(model::parameters_of(*module));
  st.moments = actors::to_list(model::adamw_moments(*opt));
  st.step = 1;
  st.source = "stage 0";
  return st;
}

int64_t vm_hwm_kib(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  for (std::string line; std::getline(in, line);)
    if (line.rfind("VmHWM:", 0) == 0) return std::stoll(line.substr(6));
  return -1;
}

int serve_donor(const StateArgs& a) {
  credential::NetOptions net;
  const auto secret = credential::resolve_secret(net);
  if (secret.empty()) throw std::invalid_argument("a donor needs SWARMRT_SECRET");
  std::atomic<bool> stop{false};
  launch::StopSignals signals([&](int) { stop = true; });
  caf::actor_system_config cfg;
  auto files = configure_network(cfg, net, secret, "donor");
  caf::actor_system sys{cfg};
  const auto endpoint = transport::start_bulk_server(a.donor_listen);
  auto store = std::make_shared<actors::recovery::SnapshotStore>();
  store->put(actors::recovery::make_snapshot(sys, stage_state(a, a.layers),
                                             static_cast<uint32_t>(a.chunk_mib) << 20));
  auto anchor = sys.spawn([](caf::event_based_actor*) -> caf::behavior { return {[](int) {}}; });
  actors::recovery::DonorLimits limits;
  limits.max_joiners = static_cast<uint32_t>(a.max_joiners);
  auto donor = sys.spawn(actors::recovery::state_donor, anchor, store, limits);
  auto port = caf::openssl::publish(donor, 0, a.donor_listen.c_str(), true);
  if (!port) throw std::runtime_error("cannot publish the donor: " + sys.render(port.error()));
  std::printf("ready %u %llu %s\n", *port,
              static_cast<unsigned long long>(store->get()->manifest.total), endpoint.c_str());
  std::fflush(stdout);
  while (!stop) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  caf::anon_send_exit(anchor, caf::exit_reason::user_shutdown);
  return 0;
}

struct Donor {
  std::unique_ptr<launch::Child> child;
  uint16_t port = 0;
  uint64_t bytes = 0;
  caf::actor handle;
};

// `text` with every "{i}" replaced by `index` (a donor's own namespace and address).
std::string for_donor(std::string text, int index) {
  for (size_t at; (at = text.find("{i}")) != std::string::npos;)
    text.replace(at, 3, std::to_string(index));
  return text;
}

Donor start_donor(caf::actor_system& sys, const StateArgs& a, int layers, int index) {
  std::vector<std::string> argv;
  const auto listen = for_donor(a.donor_listen, index);
  if (!a.donor_prefix.empty()) {
    std::istringstream words(for_donor(a.donor_prefix, index));
    for (std::string w; words >> w;) argv.push_back(w);
  }
  argv.insert(argv.end(),
              {"/proc/self/exe", "bench", "state", "--serve-donor", "--preset", a.preset,
               "--layers", std::to_string(layers), "--chunk-mib", std::to_string(a.chunk_mib),
               "--max-joiners", std::to_string(a.max_joiners), "--donor-listen", listen});
  char self_exe[4096];
  const auto n = readlink("/proc/self/exe", self_exe, sizeof(self_exe) - 1);
  if (n > 0)
    for (auto& w : argv)
      if (w == "/proc/self/exe") w.assign(self_exe, static_cast<size_t>(n));
  Donor d;
  d.child = std::make_unique<launch::Child>("donor " + std::to_string(index), argv);
  const auto deadline = Clock::now() + std::chrono::minutes(5);
  while (d.port == 0) {
    if (Clock::now() > deadline || !d.child->running())
      throw std::runtime_error("donor " + std::to_string(index) + " did not start");
    for (const auto& line : d.child->read_lines()) {
      unsigned port = 0;
      unsigned long long bytes = 0;
      if (std::sscanf(line.c_str(), "ready %u %llu", &port, &bytes) == 2) {
        d.port = static_cast<uint16_t>(port);
        d.bytes = bytes;
      } else if (!line.empty()) {
        spdlog::info("donor {}: {}", index, line);
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  const auto at = parse_host_port(listen + ":" + std::to_string(d.port), false);
  auto found = reach_coordinator(sys, at, Clock::now() + std::chrono::seconds(60), true, {}, {});
  if (!found.directory)
    throw std::runtime_error("cannot reach donor " + std::to_string(index) + ": " + found.error);
  d.handle = found.directory;
  return d;
}

void stop_donors(std::vector<Donor>& donors) {
  for (auto& d : donors)
    if (d.child->running()) d.child->signal(SIGTERM);
  for (auto& d : donors)
    for (int i = 0; i < 200 && d.child->running(); ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
}

// One fetch from `donors`; `during` runs on this thread while it is under way.
std::shared_ptr<actors::recovery::FetchReport> fetch(caf::actor_system& sys, const StateArgs& a,
                                                     std::vector<caf::actor> donors,
                                                     std::function<void()> during = {}) {
  actors::recovery::FetchSettings fs;
  fs.window = static_cast<uint32_t>(a.window);
  fs.chunk_timeout = std::chrono::seconds(10);
  fs.deadline = std::chrono::minutes(20);
  fs.endpoint = transport::bulk_endpoint();
  fs.who = "bench joiner";
  auto report = std::make_shared<actors::recovery::FetchReport>();
  auto fetcher = sys.spawn(actors::recovery::state_fetcher, donors, int64_t{1}, fs, report);
  caf::scoped_actor self{sys};
  self->send(fetcher, fetch_state_atom::value);
  if (during) during();
  std::string error;
  self->receive([&](messages::WorkerState&) {}, [&](caf::error& e) { error = sys.render(e); });
  if (!error.empty()) throw std::runtime_error(error);
  return report;
}

nlohmann::json report_json(const actors::recovery::FetchReport& r) {
  return {{"seconds", r.seconds},
          {"mib", r.bytes / 1048576.0},
          {"mib_per_s", r.bytes / 1048576.0 / r.seconds},
          {"chunks", r.chunks},
          {"chunks_from", r.chunks_from},
          {"chunks_again", r.chunks_again},
          {"donors_dropped", r.donors_dropped}};
}

int run_bench_state(const StateArgs& a) {
  credential::NetOptions net;
  const auto secret = credential::generate_secret();
  setenv("SWARMRT_SECRET", secret.c_str(), 1);  // the donors' credential, inherited
  caf::actor_system_config cfg;
  auto files = configure_network(cfg, net, secret, "joiner");
  caf::actor_system sys{cfg};
  transport::start_bulk_server(a.listen);
  const int most = *std::max_element(a.donors.begin(), a.donors.end());
  std::vector<Donor> donors;
  for (int i = 0; i < most; ++i) donors.push_back(start_donor(sys, a, a.layers, i));
  auto handles = [&](int k) {
    std::vector<caf::actor> out;
    for (int i = 0; i < k; ++i) out.push_back(donors[i].handle);
    return out;
  };
  nlohmann::json out;
  out["state_mib"] = donors[0].bytes / 1048576.0;
  out["preset"] = a.preset;
  out["chunk_mib"] = a.chunk_mib;
  out["window"] = a.window;
  std::printf("%-28s %9s %9s %8s\n", "case", "seconds", "MiB/s", "again");
  double most_seconds = 0;
  for (int k : a.donors) {
    auto r = fetch(sys, a, handles(k));
    auto j = report_json(*r);
    j["donors"] = k;
    out["from_donors"].push_back(j);
    if (k == most) most_seconds = r->seconds;
    std::printf("%-28s %9.2f %9.1f %8llu\n", ("from " + std::to_string(k) + " donors").c_str(),
                r->seconds, r->bytes / 1048576.0 / r->seconds,
                static_cast<unsigned long long>(r->chunks_again));
  }
  const auto& rows = out["from_donors"];
  out["speedup_most_over_one"] =
      rows.front()["seconds"].get<double>() / rows.back()["seconds"].get<double>();
  if (most > 1) {
    auto& victim = donors.back();
    auto r = fetch(sys, a, handles(most), [&] {
      std::this_thread::sleep_for(std::chrono::duration<double>(most_seconds / 2));
      victim.child->signal(SIGKILL);
    });
    auto j = report_json(*r);
    j["donors"] = most;
    j["killed_after_s"] = most_seconds / 2;
    j["killed_donor_window_chunks"] = a.window;
    out["donor_killed"] = j;
    std::printf("%-28s %9.2f %9.1f %8llu\n", "one donor SIGKILLed halfway", r->seconds,
                r->bytes / 1048576.0 / r->seconds,
                static_cast<unsigned long long>(r->chunks_again));
  }
  // Joiners at once on one donor of a smaller state; the big donors go first (memory).
  stop_donors(donors);
  Donor one = start_donor(sys, a, a.joiners_layers, most);
  const auto rss_before = vm_hwm_kib(one.child->pid());
  std::vector<std::thread> threads;
  std::vector<double> seconds(static_cast<size_t>(a.joiners), -1);
  const auto start = Clock::now();
  for (int i = 0; i < a.joiners; ++i)
    threads.emplace_back([&, i] { seconds[i] = fetch(sys, a, {one.handle})->seconds; });
  for (auto& t : threads) t.join();
  const double all = std::chrono::duration<double>(Clock::now() - start).count();
  const auto rss = vm_hwm_kib(one.child->pid());
  out["joiners_at_once"] = {{"joiners", a.joiners},
                            {"layers", a.joiners_layers},
                            {"max_joiners", a.max_joiners},
                            {"state_mib", one.bytes / 1048576.0},
                            {"seconds_all", all},
                            {"seconds_each", seconds},
                            {"donor_peak_rss_mib_before", rss_before / 1024.0},
                            {"donor_peak_rss_mib", rss / 1024.0}};
  std::printf("%-28s %9.2f %9.1f   donor peak RSS %.0f MiB (%.0f before; state %.0f MiB)\n",
              (std::to_string(a.joiners) + " joiners on one donor").c_str(), all,
              a.joiners * one.bytes / 1048576.0 / all, rss / 1024.0, rss_before / 1024.0,
              one.bytes / 1048576.0);
  std::ifstream cpuinfo("/proc/cpuinfo");
  std::string cpu = "unknown";
  for (std::string line; std::getline(cpuinfo, line);)
    if (line.rfind("model name", 0) == 0) {
      cpu = line.substr(line.find(':') + 2);
      break;
    }
  out["machine"] = {{"cpu", cpu}, {"cores", std::thread::hardware_concurrency()}};
  out["listen"] = a.listen;
  out["donor_listen"] = a.donor_listen;
  out["donor_prefix"] = a.donor_prefix;
  donors.clear();
  donors.push_back(std::move(one));
  stop_donors(donors);
  std::ofstream(a.out) << out.dump(2) << "\n";
  std::printf("wrote %s\n", a.out.c_str());
  return 0;
}

}  // namespace

void add_bench_state_command(CLI::App& bench, int& exit_code) {
  auto a = std::make_shared<StateArgs>();
  auto* cmd = bench.add_subcommand("state", "a worker's whole state from 1 and from many donors");
  cmd->add_option("--preset", a->preset, "model preset of the stage (default gpt2-small)");
  cmd->add_option("--donors", a->donors, "donor counts to fetch from")->delimiter(',');
  cmd->add_option("--joiners", a->joiners, "joiners at once on one donor");
  cmd->add_option("--joiners-layers", a->joiners_layers, "layers of their state's model");
  cmd->add_option("--chunk-mib", a->chunk_mib, "recovery.chunk_mib");
  cmd->add_option("--window", a->window, "recovery.window");
  cmd->add_option("--max-joiners", a->max_joiners, "recovery.max_joiners");
  cmd->add_option("--listen", a->listen, "this process's address");
  cmd->add_option("--donor-listen", a->donor_listen, "the donors' address ({i}: its index)");
  cmd->add_option("--donor-prefix", a->donor_prefix,
                  "command the donors run under ({i}: its index)");
  cmd->add_option("--out,-o", a->out, "JSON results");
  cmd->add_option("--layers", a->layers, "layers of the model (0: the preset's)")->group("");
  cmd->add_flag("--serve-donor", a->serve_donor, "run as one donor")->group("");
  cmd->callback([a, &exit_code] {
    try {
      exit_code = a->serve_donor ? serve_donor(*a) : run_bench_state(*a);
    } catch (const std::exception& e) {
      spdlog::error("bench state: {}", e.what());
      exit_code = 1;
    }
  });
}

}  // namespace swarmrt::apps
