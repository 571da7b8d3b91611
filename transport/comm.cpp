#include "transport/comm.hpp"

#include "transport/tcp_comm.hpp"
#ifdef SWARMRT_WITH_NCCL
#include "transport/nccl_transport.hpp"
#endif

namespace swarmrt::transport {

bool comm_backend_built(const std::string& backend) {
  if (backend == "tcp") return true;
#ifdef SWARMRT_WITH_NCCL
  if (backend == "nccl") return true;
#endif
  return false;
}

std::pair<std::unique_ptr<Comm>, std::vector<uint8_t>> create_comm(const std::string& backend,
                                                                   int ranks,
                                                                   const CommOptions& options) {
  if (backend == "tcp") {
    auto comm = std::make_unique<TcpComm>(ranks, options);
    auto id = comm->id();
    return {std::move(comm), std::move(id)};
  }
#ifdef SWARMRT_WITH_NCCL
  if (backend == "nccl") {
    auto id = nccl_unique_id();
    return {std::make_unique<NcclComm>(id, ranks, 0, options.device, options.timeout_s), id};
  }
#endif
  throw CommError("communicator backend '" + backend + "' is not built into this swarmrt");
}

std::unique_ptr<Comm> join_comm(const std::string& backend, const std::vector<uint8_t>& id,
                                int ranks, int rank, const CommOptions& options) {
  if (backend == "tcp") return std::make_unique<TcpComm>(id, ranks, rank, options);
#ifdef SWARMRT_WITH_NCCL
  if (backend == "nccl")
    return std::make_unique<NcclComm>(id, ranks, rank, options.device, options.timeout_s);
#endif
  throw CommError("communicator backend '" + backend + "' is not built into this swarmrt");
}

void send_frame_tensors(Comm& comm, const messages::Frame& frame, int peer) {
  for (const auto& t : frame.tensors) comm.send(t, peer);
}

messages::Frame receive_frame(Comm& comm, int peer, messages::FrameKind kind,
                              const std::vector<uint8_t>& header) {
  const auto metas = kind == messages::FrameKind::microbatch
                         ? messages::decode_microbatch(header).tensors
                         : messages::decode_round(header).tensors;
  messages::Frame frame;
  frame.header = header;
  for (const auto& m : metas) frame.tensors.push_back(comm.recv(m, peer));
  return frame;
}

}  // namespace swarmrt::transport
