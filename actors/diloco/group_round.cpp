// The DiLoCo group's rounds as messages: θ assembled from its fragments, the quorum
// (policy/round_quorum.hpp), each round's answer to every member and the store a restarted
// group continues from (actors/diloco/diloco_group.hpp). The arithmetic (the outer step, the
// answer's encoding: θ(t), a quantized update or an eager mean) is model/outer_round.hpp's.
#include <spdlog/spdlog.h>

#include <algorithm>

#include "actors/diloco/group_internal.hpp"
#include "actors/diloco/group_journal.hpp"
#include "policy/round_quorum.hpp"

namespace swarmrt::actors::group {
using namespace swarmrt::atoms;

// Fragment p's tensors of `all` (the stage's θ or momentum), in θ's order.
model::NamedTensors slice(const model::NamedTensors& all, const std::vector<size_t>& index) {
  model::NamedTensors out;
  for (auto i : index) out.push_back(all[i]);
  return out;
}

model::NamedTensors residual_of(const model::NamedTensors& stored, const std::vector<size_t>& index,
                                const std::vector<std::string>& names) {
  model::NamedTensors out;
  for (auto i : index) {
    auto it = std::find_if(stored.begin(), stored.end(),
                           [&](const auto& e) { return e.first == names[i]; });
    if (it == stored.end()) return {};
    out.emplace_back(it->first, it->second.clone());
  }
  return out;
}

// The whole stage's θ (or outer momentum), assembled from its fragments.
model::NamedTensors whole(const group_state& s, bool momentum) {
  model::NamedTensors out(s.names.size());
  for (const auto& f : s.fragments) {
    const auto& part = momentum ? f.outer->momentum() : f.outer->theta();
    for (size_t k = 0; k < f.index.size(); ++k) out[f.index[k]] = part[k];
  }
  return out;
}

// θ, the outer momentum and the error feedback of every fragment into the store (its lock held).
void store_theta(group_state& s) {
  s.store->theta.clear();
  s.store->momentum.clear();
  s.store->residual.clear();
  for (const auto& [name, t] : whole(s, false)) s.store->theta.emplace_back(name, t.clone());
  for (const auto& [name, t] : whole(s, true)) s.store->momentum.emplace_back(name, t.clone());
  for (const auto& f : s.fragments)
    for (const auto& [name, t] : f.outer->residual())
      if (t.defined()) s.store->residual.emplace_back(name, t.clone());
}

void journal_store(group_state& s, uint64_t step) {
  if (s.store->journal.empty()) return;
  const GroupJournal journal(s.store->journal);
  try {
    s.store->journal_bytes += journal.write(s.stage, step, *s.store);
  } catch (const std::exception& e) {
    spdlog::error("diloco group {}: {}; a takeover will resume from a checkpoint", s.stage,
                  e.what());
    journal.forget(s.stage);
  }
}

// Every applied fragment's θ as an `applied` round frame, for `to` (a worker new to the
// stage, which ignores a round it already has).
void send_theta(Self* self, const caf::actor& to) {
  auto& s = self->state;
  for (uint32_t p = 0; p < s.fragments.size(); ++p) {
    const auto& f = s.fragments[p];
    if (f.last_applied < 0) continue;
    messages::RoundHeader h;
    h.round_id = static_cast<uint64_t>(f.last_applied);
    h.stage = s.stage;
    h.fragment = p;
    h.status = messages::RoundStatus::applied;
    std::vector<at::Tensor> tensors;
    for (const auto& [name, t] : f.outer->theta()) {
      h.tensor_names.push_back(name);
      tensors.push_back(t);
    }
    s.ctx->bytes->add(Traffic::parameters, messages::payload_bytes(tensors));
    transport::send_frame(self, to, messages::FrameKind::round,
                          messages::make_round_frame(h, std::move(tensors)));
  }
}

// Applies fragment p's round once every member has contributed or been refused in it (and
// at least one contributed); true when it did.
bool maybe_apply(Self* self, uint32_t p) {
  auto& s = self->state;
  auto& f = s.fragments[p];
  std::set<uint32_t> members, contributed;
  for (const auto& [id, handle] : s.members) members.insert(id);
  for (const auto& [id, d] : f.contributions) contributed.insert(id);
  if (!quorum(s).complete(members, contributed, f.excused)) return false;
  apply_round(self, p);
  return true;
}

policy::RoundQuorum quorum(const group_state& s) {
  return policy::RoundQuorum{s.ctx->config.diloco.min_replicas};
}

// diloco.all_gather: member `id`'s answer is every other contributor's wires, in the order of
// h.contributors, each under the fragment's tensor names; it sums them with its own.
static void gathered_for(const FragmentRounds& f, uint32_t id,
                         const std::vector<std::string>& names, messages::RoundHeader& h,
                         std::vector<at::Tensor>& tensors) {
  h.gathered = true;
  h.density = f.carried;  // the cap on every member's next contribution
  h.step = f.step;        // the outer rate's step, which the member's sum takes too
  h.tensor_names.clear();
  tensors.clear();
  for (auto other : h.contributors) {
    if (other == id) continue;
    const auto& wire = f.wires.at(other);
    tensors.insert(tensors.end(), wire.begin(), wire.end());
    h.tensor_names.insert(h.tensor_names.end(), names.begin(), names.end());
  }
}

void apply_round(Self* self, uint32_t p) {
  auto& s = self->state;
  auto& f = s.fragments[p];
  auto answer = f.outer->apply(f.contributions, f.step, f.final, f.density);
  auto& tensors = answer.tensors;
  messages::RoundHeader h;
  h.update = answer.update;
  h.average = answer.average;
  h.contributors = std::move(answer.contributors);
  f.last_applied = static_cast<int64_t>(f.round);
  {
    std::lock_guard<std::mutex> lock(s.store->mu);
    store_theta(s);
    s.store->fragment_applied.resize(s.fragments.size(), -1);
    s.store->fragment_rounds.resize(s.fragments.size());
    s.store->fragment_applied[p] = f.last_applied;
    s.store->fragment_rounds[p].push_back(f.round);
    if (p == 0) {
      s.store->last_applied = f.last_applied;
      s.store->applied_rounds.push_back(f.round);
    }
    // On disk before any worker holds θ(t): a standby that continues after this step has it.
    journal_store(s, f.step);
  }
  h.round_id = f.round;
  h.stage = s.stage;
  h.fragment = p;
  h.status = messages::RoundStatus::applied;
  for (const auto& [name, t] : f.outer->theta()) h.tensor_names.push_back(name);
  const auto names = h.tensor_names;
  for (const auto& [id, handle] : s.members) {
    if (answer.gathered) gathered_for(f, id, names, h, tensors);
    const uint64_t bytes = messages::payload_bytes(tensors);
    s.ctx->bytes->add(Traffic::parameters, bytes);
    f.bytes += bytes;
    // Workers copy θ(t) into their own parameters; the group's θ is never aliased.
    transport::send_frame(self, handle, messages::FrameKind::round,
                          messages::make_round_frame(h, tensors));
  }
  ++f.round;
  f.contributions.clear();
  f.wires.clear();
  f.excused.clear();
  f.timer_armed = false;
  f.final = false;
  f.step = 0;
  f.density = 0;
  f.carried = 0;
}

}  // namespace swarmrt::actors::group
