// NCCL between CUDA devices (built with SWARMRT_WITH_NCCL). One communicator per stage-pair
// link (two ranks) and one per DiLoCo group (one rank per worker). Its ncclUniqueId is made by
// one side and travels to the others in a CAF message, as bytes. For a hop, the tensors go
// with ncclSend/ncclRecv on the communicator's stream and the frame header still travels over
// CAF as (nccl_atom, kind, header): the receiver learns from it what to receive (dtype,
// shape) and keeps the order of hops. The CUDA runtime API is used directly (streams, events),
// so this compiles against a CPU LibTorch as well; it runs only where a GPU is.
#pragma once

#include <ATen/core/Tensor.h>
#include <deque>
#include <memory>
#include <stdexcept>
#include <vector>

#include "transport/transport.hpp"

namespace swarmrt::transport {

using nccl_atom = caf::atom_constant<caf::atom("nccl")>;

struct NcclError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// A fresh ncclUniqueId as bytes, to send to the other ranks.
std::vector<uint8_t> nccl_unique_id();

class NcclComm {
 public:
  // Joins communicator `unique_id` as `rank` of `ranks` on CUDA device `device`. Every rank
  // must call this (it blocks until all have); throws NcclError naming what failed.
  NcclComm(const std::vector<uint8_t>& unique_id, int ranks, int rank, int device);
  ~NcclComm();
  NcclComm(const NcclComm&) = delete;
  NcclComm& operator=(const NcclComm&) = delete;

  // Enqueues the send; `t` is kept alive until the stream has passed it.
  void send(const at::Tensor& t, int peer);
  // Receives a tensor described by `meta` from `peer` and waits for it.
  at::Tensor recv(const messages::TensorMeta& meta, int peer);
  // Sums `t` over every rank, in place (the DiLoCo group's pseudo-gradient all-reduce).
  void all_reduce_sum(at::Tensor& t);
  int device() const { return device_; }
  int rank() const { return rank_; }

 private:
  void reap(bool wait_all);
  struct Pending {
    void* event;
    at::Tensor keep;
  };
  void* comm_ = nullptr;    // ncclComm_t
  void* stream_ = nullptr;  // cudaStream_t
  int device_ = 0;
  int rank_ = 0;
  std::deque<Pending> pending_;
};

// A link to one peer over a two-rank communicator.
class NcclTransport final : public Transport {
 public:
  NcclTransport(std::shared_ptr<NcclComm> comm, int peer_rank)
      : comm_(std::move(comm)), peer_(peer_rank) {}
  const char* name() const override { return "nccl"; }
  void send(caf::local_actor* self, const caf::actor& to, messages::FrameKind kind,
            messages::Frame frame) override;

 private:
  std::shared_ptr<NcclComm> comm_;
  int peer_;
};

// The receiving side: the header came over CAF, the tensors come over `comm` from `peer`.
messages::Frame nccl_receive(NcclComm& comm, int peer, messages::FrameKind kind,
                             const std::vector<uint8_t>& header);

}  // namespace swarmrt::transport
