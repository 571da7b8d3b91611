#include "messages/types.hpp"

#include <algorithm>

namespace swarmrt::messages {

void replace_member(Membership& m, const Member& w) {
  ++m.version;
  if (m.stages.size() <= w.stage) m.stages.resize(w.stage + 1);
  for (auto& st : m.stages)
    st.erase(std::remove_if(st.begin(), st.end(), [&](const Member& x) { return x.id == w.id; }),
             st.end());
  m.stages[w.stage].push_back(w);
}

void register_types(caf::actor_system_config& cfg) {
  cfg.add_message_type<std::vector<uint8_t>>("std::vector<uint8_t>");
  cfg.add_message_type<std::vector<double>>("std::vector<double>");
  cfg.add_message_type<std::vector<uint32_t>>("std::vector<uint32_t>");
  cfg.add_message_type<std::vector<int64_t>>("std::vector<int64_t>");
  cfg.add_message_type<std::vector<caf::actor>>("std::vector<caf::actor>");
  cfg.add_message_type<Member>("swarmrt::Member");
  cfg.add_message_type<std::vector<Member>>("std::vector<swarmrt::Member>");
  cfg.add_message_type<Membership>("swarmrt::Membership");
  cfg.add_message_type<TensorList>("swarmrt::TensorList");
  cfg.add_message_type<JoinRequest>("swarmrt::JoinRequest");
  cfg.add_message_type<JoinReply>("swarmrt::JoinReply");
  cfg.add_message_type<RunReport>("swarmrt::RunReport");
  cfg.add_message_type<WorkerState>("swarmrt::WorkerState");
  cfg.add_message_type<StateRequest>("swarmrt::StateRequest");
  cfg.add_message_type<StateManifest>("swarmrt::StateManifest");
  cfg.add_message_type<WorkerStats>("swarmrt::WorkerStats");
  cfg.add_message_type<GroupStats>("swarmrt::GroupStats");
  cfg.add_message_type<LossReport>("swarmrt::LossReport");
  cfg.add_message_type<HopReport>("swarmrt::HopReport");
  cfg.add_message_type<HopReports>("swarmrt::HopReports");
  cfg.add_message_type<DoneReport>("swarmrt::DoneReport");
  cfg.add_message_type<ProcessBytes>("swarmrt::ProcessBytes");
  cfg.add_message_type<NormReport>("swarmrt::NormReport");
  cfg.add_message_type<GradsReport>("swarmrt::GradsReport");
  cfg.add_message_type<GroupComm>("swarmrt::GroupComm");
  cfg.add_message_type<GroupJoin>("swarmrt::GroupJoin");
  register_console_types(cfg);
}

}  // namespace swarmrt::messages
