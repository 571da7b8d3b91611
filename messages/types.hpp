// Every CAF message type and atom of swarmrt, declared once, registered in one place.
#pragma once

#include <ATen/core/Tensor.h>
#include <caf/all.hpp>
#include <cstdint>
#include <string>
#include <vector>

#include "messages/atoms.hpp"
#include "messages/console_commands.hpp"

namespace swarmrt::messages {

// A micro-batch hop or a DiLoCo round message: an encoded Cap'n Proto header and the tensors
// it describes. In one process the tensors travel by reference beside the header.
struct Frame {
  std::vector<uint8_t> header;
  std::vector<at::Tensor> tensors;
};

// One stage worker as the rest of the swarm knows it.
struct Member {
  uint32_t id = 0;
  uint32_t stage = 0;
  caf::actor handle;
  std::string endpoint;        // its process's bulk frame link, "host:port"; empty: over CAF
  std::string device = "cpu";  // where its tensors live: "cpu" or "cuda:K"
};

// Who serves each stage. Every sender re-wires from the newest version it has seen.
struct Membership {
  uint64_t version = 0;
  std::vector<std::vector<Member>> stages;
};

// A worker restarted with the same id and a new handle: `w` replaces its old entry (in
// whichever stage it was) and the membership gets a new version.
void replace_member(Membership& m, const Member& w);

// Named tensors (parameters, gradients) as one message element. In one process they travel
// by reference; to another process they are serialized as one checked frame (see inspect).
struct TensorList {
  std::vector<std::string> names;
  std::vector<at::Tensor> tensors;
  std::string error;  // set by deserialization when the bytes that came were refused
};

// What a node asks when it joins a swarm, and what the coordinator answers.
struct JoinRequest {
  uint32_t protocol = 0;
  std::string fingerprint;  // config::fingerprint_text of the node's config; empty: adopt
  std::string secret;
  std::string node_name;
  uint32_t workers = 1;
  std::string device = "cpu";
  uint64_t run_id = 0;   // the run this node was started for (launch knows it); 0: any run
  caf::actor inspector;  // the node's inspector: the console reaches the node through it
  // The stage states this node kept when its last coordinator's link was lost (a takeover
  // continues from them: docs/faults.md): who hands them out, and each one's stage and step.
  caf::actor keeper;
  std::vector<uint32_t> held_stages;
  std::vector<int64_t> held_steps;
};

struct JoinReply {
  std::string config_toml;  // the run's effective config; every node trains with it
  uint64_t run_id = 0;
  uint32_t node_index = 0;
  std::vector<uint32_t> worker_ids;  // one per requested worker
  std::vector<uint32_t> stages;      // the stage of each worker
  caf::actor tracker;
  std::vector<caf::actor> averagers;  // per stage; invalid where the mode has none
  std::vector<caf::actor> groups;     // per stage; invalid where the mode has none
  std::string endpoint;               // the coordinator's bulk frame link; empty: over CAF
  // HOST:PORT of every coordinator replica of the run (coordinator --etcd): where the node
  // looks for the next leader when this one is lost; empty: this coordinator alone
  std::vector<std::string> replicas;
};

// A stage worker's state, as a restarted or joining worker takes it from a live peer, its
// DiLoCo group or a checkpoint before it accepts work (architecture §7).
struct WorkerState {
  TensorList params;      // empty: keep the initialization
  TensorList anchor;      // DiLoCo: θ of the last applied round; empty: equal to params
  std::string optimizer;  // torch-serialized AdamW state; empty: a fresh optimizer
  int64_t round = -1;     // DiLoCo: the next round id; -1: not known
  // Streaming DiLoCo: the next round id of every fragment (round = rounds[0]); empty: not known
  std::vector<int64_t> rounds;
  std::string source;  // where it came from, for the log ("peer 1001", "group 0", ...)
  // The last step whose optimizer step these parameters include; -1: not known.
  int64_t step = -1;
  // Handed to a restarted or joining worker instead of the state itself: live peers that each
  // hold a snapshot of it (at `step`), whose donors it fetches it from in chunks
  // (actors/recovery/). Everything above but `step` and `source` is empty then.
  std::vector<caf::actor> donors{};
  // AdamW's state as tensors (model::adamw_moments) in place of `optimizer`: equal bytes on
  // every donor of one state (actors/recovery/snapshot.hpp). Empty: see `optimizer`.
  TensorList moments{};
  // Encoded DiLoCo rounds (diloco.quantize, compress): what the rounds of worker
  // `residual_of` have left unsent so far (error feedback), by parameter name. A worker takes
  // it only when it is its own: a peer's, sent again, would count twice. Empty: nothing carried.
  TensorList residual{};
  int64_t residual_of = -1;
};

// What a donor's snapshot of a worker's state is (actors/recovery/): its serialized bytes,
// `total` of them, cut into chunks of `chunk_bytes` (the last may be shorter), each with its
// CRC-32. Donors of equal states at one step send equal manifests; a joiner assembles chunks
// of one manifest only.
struct StateManifest {
  int64_t step = -1;
  uint64_t total = 0;
  uint32_t chunk_bytes = 0;
  std::vector<uint32_t> crcs;
  bool operator==(const StateManifest& o) const {
    return step == o.step && total == o.total && chunk_bytes == o.chunk_bytes && crcs == o.crcs;
  }
};

// A new worker asks the tracker for the state to start from (start_state_atom): `who` is the
// asker, so that the state is taken from a peer other than itself.
struct StateRequest {
  uint32_t stage = 0;
  uint32_t id = 0;
  caf::actor who;
};

// What the step tracker hands back when a run ends.
struct RunReport {
  std::vector<double> losses;        // mean micro-batch loss, one per step
  std::vector<double> step_seconds;  // wall time of each step
  std::vector<int64_t> completed;    // micro-batches completed, one per step
  std::vector<int64_t> duplicates;   // completions seen again (must stay 0)
  // Per step, samples backpropagated by the step's workers compared with the routes of the
  // micro-batches' counted attempts: more (a micro-batch in two workers' gradients of one
  // stage) or fewer (one in none). Both must stay 0. Workers lost after the step's last
  // micro-batch completed take their gradient with them and are not compared.
  std::vector<int64_t> extra_samples, missing_samples;
  std::vector<int64_t> skipped;  // steps the loss scaler skipped (their gradient overflowed)
  std::vector<std::pair<uint32_t, int64_t>> forwards;  // (worker id, micro-batches forwarded)
  double val_loss = 0;
  uint64_t rejected_frames = 0;
};

// A stage worker's counters (stats_atom), read by the runtime at the end of a run and by tests.
struct WorkerStats {
  uint32_t id = 0;
  uint64_t rejected = 0;         // frames and chunks refused (malformed, mismatched)
  int64_t forwards = 0;          // micro-batches forwarded, whole run
  uint64_t stale = 0;            // hops of attempts no longer held or cancelled
  uint64_t recomputed = 0;       // backward passes that took only the input gradient
  uint64_t dropped = 0;          // hops lost on purpose (chaos.drop_fraction)
  uint64_t linked_frames = 0;    // frames that came over communicator links
  uint64_t group_reduces = 0;    // DiLoCo rounds all-reduced over the group's communicator
  uint64_t group_fallbacks = 0;  // rounds reported alone although the group had one
  uint64_t group_failures = 0;   // all-reduces that failed, answers that never came
};

// What stage workers tell the tracker about a micro-batch and a step. A report of an older
// step or attempt than the tracker's is stale and dropped.
// The last stage computed a micro-batch's loss (loss_atom); `route`: the worker of each stage
// it went through, which hold its activations.
struct LossReport {
  uint64_t step = 0;
  uint32_t micro_batch = 0;
  uint32_t attempt = 0;
  double loss = 0;
  std::vector<uint32_t> route;
};
// A worker took one hop of a micro-batch (`passed` false: it starts computing it) or handed it
// on (`passed` true: to `to`, the next worker forward or the previous one backward) (hop_atom).
// The tracker tells a micro-batch a live worker is at work on from a lost one by them.
// `age_s`: how long before it left the worker the hop happened. A worker sends its reports
// in batches (HopReports), and the tracker times hops from when they happened, not from when
// their batch came.
struct HopReport {
  uint64_t step = 0;
  uint32_t micro_batch = 0;
  uint32_t attempt = 0;
  uint32_t worker = 0;
  bool passed = false;
  caf::actor_addr to;
  double age_s = 0;
};
// A worker took step `step` (applied_atom), and what every actor of its process has sent so
// far, by kind in actors::Traffic's order: the coordinator adds other processes' reports to
// its own counters for the swarm's totals. `process` is empty in the coordinator's process.
struct ProcessBytes {
  std::string process;
  std::vector<uint64_t> sent;
};
// Stage 0 finished a micro-batch's backward (done_atom): every stage holds its gradient.
struct DoneReport {
  uint64_t step = 0;
  uint32_t micro_batch = 0;
  uint32_t attempt = 0;
  uint32_t worker = 0;  // the stage-0 worker that finished it
};
// What a worker tells the tracker of its micro-batches, gathered, oldest first (hop_atom): the
// hop reports of its backlog, and a loss (the last stage) or a completion (stage 0) with the
// reports before it, taken in that order as if each had come alone (loss_atom, done_atom).
// One message instead of one per report: between processes each is a control-plane message
// through TLS with a wake-up at both ends.
struct HopReports {
  std::vector<HopReport> reports;
  std::vector<LossReport> losses;
  std::vector<DoneReport> done;
};
// A worker's squared gradient norm and the samples it accumulated in the step (norm_atom):
// the tracker clips with the swarm-wide norm and checks that every sample was counted once.
struct NormReport {
  uint64_t step = 0;
  uint32_t stage = 0;
  uint32_t worker = 0;
  double sqnorm = 0;
  int64_t samples = 0;
};
// A worker's gradient of the step, for its stage's averager (grads_atom).
struct GradsReport {
  uint64_t step = 0;
  uint32_t worker = 0;
  int64_t samples = 0;
  TensorList grads;
};

// A DiLoCo group's communicator from `epoch` on (group_comm_atom, to every member): its
// backend (empty: none, each worker sends its own) and its workers by rank.
struct GroupComm {
  uint64_t epoch = 0;
  std::string backend;
  std::vector<caf::actor> handles;
  std::vector<uint32_t> ids;
};
// From the communicator's rank 0, which created it, to rank `rank`: the id to join it by
// (group_join_atom).
struct GroupJoin {
  uint64_t epoch = 0;
  std::string backend;
  std::vector<uint8_t> id;
  int32_t rank = 0;
  std::vector<uint32_t> ids;
};

// A DiLoCo group's counters (stats_atom).
struct GroupStats {
  int64_t last_applied = -1;   // the last round applied
  uint64_t rejected = 0;       // contributions refused
  uint64_t round = 0;          // the round being collected
  uint64_t contributions = 0;  // contributions it holds so far
};

}  // namespace swarmrt::messages

namespace swarmrt::messages {

// TensorList bytes: one round-style frame (names and tensor metadata in the header, raw bytes
// after it), checked on arrival like every frame. Decoding throws DecodeError.
std::vector<uint8_t> encode_tensor_list(const TensorList& list);
TensorList decode_tensor_list(const std::vector<uint8_t>& bytes);

// How each type crosses a process boundary (CAF 0.17 inspectors).
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, Member& x) {
  return f(caf::meta::type_name("swarmrt::Member"), x.id, x.stage, x.handle, x.endpoint, x.device);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, Membership& x) {
  return f(caf::meta::type_name("swarmrt::Membership"), x.version, x.stages);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, TensorList& x) {
  std::vector<uint8_t> bytes;
  if constexpr (Inspector::reads_state) bytes = encode_tensor_list(x);
  // Refused bytes never fail the connection: the receiver finds `error` set and says why.
  auto load = caf::meta::load_callback([&]() -> caf::error {
    try {
      x = decode_tensor_list(bytes);
    } catch (const std::exception& e) {
      x = TensorList{};
      x.error = e.what();
    }
    return caf::none;
  });
  return f(caf::meta::type_name("swarmrt::TensorList"), bytes, load);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, JoinRequest& x) {
  return f(caf::meta::type_name("swarmrt::JoinRequest"), x.protocol, x.fingerprint, x.secret,
           x.node_name, x.workers, x.device, x.run_id, x.inspector, x.keeper, x.held_stages,
           x.held_steps);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, JoinReply& x) {
  return f(caf::meta::type_name("swarmrt::JoinReply"), x.config_toml, x.run_id, x.node_index,
           x.worker_ids, x.stages, x.tracker, x.averagers, x.groups, x.endpoint, x.replicas);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, WorkerState& x) {
  return f(caf::meta::type_name("swarmrt::WorkerState"), x.params, x.anchor, x.optimizer, x.round,
           x.rounds, x.source, x.step, x.donors, x.moments, x.residual, x.residual_of);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, StateManifest& x) {
  return f(caf::meta::type_name("swarmrt::StateManifest"), x.step, x.total, x.chunk_bytes, x.crcs);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, StateRequest& x) {
  return f(caf::meta::type_name("swarmrt::StateRequest"), x.stage, x.id, x.who);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, RunReport& x) {
  return f(caf::meta::type_name("swarmrt::RunReport"), x.losses, x.step_seconds, x.completed,
           x.duplicates, x.extra_samples, x.missing_samples, x.skipped, x.forwards, x.val_loss,
           x.rejected_frames);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, WorkerStats& x) {
  return f(caf::meta::type_name("swarmrt::WorkerStats"), x.id, x.rejected, x.forwards, x.stale,
           x.recomputed, x.dropped, x.linked_frames, x.group_reduces, x.group_fallbacks,
           x.group_failures);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, LossReport& x) {
  return f(caf::meta::type_name("swarmrt::LossReport"), x.step, x.micro_batch, x.attempt, x.loss,
           x.route);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, HopReport& x) {
  return f(caf::meta::type_name("swarmrt::HopReport"), x.step, x.micro_batch, x.attempt, x.worker,
           x.passed, x.to, x.age_s);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, HopReports& x) {
  return f(caf::meta::type_name("swarmrt::HopReports"), x.reports, x.losses, x.done);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, ProcessBytes& x) {
  return f(caf::meta::type_name("swarmrt::ProcessBytes"), x.process, x.sent);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, DoneReport& x) {
  return f(caf::meta::type_name("swarmrt::DoneReport"), x.step, x.micro_batch, x.attempt, x.worker);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, NormReport& x) {
  return f(caf::meta::type_name("swarmrt::NormReport"), x.step, x.stage, x.worker, x.sqnorm,
           x.samples);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, GradsReport& x) {
  return f(caf::meta::type_name("swarmrt::GradsReport"), x.step, x.worker, x.samples, x.grads);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, GroupComm& x) {
  return f(caf::meta::type_name("swarmrt::GroupComm"), x.epoch, x.backend, x.handles, x.ids);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, GroupJoin& x) {
  return f(caf::meta::type_name("swarmrt::GroupJoin"), x.epoch, x.backend, x.id, x.rank, x.ids);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, GroupStats& x) {
  return f(caf::meta::type_name("swarmrt::GroupStats"), x.last_applied, x.rejected, x.round,
           x.contributions);
}

}  // namespace swarmrt::messages

// Frames carry tensors by reference and are never serialized by CAF: between processes the
// transport sends them as chunks (transport/), so a big tensor never becomes one huge message.
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(swarmrt::messages::Frame)

namespace swarmrt::messages {
// Registers the message types that may cross a process boundary. Same names on every node.
void register_types(caf::actor_system_config& cfg);
}  // namespace swarmrt::messages
