#include "transport/nccl_transport.hpp"

#include <ATen/ATen.h>
#include <cuda_runtime_api.h>
#include <nccl.h>
#include <chrono>
#include <cstring>
#include <string>
#include <thread>

namespace swarmrt::transport {
namespace {

void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess)
    throw NcclError(std::string(what) + ": CUDA error: " + cudaGetErrorString(e));
}

void check(ncclResult_t r, const char* what) {
  if (r != ncclSuccess)
    throw NcclError(std::string(what) + ": NCCL error: " + ncclGetErrorString(r));
}

ncclDataType_t nccl_type(at::ScalarType t) {
  switch (t) {
    case at::kFloat:
      return ncclFloat32;
    case at::kHalf:
      return ncclFloat16;
    case at::kBFloat16:
      return ncclBfloat16;
    case at::kLong:
      return ncclInt64;
    default:
      throw NcclError(std::string("NCCL transport: unsupported dtype ") + c10::toString(t));
  }
}

ncclComm_t as_comm(void* p) {
  return static_cast<ncclComm_t>(p);
}
cudaStream_t as_stream(void* p) {
  return static_cast<cudaStream_t>(p);
}

}  // namespace

std::vector<uint8_t> nccl_unique_id() {
  ncclUniqueId id;
  check(ncclGetUniqueId(&id), "ncclGetUniqueId");
  return std::vector<uint8_t>(reinterpret_cast<uint8_t*>(&id),
                              reinterpret_cast<uint8_t*>(&id) + sizeof(id));
}

NcclComm::NcclComm(const std::vector<uint8_t>& unique_id, int ranks, int rank, int device,
                   double timeout_s)
    : device_(device), rank_(rank), ranks_(ranks), timeout_s_(timeout_s) {
  if (unique_id.size() != sizeof(ncclUniqueId))
    throw NcclError("ncclUniqueId of " + std::to_string(unique_id.size()) + " bytes, expected " +
                    std::to_string(sizeof(ncclUniqueId)));
  int devices = 0;
  check(cudaGetDeviceCount(&devices), "cudaGetDeviceCount");
  if (device < 0 || device >= devices)
    throw NcclError("CUDA device " + std::to_string(device) + " does not exist (" +
                    std::to_string(devices) + " visible)");
  check(cudaSetDevice(device), "cudaSetDevice");
  cudaStream_t stream;
  check(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreate");
  ncclUniqueId id;
  std::memcpy(&id, unique_id.data(), sizeof(id));
  // Non-blocking: the call returns while NCCL waits for the other ranks, and comm() waits
  // for the join against the deadline, so a rank that never comes does not hang this one.
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  ncclComm_t comm = nullptr;
  const ncclResult_t r = ncclCommInitRankConfig(&comm, ranks, id, rank, &config);
  if (r != ncclSuccess && r != ncclInProgress) {
    if (comm) ncclCommAbort(comm);
    cudaStreamDestroy(stream);
    check(r, "ncclCommInitRankConfig");
  }
  comm_ = comm;
  stream_ = stream;
}

NcclComm::~NcclComm() {
  for (auto& p : pending_) cudaEventDestroy(static_cast<cudaEvent_t>(p.event));
  // Abort rather than destroy: ncclCommDestroy may wait for peers that are gone, and a
  // communicator is dropped exactly when a peer left or a link failed.
  if (comm_ && aborted_.empty()) ncclCommAbort(as_comm(comm_));
  if (stream_) cudaStreamDestroy(as_stream(stream_));
}

void NcclComm::fail(const std::string& why) {
  if (comm_ && aborted_.empty()) {
    const std::string last = ncclGetLastError(as_comm(comm_));
    aborted_ = last.empty() ? why : why + " (" + last + ")";
    // Aborting stops this rank's kernels still waiting on the peers; the tensors they used
    // can then be freed.
    ncclCommAbort(as_comm(comm_));
    for (auto& p : pending_) cudaEventDestroy(static_cast<cudaEvent_t>(p.event));
    pending_.clear();
  } else if (aborted_.empty()) {
    aborted_ = why;
  }
  throw NcclError("NCCL communicator (rank " + std::to_string(rank_) + " of " +
                  std::to_string(ranks_) + "): " + aborted_ + "; communicator aborted");
}

void NcclComm::settle(const char* what) {
  const auto since = Clock::now();
  const auto limit = std::chrono::duration<double>(timeout_s_);
  for (;;) {
    ncclResult_t state = ncclSuccess;
    const ncclResult_t r = ncclCommGetAsyncError(as_comm(comm_), &state);
    if (r != ncclSuccess) fail(std::string(what) + ": " + ncclGetErrorString(r));
    if (state == ncclSuccess) return;
    if (state != ncclInProgress) fail(std::string(what) + ": " + ncclGetErrorString(state));
    if (Clock::now() - since > limit)
      fail(std::string(what) + ": no answer from the other ranks within " +
           std::to_string(timeout_s_) + " s");
    std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
}

void* NcclComm::comm() {
  if (!aborted_.empty())
    throw NcclError("NCCL communicator (rank " + std::to_string(rank_) + " of " +
                    std::to_string(ranks_) + ") was aborted before: " + aborted_);
  if (!joined_) {
    settle("joining");
    joined_ = true;
  }
  return comm_;
}

void NcclComm::wait_event(void* event, Clock::time_point since, const char* what) {
  const auto limit = std::chrono::duration<double>(timeout_s_);
  for (;;) {
    const cudaError_t e = cudaEventQuery(static_cast<cudaEvent_t>(event));
    if (e == cudaSuccess) return;
    if (e != cudaErrorNotReady) fail(std::string(what) + ": CUDA error: " + cudaGetErrorString(e));
    // A peer's failure shows up as the communicator's error while our kernel still waits.
    ncclResult_t state = ncclSuccess;
    if (ncclCommGetAsyncError(as_comm(comm_), &state) == ncclSuccess && state != ncclSuccess &&
        state != ncclInProgress)
      fail(std::string(what) + ": " + ncclGetErrorString(state));
    if (Clock::now() - since > limit)
      fail(std::string(what) + ": not done within " + std::to_string(timeout_s_) +
           " s (a rank gone or frozen)");
    std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
}

void NcclComm::enqueued(const char* what) {
  const auto since = Clock::now();
  settle(what);
  cudaEvent_t done;
  check(cudaEventCreateWithFlags(&done, cudaEventDisableTiming), "cudaEventCreate");
  check(cudaEventRecord(done, as_stream(stream_)), "cudaEventRecord");
  try {
    wait_event(done, since, what);
  } catch (...) {
    cudaEventDestroy(done);
    throw;
  }
  cudaEventDestroy(done);
}

void NcclComm::after_torch() {
  // LibTorch queues its kernels on the legacy default stream, which a stream made with
  // cudaStreamNonBlocking does not wait for: without this NCCL could read a tensor that the
  // kernel making it has not finished writing.
  cudaEvent_t ready;
  check(cudaEventCreateWithFlags(&ready, cudaEventDisableTiming), "cudaEventCreate");
  const cudaError_t recorded = cudaEventRecord(ready, cudaStreamLegacy);
  const cudaError_t waited =
      recorded == cudaSuccess ? cudaStreamWaitEvent(as_stream(stream_), ready, 0) : recorded;
  cudaEventDestroy(ready);
  check(waited, "ordering after LibTorch's stream");
}

void NcclComm::reap(bool wait_all) {
  while (!pending_.empty()) {
    auto& front = pending_.front();
    const auto e = cudaEventQuery(static_cast<cudaEvent_t>(front.event));
    if (e == cudaErrorNotReady) {
      if (wait_all) {
        wait_event(front.event, front.since, "send");
      } else {
        if (Clock::now() - front.since > std::chrono::duration<double>(timeout_s_))
          fail("a send not taken within " + std::to_string(timeout_s_) +
               " s (a rank gone or frozen)");
        return;
      }
    } else if (e != cudaSuccess) {
      fail(std::string("send: CUDA error: ") + cudaGetErrorString(e));
    }
    cudaEventDestroy(static_cast<cudaEvent_t>(front.event));
    pending_.pop_front();
  }
}

void NcclComm::send(const at::Tensor& t, int peer) {
  check(cudaSetDevice(device_), "cudaSetDevice");
  auto* c_comm = as_comm(comm());
  reap(false);
  auto c = t.to(at::Device(at::kCUDA, device_)).contiguous();
  after_torch();
  const auto since = Clock::now();
  const ncclResult_t r = ncclSend(c.data_ptr(), static_cast<size_t>(c.numel()),
                                  nccl_type(c.scalar_type()), peer, c_comm, as_stream(stream_));
  if (r != ncclSuccess && r != ncclInProgress)
    fail(std::string("ncclSend: ") + ncclGetErrorString(r));
  settle("send");
  cudaEvent_t done;
  check(cudaEventCreateWithFlags(&done, cudaEventDisableTiming), "cudaEventCreate");
  check(cudaEventRecord(done, as_stream(stream_)), "cudaEventRecord");
  pending_.push_back({done, c, since});
}

at::Tensor NcclComm::recv(const messages::TensorMeta& meta, int peer) {
  check(cudaSetDevice(device_), "cudaSetDevice");
  auto* c_comm = as_comm(comm());
  auto t = at::empty(meta.shape,
                     at::TensorOptions().dtype(meta.dtype).device(at::Device(at::kCUDA, device_)));
  after_torch();
  const ncclResult_t r = ncclRecv(t.data_ptr(), static_cast<size_t>(t.numel()),
                                  nccl_type(meta.dtype), peer, c_comm, as_stream(stream_));
  if (r != ncclSuccess && r != ncclInProgress)
    fail(std::string("ncclRecv: ") + ncclGetErrorString(r));
  enqueued("receive");
  return t;
}

void NcclComm::all_reduce_sum(at::Tensor& t) {
  check(cudaSetDevice(device_), "cudaSetDevice");
  if (!t.is_contiguous()) throw NcclError("all-reduce needs a contiguous tensor");
  auto* c_comm = as_comm(comm());
  after_torch();
  const ncclResult_t r =
      ncclAllReduce(t.data_ptr(), t.data_ptr(), static_cast<size_t>(t.numel()),
                    nccl_type(t.scalar_type()), ncclSum, c_comm, as_stream(stream_));
  if (r != ncclSuccess && r != ncclInProgress)
    fail(std::string("ncclAllReduce: ") + ncclGetErrorString(r));
  enqueued("all-reduce");
}

}  // namespace swarmrt::transport
