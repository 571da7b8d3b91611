#include "actors/stage/peer_links.hpp"

#include <spdlog/spdlog.h>
#include <random>

#include "transport/bulk.hpp"

namespace swarmrt::actors {
using namespace swarmrt::atoms;

namespace {

bool is_cuda(const std::string& device) {
  return device.rfind("cuda", 0) == 0;
}

// TCP links listen where this process's frame link does: that address is known to reach it.
std::string listen_host() {
  const auto endpoint = transport::bulk_endpoint();
  const auto colon = endpoint.rfind(':');
  return colon == std::string::npos ? std::string("127.0.0.1") : endpoint.substr(0, colon);
}

}  // namespace

void PeerLinks::configure(std::string who, config::Links mode, std::string device,
                          double timeout_s) {
  who_ = std::move(who);
  mode_ = mode;
  device_ = std::move(device);
  options_.timeout_s = timeout_s;
  options_.device = is_cuda(device_) ? std::stoi(device_.substr(device_.find(':') + 1)) : -1;
}

transport::CommOptions PeerLinks::comm_options() const {
  auto options = options_;
  options.host = listen_host();
  return options;
}

std::string PeerLinks::backend_for(const std::string& peer_device) const {
  if (mode_ == config::Links::frames) return "";
  if (is_cuda(device_) && is_cuda(peer_device) && transport::comm_backend_built("nccl"))
    return "nccl";
  return mode_ == config::Links::comm ? "tcp" : "";
}

bool PeerLinks::send(caf::local_actor* self, const caf::actor& to, const std::string* peer_device,
                     messages::FrameKind kind, const messages::Frame& frame) {
  if (!to || to.node() == self->node()) return false;
  const auto addr = to.address();
  uint64_t id = 0;
  if (auto it = out_.find(addr); it != out_.end()) {
    id = it->second;
  } else {
    if (frames_only_.count(addr) || !peer_device) return false;
    const auto backend = backend_for(*peer_device);
    if (backend.empty()) return false;
    try {
      auto [comm, comm_id] = transport::create_comm(backend, 2, comm_options());
      id = (static_cast<uint64_t>(std::random_device{}()) << 32) ^ std::random_device{}();
      links_[id] = Link{std::shared_ptr<transport::Comm>(std::move(comm)), 1, addr};
      out_[addr] = id;
      caf::unsafe_send_as(self, to, link_atom::value, id, backend, comm_id);
      spdlog::info("{}: opened a {} link to {}", who_, backend, name_of(addr));
    } catch (const std::exception& e) {
      spdlog::warn("{}: no link to {}, frames instead: {}", who_, name_of(addr), e.what());
      frames_only_.insert(addr);
      return false;
    }
  }
  auto& link = links_.at(id);
  try {
    transport::send_frame_tensors(*link.comm, frame, link.peer_rank);
  } catch (const std::exception& e) {
    spdlog::warn("{}: the link to {} failed, frames instead: {}", who_, name_of(addr), e.what());
    drop(id);
    frames_only_.insert(addr);
    return false;
  }
  caf::unsafe_send_as(self, to, comm_atom::value, id, static_cast<uint8_t>(kind), frame.header);
  return true;
}

std::string PeerLinks::join(const caf::actor_addr& from, uint64_t link, const std::string& backend,
                            const std::vector<uint8_t>& id) {
  if (links_.count(link)) return "link " + std::to_string(link) + " is open already";
  try {
    auto options = options_;
    auto comm = transport::join_comm(backend, id, 2, 1, options);
    links_[link] = Link{std::shared_ptr<transport::Comm>(std::move(comm)), 0, from};
    // Hops back to the peer (gradients) take the link it opened, unless one is open already.
    out_.emplace(from, link);
    spdlog::info("{}: joined a {} link from {}", who_, backend, name_of(from));
    return "";
  } catch (const std::exception& e) {
    return e.what();
  }
}

std::optional<messages::Frame> PeerLinks::receive(uint64_t link, messages::FrameKind kind,
                                                  const std::vector<uint8_t>& header) {
  auto it = links_.find(link);
  if (it == links_.end()) {
    spdlog::warn("{}: a hop came on link {}, which is not open here", who_, link);
    return std::nullopt;
  }
  try {
    auto frame = transport::receive_frame(*it->second.comm, it->second.peer_rank, kind, header);
    ++frames_in_;
    return frame;
  } catch (const std::exception& e) {
    spdlog::warn("{}: refused a hop on the link from {}, link dropped: {}", who_,
                 name_of(it->second.peer), e.what());
    drop(link);
    return std::nullopt;
  }
}

void PeerLinks::members(std::map<caf::actor_addr, std::string> live) {
  names_ = std::move(live);
  std::vector<uint64_t> gone;
  for (const auto& [id, link] : links_)
    if (!names_.count(link.peer)) gone.push_back(id);
  for (auto id : gone) drop(id);
}

std::string PeerLinks::name_of(const caf::actor_addr& peer) const {
  auto it = names_.find(peer);
  return it != names_.end() ? it->second : caf::to_string(peer);
}

void PeerLinks::drop(uint64_t link) {
  auto it = links_.find(link);
  if (it == links_.end()) return;
  if (auto o = out_.find(it->second.peer); o != out_.end() && o->second == link) out_.erase(o);
  links_.erase(it);
}

}  // namespace swarmrt::actors
