// A communicator: a fixed group of ranks that move tensors to each other directly, beside
// CAF. Between CUDA devices it is NCCL (nccl_transport.hpp); between CPU processes it is TCP
// (tcp_comm.hpp). Rank 0 creates it and gets an id (bytes) that travels to the other ranks in
// a CAF message; each of them joins with that id. Neither call blocks on the others: the
// connection comes up in the background and the first send or receive waits for it.
//
// A frame over a communicator: its tensors go with send/recv and its header still travels
// over CAF, so the receiver learns from the header what to receive (dtype, shape) and hops
// keep their order. Sends are enqueued before the header leaves, so a receive always finds
// the bytes on their way.
#pragma once

#include <ATen/core/Tensor.h>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "messages/frame.hpp"
#include "messages/header.hpp"
#include "messages/wire.hpp"

namespace swarmrt::transport {

struct CommError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

class Comm {
 public:
  virtual ~Comm() = default;
  virtual const char* backend() const = 0;
  virtual int rank() const = 0;
  virtual int ranks() const = 0;
  // Enqueues `t` for `peer` and returns; `t` is kept alive, and must stay unchanged, until
  // it has left.
  virtual void send(const at::Tensor& t, int peer) = 0;
  // Receives the tensor `meta` describes from `peer`; throws CommError when what comes
  // disagrees with `meta`, the peer is gone or nothing comes within the timeout.
  virtual at::Tensor recv(const messages::TensorMeta& meta, int peer) = 0;
  // Sums `t` over every rank, in place.
  virtual void all_reduce_sum(at::Tensor& t) = 0;
};

struct CommOptions {
  int device = -1;                 // CUDA device index (NCCL); -1: the CPU
  double timeout_s = 60;           // joining and each receive wait at most this long
  std::string host = "127.0.0.1";  // TCP: the address rank 0 listens on
};

// "tcp" everywhere; "nccl" where swarmrt was built with NCCL.
bool comm_backend_built(const std::string& backend);

// Rank 0 of a new communicator of `ranks`, and the id the other ranks join with.
std::pair<std::unique_ptr<Comm>, std::vector<uint8_t>> create_comm(const std::string& backend,
                                                                   int ranks,
                                                                   const CommOptions& options);
std::unique_ptr<Comm> join_comm(const std::string& backend, const std::vector<uint8_t>& id,
                                int ranks, int rank, const CommOptions& options);

// The tensors of a frame to `peer`; its header goes over CAF.
void send_frame_tensors(Comm& comm, const messages::Frame& frame, int peer);
// The frame whose `header` came over CAF, its tensors received from `peer`. Throws
// messages::DecodeError for a bad header, CommError for tensors that do not come as described.
messages::Frame receive_frame(Comm& comm, int peer, messages::FrameKind kind,
                              const std::vector<uint8_t>& header);

}  // namespace swarmrt::transport
