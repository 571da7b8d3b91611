// NCCL between CUDA devices (built with SWARMRT_WITH_NCCL): the Comm of comm.hpp for workers
// whose tensors live on CUDA devices. One communicator per stage-pair link (two ranks) and one
// per DiLoCo group (one rank per worker). Its ncclUniqueId is made by rank 0 and travels to
// the others in a CAF message, as bytes.
//
// The communicator is non-blocking (ncclConfig_t.blocking = 0): joining, and every send,
// receive and all-reduce, is waited for here by polling, against a deadline of timeout_s. A
// rank that dies or freezes mid-collective would otherwise hold its peers' kernels forever;
// here the wait ends, the communicator is aborted (ncclCommAbort, which does not wait on the
// peers) and the caller gets a CommError, as it would from the TCP backend, and falls back to
// frames. Rank 0 can send the id on at once, since the join goes on inside NCCL. The CUDA
// runtime API is used directly (streams, events), so this compiles against a CPU LibTorch as
// well; it runs only where a GPU is.
#pragma once

#include <chrono>
#include <deque>
#include <memory>
#include <string>
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
  // in the background, and the first operation waits for it at most `timeout_s`.
  NcclComm(const std::vector<uint8_t>& unique_id, int ranks, int rank, int device,
           double timeout_s = 60);
  ~NcclComm() override;
  NcclComm(const NcclComm&) = delete;
  NcclComm& operator=(const NcclComm&) = delete;

  const char* backend() const override { return "nccl"; }
  int rank() const override { return rank_; }
  int ranks() const override { return ranks_; }
  // Enqueues the send on the communicator's stream; `t` is kept alive until the stream has
  // passed it. A send still not done `timeout_s` after it was enqueued aborts the
  // communicator at the next call.
  void send(const at::Tensor& t, int peer) override;
  // Receives a tensor described by `meta` from `peer` and waits for it, at most `timeout_s`.
  at::Tensor recv(const messages::TensorMeta& meta, int peer) override;
  // Sums `t` over every rank, in place (the DiLoCo group's pseudo-gradient all-reduce); waits
  // at most `timeout_s` for the other ranks.
  void all_reduce_sum(at::Tensor& t) override;
  int device() const { return device_; }

 private:
  using Clock = std::chrono::steady_clock;
  void* comm();                   // the joined ncclComm_t; throws CommError
  void settle(const char* what);  // waits out ncclInProgress after an NCCL call
  void wait_event(void* event, Clock::time_point since, const char* what);
  void enqueued(const char* what);  // settles, then waits for the stream's work so far
  void after_torch();               // orders the stream after LibTorch's queued kernels
  [[noreturn]] void fail(const std::string& why);  // aborts the communicator and throws
  void reap(bool wait_all);
  struct Pending {
    void* event;
    at::Tensor keep;
    Clock::time_point since;
  };
  void* comm_ = nullptr;    // ncclComm_t
  void* stream_ = nullptr;  // cudaStream_t
  bool joined_ = false;
  std::string aborted_;  // why the communicator was aborted; empty while it is usable
  int device_ = 0;
  int rank_ = 0;
  int ranks_ = 0;
  double timeout_s_ = 60;
  std::deque<Pending> pending_;
};

}  // namespace swarmrt::transport
