#include "actors/diloco/group_journal.hpp"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <vector>

#include <spdlog/spdlog.h>

#include "model/checkpoint.hpp"

namespace fs = std::filesystem;

namespace swarmrt::actors {
namespace {

// (step, path) of stage `stage`'s entries, newest first.
std::vector<std::pair<uint64_t, std::string>> entries(const std::string& dir, uint32_t stage) {
  std::vector<std::pair<uint64_t, std::string>> out;
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return out;
  const std::string prefix = "group-" + std::to_string(stage) + "-step-";
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const auto name = e.path().filename().string();
    if (!e.is_regular_file() || name.rfind(prefix, 0) != 0 || name.size() < prefix.size() + 6 ||
        name.compare(name.size() - 5, 5, ".ckpt") != 0)
      continue;
    const auto digits = name.substr(prefix.size(), name.size() - prefix.size() - 5);
    if (digits.empty() || digits.find_first_not_of("0123456789") != std::string::npos) continue;
    out.emplace_back(std::stoull(digits), e.path().string());
  }
  std::sort(out.rbegin(), out.rend());
  return out;
}

std::vector<uint32_t> stages_in(const std::string& dir) {
  std::vector<uint32_t> out;
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return out;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    unsigned stage = 0;
    if (std::sscanf(e.path().filename().string().c_str(), "group-%u-step-", &stage) == 1 &&
        std::find(out.begin(), out.end(), stage) == out.end())
      out.push_back(stage);
  }
  return out;
}

}  // namespace

uint64_t GroupJournal::write(uint32_t stage, uint64_t step, const GroupStore& store) const {
  fs::create_directories(dir_);
  model::Checkpoint c;
  for (const auto& [name, t] : store.theta) c.tensors.emplace_back("theta/" + name, t);
  for (const auto& [name, t] : store.momentum) c.tensors.emplace_back("momentum/" + name, t);
  for (const auto& [name, t] : store.residual) c.tensors.emplace_back("residual/" + name, t);
  c.meta_json = nlohmann::json{{"stage", stage},
                               {"step", step},
                               {"last_applied", store.last_applied},
                               {"applied_rounds", store.applied_rounds},
                               {"fragment_applied", store.fragment_applied},
                               {"fragment_rounds", store.fragment_rounds},
                               {"comm_epoch", store.comm_epoch},
                               {"warmed", store.warmed}}
                    .dump();
  char name[64];
  std::snprintf(name, sizeof(name), "group-%u-step-%08llu.ckpt", stage,
                static_cast<unsigned long long>(step));
  const auto path = (fs::path(dir_) / name).string();
  model::write_checkpoint(path, c);
  std::error_code ec;
  const auto bytes = fs::file_size(path, ec);
  // The two newest steps stay (the newest may be past the last step record).
  auto all = entries(dir_, stage);
  for (size_t i = 2; i < all.size(); ++i) fs::remove(all[i].second, ec);
  return ec ? 0 : bytes;
}

std::optional<uint64_t> GroupJournal::restore(
    uint32_t stage, uint64_t step, GroupStore& store,
    const std::function<void(const std::string&, const std::string&)>& on_refused) const {
  for (const auto& [at, path] : entries(dir_, stage)) {
    if (at > step) continue;
    try {
      const auto c = model::read_checkpoint(path);
      const auto meta = nlohmann::json::parse(c.meta_json);
      if (meta.at("stage").get<uint32_t>() != stage || meta.at("step").get<uint64_t>() != at)
        throw model::CheckpointError(path + ": its stage or step is not its name's");
      std::lock_guard<std::mutex> lock(store.mu);
      store.theta.clear();
      store.momentum.clear();
      store.residual.clear();
      for (const auto& [name, t] : c.tensors) {
        if (name.rfind("theta/", 0) == 0) store.theta.emplace_back(name.substr(6), t);
        if (name.rfind("momentum/", 0) == 0) store.momentum.emplace_back(name.substr(9), t);
        if (name.rfind("residual/", 0) == 0) store.residual.emplace_back(name.substr(9), t);
      }
      store.last_applied = meta.at("last_applied").get<int64_t>();
      store.applied_rounds = meta.at("applied_rounds").get<std::vector<uint64_t>>();
      store.fragment_applied = meta.at("fragment_applied").get<std::vector<int64_t>>();
      store.fragment_rounds = meta.at("fragment_rounds").get<std::vector<std::vector<uint64_t>>>();
      store.comm_epoch = meta.at("comm_epoch").get<uint64_t>();
      store.warmed = meta.at("warmed").get<bool>();
      return at;
    } catch (const std::exception& e) {
      // A torn or foreign entry: a takeover does not continue from it (nor from an older one,
      // which would not match the workers' θ).
      if (on_refused) on_refused(path, e.what());
      return std::nullopt;
    }
  }
  return std::nullopt;
}

void GroupJournal::drop_after(int64_t step) const {
  std::error_code ec;
  for (auto stage : stages_in(dir_))
    for (const auto& [at, path] : entries(dir_, stage))
      if (step < 0 || at > static_cast<uint64_t>(step)) fs::remove(path, ec);
}

void GroupJournal::forget(uint32_t stage) const {
  std::error_code ec;
  for (const auto& [at, path] : entries(dir_, stage)) fs::remove(path, ec);
}

void start_journal(const std::vector<GroupStorePtr>& stores, uint64_t step) {
  bool cleared = false;
  for (uint32_t k = 0; k < stores.size(); ++k) {
    if (!stores[k] || stores[k]->journal.empty()) continue;
    const GroupJournal journal(stores[k]->journal);
    try {
      if (!cleared) journal.drop_after(-1);
      cleared = true;
      std::lock_guard<std::mutex> lock(stores[k]->mu);
      journal.write(k, step, *stores[k]);
    } catch (const std::exception& e) {
      spdlog::error("DiLoCo group {}'s journal: {}", k, e.what());
      journal.forget(k);
    }
  }
}

}  // namespace swarmrt::actors
