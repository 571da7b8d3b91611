// NCCL between CUDA devices (built with SWARMRT_WITH_NCCL): the Comm of comm.hpp for workers
// whose tensors live on CUDA devices. One communicator per stage-pair link (two ranks) and one
// per DiLoCo group (one rank per worker). Its ncclUniqueId is made by rank 0 and travels to
// the others in a CAF message, as bytes. ncclCommInitRank blocks until every rank has called
// it, so it runs on a thread of its own: rank 0 can send the id on at once, and the first
// send, receive or all-reduce waits for it. The CUDA runtime API is used directly (streams,
// events), so this compiles against a CPU LibTorch as well; it runs only where a GPU is.
#pragma once

#include <deque>
#include <future>
#include <memory>
#include <vector>

#include "transport/comm.hpp"

namespace swarmrt::transport {

using NcclError = CommError;

// A fresh ncclUniqueId as bytes, to send to the other ranks.
std::vector<uint8_t> nccl_unique_id();

class NcclComm final : public Comm {
 public:
  // Joins communicator `unique_id` as `rank` of `ranks` on CUDA device `device`. The id and
  // the device are checked here (CommError naming what is wrong); the join itself completes
  // in the background within `timeout_s`.
  NcclComm(const std::vector<uint8_t>& unique_id, int ranks, int rank, int device,
           double timeout_s = 60);
  ~NcclComm() override;
  NcclComm(const NcclComm&) = delete;
  NcclComm& operator=(const NcclComm&) = delete;

  const char* backend() const override { return "nccl"; }
  int rank() const override { return rank_; }
  int ranks() const override { return ranks_; }
  // Enqueues the send on the communicator's stream; `t` is kept alive until the stream has
  // passed it.
  void send(const at::Tensor& t, int peer) override;
  // Receives a tensor described by `meta` from `peer` and waits for it.
  at::Tensor recv(const messages::TensorMeta& meta, int peer) override;
  // Sums `t` over every rank, in place (the DiLoCo group's pseudo-gradient all-reduce).
  void all_reduce_sum(at::Tensor& t) override;
  int device() const { return device_; }

 private:
  void* comm();  // waits for the join; throws CommError
  void reap(bool wait_all);
  struct Pending {
    void* event;
    at::Tensor keep;
  };
  std::future<void*> joined_;  // the ncclComm_t, once every rank has joined
  void* comm_ = nullptr;       // ncclComm_t
  void* stream_ = nullptr;     // cudaStream_t
  int device_ = 0;
  int rank_ = 0;
  int ranks_ = 0;
  double timeout_s_ = 60;
  std::deque<Pending> pending_;
};

}  // namespace swarmrt::transport
