#include "transport/nccl_transport.hpp"

#include <ATen/ATen.h>
#include <cuda_runtime_api.h>
#include <nccl.h>
#include <cstring>
#include <string>

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

NcclComm::NcclComm(const std::vector<uint8_t>& unique_id, int ranks, int rank, int device)
    : device_(device), rank_(rank) {
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
  ncclComm_t comm;
  check(ncclCommInitRank(&comm, ranks, id, rank), "ncclCommInitRank");
  comm_ = comm;
}

NcclComm::~NcclComm() {
  try {
    reap(true);
  } catch (...) {
  }
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
  auto c = t.contiguous();
  check(ncclSend(c.data_ptr(), static_cast<size_t>(c.numel()), nccl_type(c.scalar_type()), peer,
                 as_comm(comm_), as_stream(stream_)),
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
                 as_comm(comm_), as_stream(stream_)),
        "ncclRecv");
  check(cudaStreamSynchronize(as_stream(stream_)), "cudaStreamSynchronize");
  return t;
}

void NcclComm::all_reduce_sum(at::Tensor& t) {
  check(cudaSetDevice(device_), "cudaSetDevice");
  if (!t.is_contiguous()) throw NcclError("all-reduce needs a contiguous tensor");
  check(ncclAllReduce(t.data_ptr(), t.data_ptr(), static_cast<size_t>(t.numel()),
                      nccl_type(t.scalar_type()), ncclSum, as_comm(comm_), as_stream(stream_)),
        "ncclAllReduce");
  check(cudaStreamSynchronize(as_stream(stream_)), "cudaStreamSynchronize");
}

void NcclTransport::send(caf::local_actor* self, const caf::actor& to, messages::FrameKind kind,
                         messages::Frame frame) {
  // Sends are enqueued before the header leaves, so the receiver's recv always finds them.
  for (const auto& t : frame.tensors) comm_->send(t, peer_);
  caf::unsafe_send_as(self, to, nccl_atom::value, static_cast<uint8_t>(kind),
                      std::move(frame.header));
}

messages::Frame nccl_receive(NcclComm& comm, int peer, messages::FrameKind kind,
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
