// Every CAF message type and atom of swarmrt, declared once, registered in one place.
#pragma once

#include <ATen/core/Tensor.h>
#include <caf/all.hpp>
#include <cstdint>
#include <string>
#include <vector>

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
};

// Who serves each stage. Every sender re-wires from the newest version it has seen.
struct Membership {
  uint64_t version = 0;
  std::vector<std::vector<Member>> stages;
};

// Named tensors (parameters, gradients) as one message element.
struct TensorList {
  std::vector<std::string> names;
  std::vector<at::Tensor> tensors;
};

// What the step tracker hands back when a run ends.
struct RunReport {
  std::vector<double> losses;                          // mean micro-batch loss, one per step
  std::vector<double> step_seconds;                    // wall time of each step
  std::vector<int64_t> completed;                      // micro-batches completed, one per step
  std::vector<int64_t> duplicates;                     // completions seen again (must stay 0)
  std::vector<std::pair<uint32_t, int64_t>> forwards;  // (worker id, micro-batches forwarded)
  double val_loss = 0;
  uint64_t rejected_frames = 0;
};

}  // namespace swarmrt::messages

// These carry tensors by reference and never leave the process; the multi-process transport
// moves tensors as byte frames instead.
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(swarmrt::messages::Frame)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(swarmrt::messages::Membership)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(swarmrt::messages::TensorList)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(swarmrt::messages::RunReport)

namespace swarmrt::atoms {
// Atoms are named for what they ask or announce (CAF 0.17: at most 10 characters).
using run_atom = caf::atom_constant<caf::atom("run")>;             // tracker: run all steps
using batch_atom = caf::atom_constant<caf::atom("batch")>;         // loader: next micro-batch
using frame_atom = caf::atom_constant<caf::atom("frame")>;         // a micro-batch hop
using loss_atom = caf::atom_constant<caf::atom("loss")>;           // last stage -> tracker
using done_atom = caf::atom_constant<caf::atom("done")>;           // stage 0 -> tracker
using eval_loss_atom = caf::atom_constant<caf::atom("evalloss")>;  // last stage -> tracker
using reduce_atom = caf::atom_constant<caf::atom("reduce")>;       // tracker: sync gradients
using grads_atom = caf::atom_constant<caf::atom("grads")>;         // worker <-> averager
using norm_atom = caf::atom_constant<caf::atom("norm")>;           // worker -> tracker
using apply_atom = caf::atom_constant<caf::atom("apply")>;         // tracker: take the step
using applied_atom = caf::atom_constant<caf::atom("applied")>;     // worker -> tracker
using round_atom = caf::atom_constant<caf::atom("round")>;         // DiLoCo round frame
using members_atom = caf::atom_constant<caf::atom("members")>;     // membership update
using params_atom = caf::atom_constant<caf::atom("params")>;       // ask for parameters
using stats_atom = caf::atom_constant<caf::atom("stats")>;         // ask for counters
using metrics_atom = caf::atom_constant<caf::atom("metrics")>;     // a metrics.jsonl record
}  // namespace swarmrt::atoms

namespace swarmrt::messages {
// Registers the message types that may cross a process boundary. Same names on every node.
void register_types(caf::actor_system_config& cfg);
}  // namespace swarmrt::messages
