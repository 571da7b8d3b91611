#include "actors/tracker/swarm_checkpoint.hpp"

#include <torch/serialize/input-archive.h>
#include <nlohmann/json.hpp>

#include "actors/common/tensor_list.hpp"
#include "model/trainer.hpp"

namespace swarmrt::actors {
namespace {

const std::string kState = "state/";

std::string worker_prefix(uint32_t id) {
  return kState + "worker/" + std::to_string(id) + "/";
}
std::string group_prefix(uint32_t stage) {
  return kState + "group/" + std::to_string(stage) + "/";
}

void add(model::Checkpoint& ckpt, const std::string& prefix, const messages::TensorList& list) {
  for (size_t i = 0; i < list.tensors.size(); ++i)
    ckpt.tensors.emplace_back(prefix + list.names[i], list.tensors[i].contiguous());
}
void add(model::Checkpoint& ckpt, const std::string& prefix, const model::NamedTensors& named) {
  for (const auto& [name, t] : named) ckpt.tensors.emplace_back(prefix + name, t.contiguous());
}

model::NamedTensors with_prefix(const model::Checkpoint& ckpt, const std::string& prefix) {
  model::NamedTensors out;
  for (const auto& [name, t] : ckpt.tensors)
    if (name.compare(0, prefix.size(), prefix) == 0)
      out.emplace_back(name.substr(prefix.size()), t);
  return out;
}

nlohmann::json swarm_meta(const model::Checkpoint& ckpt, const std::string& origin) {
  auto j = nlohmann::json::parse(ckpt.meta_json, nullptr, false);
  if (j.is_discarded() || !j.contains("swarm"))
    throw model::CheckpointError(origin + ": holds no swarm state to resume from (written by " +
                                 "a single-mode run or at the end of a run?)");
  return j.at("swarm");
}

}  // namespace

model::Checkpoint make_swarm_checkpoint(const config::RunConfig& config, uint64_t step,
                                        const std::vector<SavedWorker>& workers,
                                        const std::vector<GroupStorePtr>& groups) {
  model::Checkpoint ckpt;
  nlohmann::json swarm{
      {"step", step}, {"workers", nlohmann::json::array()}, {"groups", nlohmann::json::array()}};
  // The whole model: the first saved worker of each stage, in stage order.
  for (int64_t k = 0; k < config.swarm.stages; ++k)
    for (const auto& w : workers)
      if (w.stage == k) {
        add(ckpt, "", w.state.params);
        break;
      }
  for (const auto& w : workers) {
    add(ckpt, worker_prefix(w.id) + "param/", w.state.params);
    add(ckpt, worker_prefix(w.id) + "anchor/", w.state.anchor);
    add(ckpt, worker_prefix(w.id) + "residual/", w.state.residual);
    ckpt.blobs["optimizer/" + std::to_string(w.id)] = w.state.optimizer;
    swarm["workers"].push_back(
        {{"id", w.id}, {"stage", w.stage}, {"round", w.state.round}, {"rounds", w.state.rounds}});
  }
  for (uint32_t k = 0; k < groups.size(); ++k) {
    if (!groups[k]) continue;
    std::lock_guard<std::mutex> lock(groups[k]->mu);
    add(ckpt, group_prefix(k) + "theta/", groups[k]->theta);
    add(ckpt, group_prefix(k) + "momentum/", groups[k]->momentum);
    add(ckpt, group_prefix(k) + "residual/", groups[k]->residual);
    swarm["groups"].push_back({{"stage", k},
                               {"last_applied", groups[k]->last_applied},
                               {"fragment_applied", groups[k]->fragment_applied}});
  }
  auto meta = nlohmann::json::parse(model::checkpoint_meta(config, static_cast<int64_t>(step), {}));
  meta["swarm"] = swarm;
  ckpt.meta_json = meta.dump();
  return ckpt;
}

void check_swarm_checkpoint(const std::string& origin, const model::Checkpoint& ckpt) {
  const auto swarm = swarm_meta(ckpt, origin);
  if (!swarm.contains("step") || !swarm.contains("workers") || !swarm.contains("groups"))
    throw model::CheckpointError(origin + ": its swarm state is incomplete");
  // Optimizer state is LibTorch's own archive: one that does not deserialize makes the file
  // as unusable as a bad checksum would.
  for (const auto& [name, bytes] : ckpt.blobs)
    if (name.rfind("optimizer/", 0) == 0 && !bytes.empty()) {
      try {
        torch::serialize::InputArchive archive;
        archive.load_from(bytes.data(), bytes.size());
      } catch (const std::exception& e) {
        throw model::CheckpointError(origin + ": " + name + " does not deserialize: " +
                                     std::string(e.what()).substr(0, 200));
      }
    }
}

uint64_t swarm_checkpoint_step(const model::Checkpoint& ckpt, const std::string& origin) {
  return swarm_meta(ckpt, origin).at("step").get<uint64_t>();
}

std::optional<messages::WorkerState> saved_worker_state(const model::Checkpoint& ckpt,
                                                        const std::string& origin, uint32_t id,
                                                        uint32_t stage) {
  const auto swarm = swarm_meta(ckpt, origin);
  const nlohmann::json* pick = nullptr;
  for (const auto& w : swarm.at("workers"))
    if (w.at("id").get<uint32_t>() == id) pick = &w;
  if (!pick)
    for (const auto& w : swarm.at("workers"))
      if (w.at("stage").get<uint32_t>() == stage) {
        pick = &w;
        break;
      }
  if (!pick) return std::nullopt;
  const auto saved = pick->at("id").get<uint32_t>();
  messages::WorkerState st;
  st.params = to_list(with_prefix(ckpt, worker_prefix(saved) + "param/"));
  st.anchor = to_list(with_prefix(ckpt, worker_prefix(saved) + "anchor/"));
  // The error feedback is worker `saved`'s own: another worker given this entry does not take it.
  st.residual = to_list(with_prefix(ckpt, worker_prefix(saved) + "residual/"));
  st.residual_of = saved;
  auto blob = ckpt.blobs.find("optimizer/" + std::to_string(saved));
  if (blob != ckpt.blobs.end()) st.optimizer = blob->second;
  st.round = pick->at("round").get<int64_t>();
  if (pick->contains("rounds")) st.rounds = pick->at("rounds").get<std::vector<int64_t>>();
  st.source = origin + " (worker " + std::to_string(saved) + ")";
  st.step = swarm.at("step").get<int64_t>();
  return st;
}

bool restore_group(const model::Checkpoint& ckpt, uint32_t stage, GroupStore& store) {
  const auto swarm = swarm_meta(ckpt, "checkpoint");
  for (const auto& g : swarm.at("groups")) {
    if (g.at("stage").get<uint32_t>() != stage) continue;
    std::lock_guard<std::mutex> lock(store.mu);
    store.theta = with_prefix(ckpt, group_prefix(stage) + "theta/");
    store.momentum = with_prefix(ckpt, group_prefix(stage) + "momentum/");
    store.residual = with_prefix(ckpt, group_prefix(stage) + "residual/");
    store.last_applied = g.at("last_applied").get<int64_t>();
    if (g.contains("fragment_applied"))
      store.fragment_applied = g.at("fragment_applied").get<std::vector<int64_t>>();
    // A checkpoint taken before the group's first round holds no θ: the group starts again from
    // θ(0), the stage's seeded initialization, as it did then.
    return true;
  }
  return false;
}

}  // namespace swarmrt::actors
