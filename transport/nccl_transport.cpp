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
  stream_ = stream;
  ncclUniqueId id;
  std::memcpy(&id, unique_id.data(), sizeof(id));
  // ncclCommInitRank returns only when every rank has called it: it runs on a thread of its
  // own, detached, so that a communicator given up on (a rank that never came) does not hold
  // up its destructor.
  auto joined = std::make_shared<std::promise<void*>>();
  joined_ = joined->get_future();
  std::thread([joined, id, ranks, rank, device] {
    try {
      check(cudaSetDevice(device), "cudaSetDevice");
      ncclComm_t comm;
      check(ncclCommInitRank(&comm, ranks, id, rank), "ncclCommInitRank");
      joined->set_value(comm);
    } catch (...) {
      joined->set_exception(std::current_exception());
    }
  }).detach();
}

void* NcclComm::comm() {
  if (comm_) return comm_;
  if (!joined_.valid()) throw NcclError("NCCL communicator: its join failed before");
  if (joined_.wait_for(std::chrono::microseconds(static_cast<int64_t>(timeout_s_ * 1e6))) !=
      std::future_status::ready)
    throw NcclError("NCCL communicator: not every rank joined within " +
                    std::to_string(timeout_s_) + " s");
  comm_ = joined_.get();  // rethrows the join's CommError
  return comm_;
}

NcclComm::~NcclComm() {
  try {
    reap(true);
  } catch (...) {
  }
  if (!comm_ && joined_.valid() &&
      joined_.wait_for(std::chrono::seconds(0)) == std::future_status::ready) {
    try {
      comm_ = joined_.get();
    } catch (...) {
    }
  }
  // A join still waiting for a rank that never came is left to its thread.
  if (comm_) ncclCommDestroy(as_comm(comm_));
  if (stream_) cudaStreamDestroy(as_stream(stream_));
}

void NcclComm::reap(bool wait_all) {
  while (!pending_.empty()) {
    auto event = static_cast<cudaEvent_t>(pending_.front().event);
    if (wait_all)
      check(cudaEventSynchronize(event), "cudaEventSynchronize");
    else if (cudaEventQuery(event) == cudaErrorNotReady)
      return;
    cudaEventDestroy(event);
    pending_.pop_front();
  }
}

void NcclComm::send(const at::Tensor& t, int peer) {
  reap(false);
  check(cudaSetDevice(device_), "cudaSetDevice");
  auto c = t.to(at::Device(at::kCUDA, device_)).contiguous();
  check(ncclSend(c.data_ptr(), static_cast<size_t>(c.numel()), nccl_type(c.scalar_type()), peer,
                 as_comm(comm()), as_stream(stream_)),
        "ncclSend");
  cudaEvent_t done;
  check(cudaEventCreateWithFlags(&done, cudaEventDisableTiming), "cudaEventCreate");
  check(cudaEventRecord(done, as_stream(stream_)), "cudaEventRecord");
  pending_.push_back({done, c});
}

at::Tensor NcclComm::recv(const messages::TensorMeta& meta, int peer) {
  check(cudaSetDevice(device_), "cudaSetDevice");
  auto t = at::empty(meta.shape,
                     at::TensorOptions().dtype(meta.dtype).device(at::Device(at::kCUDA, device_)));
  check(ncclRecv(t.data_ptr(), static_cast<size_t>(t.numel()), nccl_type(meta.dtype), peer,
                 as_comm(comm()), as_stream(stream_)),
        "ncclRecv");
  check(cudaStreamSynchronize(as_stream(stream_)), "cudaStreamSynchronize");
  return t;
}

void NcclComm::all_reduce_sum(at::Tensor& t) {
  check(cudaSetDevice(device_), "cudaSetDevice");
  if (!t.is_contiguous()) throw NcclError("all-reduce needs a contiguous tensor");
  check(ncclAllReduce(t.data_ptr(), t.data_ptr(), static_cast<size_t>(t.numel()),
                      nccl_type(t.scalar_type()), ncclSum, as_comm(comm()), as_stream(stream_)),
        "ncclAllReduce");
  check(cudaStreamSynchronize(as_stream(stream_)), "cudaStreamSynchronize");
}

}  // namespace swarmrt::transport
