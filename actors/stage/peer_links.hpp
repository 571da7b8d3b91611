// A stage worker's communicator links to workers in other processes (transport/comm.hpp): one
// two-rank communicator per pair of workers that exchange hops, NCCL between CUDA workers,
// TCP between CPU workers where the run asks for links everywhere (transport.links = "comm").
//
// The worker that sends the first hop opens the link: it creates the communicator as rank 0
// and sends its id to the peer as (link_atom, link, backend, id) before the hop itself, which
// then goes as (comm_atom, link, kind, header) over CAF with its tensors on the link. CAF keeps
// the order of messages between two actors, so the peer joins before it reads the first
// header. Gradients coming back use the same link. A link that fails is dropped and that peer
// gets frames from then on; the hop that failed is lost and re-run like any lost hop.
#pragma once

#include <caf/all.hpp>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>

#include "config/config.hpp"
#include "messages/types.hpp"
#include "messages/wire.hpp"
#include "transport/comm.hpp"

namespace swarmrt::actors {

class PeerLinks {
 public:
  // `mode`: transport.links ("auto": NCCL between CUDA devices, frames otherwise; "comm": TCP
  // where NCCL does not apply; "frames": none). `device`: this worker's ("cpu", "cuda:K").
  void configure(std::string who, config::Links mode, std::string device, double timeout_s);
  // The backend of a link to a worker on `peer_device`; empty: frames.
  std::string backend_for(const std::string& peer_device) const;

  // Sends `frame` to `to` over its link, opening one when `peer_device` calls for one. False:
  // not over a link (same process, no link wanted, or it failed); the caller sends frames.
  bool send(caf::local_actor* self, const caf::actor& to, const std::string* peer_device,
            messages::FrameKind kind, const messages::Frame& frame);
  // (link_atom, ...) from `from`: joins it as rank 1. Returns why not, empty when joined.
  std::string join(const caf::actor_addr& from, uint64_t link, const std::string& backend,
                   const std::vector<uint8_t>& id);
  // (comm_atom, ...): the frame, its tensors taken from the link. Nothing, with the reason
  // logged and the link dropped, when they do not come as the header says.
  std::optional<messages::Frame> receive(uint64_t link, messages::FrameKind kind,
                                         const std::vector<uint8_t>& header);
  // The swarm's workers now, with names for the log; drops the links of peers no longer in
  // it (they left the swarm or were restarted).
  void members(std::map<caf::actor_addr, std::string> live);

  // How this worker's communicators are made (its device, timeout, listening address).
  transport::CommOptions comm_options() const;

  uint64_t frames_in() const { return frames_in_; }

 private:
  struct Link {
    std::shared_ptr<transport::Comm> comm;
    int peer_rank = 0;
    caf::actor_addr peer;
  };
  void drop(uint64_t link);
  std::string name_of(const caf::actor_addr& peer) const;

  std::string who_ = "worker";
  config::Links mode_ = config::Links::automatic;
  std::string device_ = "cpu";
  transport::CommOptions options_;
  std::map<uint64_t, Link> links_;           // by link id
  std::map<caf::actor_addr, uint64_t> out_;  // the link hops to a peer take
  std::set<caf::actor_addr> frames_only_;    // peers whose link failed
  std::map<caf::actor_addr, std::string> names_;
  uint64_t frames_in_ = 0;
};

}  // namespace swarmrt::actors
