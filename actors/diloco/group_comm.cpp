// The DiLoCo group's communicator: which one its members share (NCCL between CUDA workers, TCP
// with transport.links = "comm", none otherwise), its announcement when the membership changes,
// and the readiness handshake that starts an all-reduce only when every rank is at it
// (actors/diloco/diloco_group.hpp).
#include <spdlog/spdlog.h>

#include <algorithm>

#include "actors/diloco/group_internal.hpp"
#include "transport/comm.hpp"

namespace swarmrt::actors::group {
using namespace swarmrt::atoms;

namespace {

// The communicator the members share, if they can: NCCL between CUDA workers, TCP where the
// run asks for links everywhere.
std::string group_backend(const group_state& s) {
  const auto& mode = s.ctx->config.transport.links;
  // A robust aggregate needs every Δ_i: an all-reduce hands the group only their sum.
  const auto& d = s.ctx->config.diloco;
  if (mode == config::Links::frames || s.members.size() < 2 || !d.whole_rounds() ||
      d.aggregate != config::Aggregate::mean)
    return "";
  bool all_cuda = true;
  for (const auto& [id, handle] : s.members) {
    auto d = s.devices.find(id);
    all_cuda = all_cuda && d != s.devices.end() && d->second.rfind("cuda", 0) == 0;
  }
  if (all_cuda && transport::comm_backend_built("nccl")) return "nccl";
  return mode == config::Links::comm ? "tcp" : "";
}

// Round `round` of the current communicator is reported per worker: the workers that said
// they were at it, and `also`, hear so.
void refuse_round(Self* self, uint64_t round, const caf::actor& also, uint64_t also_epoch) {
  auto& s = self->state;
  for (const auto& w : s.ready)
    self->send(w, group_go_atom::value, s.ready_round, s.comm_epoch, false);
  s.ready.clear();
  s.refused_round = round;
  if (also) self->send(also, group_go_atom::value, round, also_epoch, false);
}

}  // namespace

// A worker of the communicator is at `round`. The all-reduce goes ahead only when every
// worker of the current communicator is, ready to take part; anything else, and the round is
// reported per worker by all of them.
void on_ready(Self* self, uint64_t round, uint64_t epoch, bool usable, const caf::actor& from) {
  auto& s = self->state;
  const bool member =
      std::find(s.comm_members.begin(), s.comm_members.end(), from) != s.comm_members.end();
  if (!s.ready.empty() && s.ready_round != round) refuse_round(self, s.ready_round, {}, 0);
  const char* why = epoch != s.comm_epoch               ? "holds another communicator"
                    : !usable || s.comm_backend.empty() ? "cannot all-reduce"
                    : !member                           ? "is not in the communicator"
                    : s.refused_round == round          ? ""
                                                        : nullptr;
  if (why) {
    if (*why)
      spdlog::info("diloco group {}: round {} is reported per worker: a worker {}", s.stage, round,
                   why);
    refuse_round(self, round, from, epoch);
    return;
  }
  s.ready_round = round;
  if (std::find(s.ready.begin(), s.ready.end(), from) == s.ready.end()) s.ready.push_back(from);
  if (s.ready.size() < s.comm_members.size()) return;
  for (const auto& w : s.ready) self->send(w, group_go_atom::value, round, epoch, true);
  s.ready.clear();
}

// Tells every member which communicator the group uses from now on (none: its own frames).
void announce_comm(Self* self) {
  auto& s = self->state;
  const auto backend = group_backend(s);
  if (backend.empty() && s.comm_backend.empty()) return;
  // Workers waiting on the old communicator will not all be there now.
  if (!s.ready.empty()) refuse_round(self, s.ready_round, {}, 0);
  s.refused_round.reset();
  s.comm_backend = backend;
  uint64_t epoch = 0;
  {
    std::lock_guard<std::mutex> lock(s.store->mu);
    epoch = ++s.store->comm_epoch;
  }
  std::vector<caf::actor> handles;
  std::vector<uint32_t> ids;
  for (const auto& [id, handle] : s.members) {
    ids.push_back(id);
    handles.push_back(handle);
  }
  s.comm_epoch = epoch;
  s.comm_members = backend.empty() ? std::vector<caf::actor>{} : handles;
  for (const auto& h : handles)
    self->send(h, group_comm_atom::value, messages::GroupComm{epoch, backend, handles, ids});
  if (!backend.empty())
    spdlog::info("diloco group {}: {} workers share a {} communicator (epoch {})", s.stage,
                 ids.size(), backend, epoch);
}

}  // namespace swarmrt::actors::group
