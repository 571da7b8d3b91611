#include "messages/header.hpp"

#include <capnp/message.h>
#include <capnp/serialize.h>
#include <kj/exception.h>
#include <cmath>
#include <cstring>

#include "messages/diloco.capnp.h"
#include "messages/microbatch.capnp.h"

namespace swarmrt::messages {
namespace {

wire::DType to_wire(at::ScalarType t) {
  switch (t) {
    case at::kFloat:
      return wire::DType::FLOAT32;
    case at::kBFloat16:
      return wire::DType::BFLOAT16;
    case at::kHalf:
      return wire::DType::FLOAT16;
    case at::kLong:
      return wire::DType::INT64;
    case at::kByte:
      return wire::DType::UINT8;
    default:
      throw DecodeError(std::string("dtype ") + c10::toString(t) + " cannot travel in a frame");
  }
}

at::ScalarType from_wire(wire::DType t) {
  switch (t) {
    case wire::DType::FLOAT32:
      return at::kFloat;
    case wire::DType::BFLOAT16:
      return at::kBFloat16;
    case wire::DType::FLOAT16:
      return at::kHalf;
    case wire::DType::INT64:
      return at::kLong;
    case wire::DType::UINT8:
      return at::kByte;
  }
  throw DecodeError("unknown dtype code " + std::to_string(static_cast<int>(t)));
}

std::vector<uint8_t> to_bytes(capnp::MallocMessageBuilder& builder) {
  auto words = capnp::messageToFlatArray(builder);
  auto bytes = words.asBytes();
  return std::vector<uint8_t>(bytes.begin(), bytes.end());
}

// Runs `read` over a word-aligned copy of the frame, turning every Cap'n Proto failure
// (kj::Exception is not a std::exception) into a DecodeError that says what was wrong.
template <class F>
auto with_reader(const uint8_t* data, size_t size, const char* what, F&& read) {
  if (size == 0) throw DecodeError(std::string(what) + ": empty frame");
  if (size > kMaxHeaderBytes)
    throw DecodeError(std::string(what) + ": frame of " + std::to_string(size) +
                      " bytes exceeds the " + std::to_string(kMaxHeaderBytes) + "-byte limit");
  if (size % sizeof(capnp::word) != 0)
    throw DecodeError(std::string(what) + ": frame of " + std::to_string(size) +
                      " bytes is not word-aligned (truncated?)");
  kj::Array<capnp::word> words = kj::heapArray<capnp::word>(size / sizeof(capnp::word));
  std::memcpy(words.begin(), data, size);
  capnp::ReaderOptions options;
  options.traversalLimitInWords = size / sizeof(capnp::word) * 4 + 64;
  options.nestingLimit = 16;
  try {
    capnp::FlatArrayMessageReader reader(words.asPtr(), options);
    return read(reader);
  } catch (const kj::Exception& e) {
    throw DecodeError(std::string(what) + ": " + e.getDescription().cStr());
  }
}

// Sets the list `init` makes to `values`, element by element.
template <class Values, class Init>
void set_list(Values const& values, Init&& init) {
  auto list = init(static_cast<unsigned>(values.size()));
  for (unsigned i = 0; i < values.size(); ++i) list.set(i, values[i]);
}

// A list a peer sent, at most `max` long: a longer one is refused before anything is copied.
template <class List, class Out>
void read_bounded(List list, size_t max, const std::string& what, Out& out) {
  if (list.size() > max) throw DecodeError(what + " of " + std::to_string(list.size()));
  for (auto v : list) out.push_back(v);
}

// An enum a peer sent, known only up to `last`.
template <class E, class W>
E read_enum(W raw, E last, const std::string& what) {
  const auto code = static_cast<uint16_t>(raw);
  if (code > static_cast<uint16_t>(last)) throw DecodeError(what + " " + std::to_string(code));
  return static_cast<E>(code);
}

void write_metas(capnp::List<wire::TensorMeta>::Builder out, const std::vector<TensorMeta>& metas) {
  for (unsigned i = 0; i < metas.size(); ++i) {
    auto t = out[i];
    t.setDtype(to_wire(metas[i].dtype));
    set_list(metas[i].shape, [&](unsigned n) { return t.initShape(n); });
    t.setByteSize(metas[i].byte_size);
  }
}

// Tensor metadata as declared by a peer: dtype known, rank bounded, dimensions non-negative,
// and the byte size consistent with dtype and shape (so no later step trusts a lying size).
std::vector<TensorMeta> read_metas(capnp::List<wire::TensorMeta>::Reader list, const char* what) {
  if (list.size() > kMaxTensors)
    throw DecodeError(std::string(what) + ": " + std::to_string(list.size()) + " tensors");
  std::vector<TensorMeta> out;
  for (auto t : list) {
    TensorMeta meta;
    meta.dtype = from_wire(t.getDtype());
    auto shape = t.getShape();
    if (shape.size() > kMaxRank)
      throw DecodeError(std::string(what) + ": tensor of rank " + std::to_string(shape.size()));
    uint64_t numel = 1;
    for (auto d : shape) {
      if (d < 0) throw DecodeError(std::string(what) + ": negative dimension " + std::to_string(d));
      if (d > 0 && numel > (uint64_t{1} << 48) / static_cast<uint64_t>(d))
        throw DecodeError(std::string(what) + ": tensor shape overflows");
      numel *= static_cast<uint64_t>(d);
      meta.shape.push_back(d);
    }
    meta.byte_size = t.getByteSize();
    const uint64_t expected = numel * c10::elementSize(meta.dtype);
    if (meta.byte_size != expected)
      throw DecodeError(std::string(what) + ": tensor declares " + std::to_string(meta.byte_size) +
                        " bytes, its dtype and shape make " + std::to_string(expected));
    out.push_back(std::move(meta));
  }
  return out;
}

}  // namespace

const char* to_string(Direction d) {
  switch (d) {
    case Direction::forward:
      return "forward";
    case Direction::backward:
      return "backward";
    case Direction::eval:
      return "eval";
    case Direction::verify:
      return "verify";
    case Direction::verify_output:
      return "verify_output";
  }
  return "?";
}

std::vector<uint8_t> encode(const MicroBatchHeader& h) {
  capnp::MallocMessageBuilder builder;
  auto m = builder.initRoot<wire::MicroBatchHeader>();
  m.setRunId(h.run_id);
  m.setStep(h.step);
  m.setMicroBatch(h.micro_batch);
  m.setAttempt(h.attempt);
  m.setStage(h.stage);
  m.setDirection(static_cast<wire::Direction>(h.direction));
  set_list(h.route, [&](unsigned n) { return m.initRoute(n); });
  m.setSamples(h.samples);
  write_metas(m.initTensors(static_cast<unsigned>(h.tensors.size())), h.tensors);
  if (!h.pin.empty()) set_list(h.pin, [&](unsigned n) { return m.initPin(n); });
  m.setLossScale(h.loss_scale);
  m.setHopEncoding(h.hop_encoding);
  return to_bytes(builder);
}

MicroBatchHeader decode_microbatch(const uint8_t* data, size_t size) {
  return with_reader(data, size, "micro-batch header", [](capnp::MessageReader& reader) {
    auto m = reader.getRoot<wire::MicroBatchHeader>();
    MicroBatchHeader h;
    h.run_id = m.getRunId();
    h.step = m.getStep();
    h.micro_batch = m.getMicroBatch();
    h.attempt = m.getAttempt();
    h.stage = m.getStage();
    h.direction = read_enum(m.getDirection(), Direction::verify_output,
                            "micro-batch header: unknown direction");
    read_bounded(m.getRoute(), kMaxRoute, "micro-batch header: a route", h.route);
    h.samples = m.getSamples();
    h.tensors = read_metas(m.getTensors(), "micro-batch header");
    read_bounded(m.getPin(), kMaxRoute, "micro-batch header: a pin", h.pin);
    h.loss_scale = m.getLossScale();
    h.hop_encoding = m.getHopEncoding();
    if (!std::isfinite(h.loss_scale) || h.loss_scale <= 0)
      throw DecodeError("micro-batch header: loss scale " + std::to_string(h.loss_scale));
    return h;
  });
}

std::vector<uint8_t> encode(const RoundHeader& h) {
  capnp::MallocMessageBuilder builder;
  auto m = builder.initRoot<wire::RoundHeader>();
  m.setRoundId(h.round_id);
  m.setStage(h.stage);
  m.setFragment(h.fragment);
  m.setContributor(h.contributor);
  m.setStatus(static_cast<wire::RoundStatus>(h.status));
  m.setStep(h.step);
  m.setReason(h.reason);
  auto names = m.initTensorNames(static_cast<unsigned>(h.tensor_names.size()));
  for (unsigned i = 0; i < h.tensor_names.size(); ++i) names.set(i, h.tensor_names[i]);
  write_metas(m.initTensors(static_cast<unsigned>(h.tensors.size())), h.tensors);
  set_list(h.contributors, [&](unsigned n) { return m.initContributors(n); });
  m.setUpdate(h.update);
  m.setFinal(h.final);
  m.setAverage(h.average);
  m.setWarmupEnd(h.warmup_end);
  m.setGathered(h.gathered);
  m.setDensity(h.density);
  return to_bytes(builder);
}

RoundHeader decode_round(const uint8_t* data, size_t size) {
  return with_reader(data, size, "round header", [](capnp::MessageReader& reader) {
    auto m = reader.getRoot<wire::RoundHeader>();
    RoundHeader h;
    h.round_id = m.getRoundId();
    h.stage = m.getStage();
    h.fragment = m.getFragment();
    h.contributor = m.getContributor();
    h.status = read_enum(m.getStatus(), RoundStatus::rejected, "round header: unknown status");
    h.step = m.getStep();
    h.reason = m.getReason().cStr();
    auto names = m.getTensorNames();
    if (names.size() > kMaxTensors)
      throw DecodeError("round header: " + std::to_string(names.size()) + " tensor names");
    for (auto n : names) h.tensor_names.emplace_back(n.cStr());
    h.tensors = read_metas(m.getTensors(), "round header");
    read_bounded(m.getContributors(), kMaxTensors, "round header: a list of contributors",
                 h.contributors);
    h.update = m.getUpdate();
    h.final = m.getFinal();
    h.average = m.getAverage();
    h.warmup_end = m.getWarmupEnd();
    h.gathered = m.getGathered();
    h.density = m.getDensity();
    if (!(h.density >= 0 && h.density <= 1))  // NaN fails both
      throw DecodeError("round header: density " + std::to_string(h.density) +
                        " is not a fraction in [0, 1]");
    return h;
  });
}

TensorMeta meta_of(const at::Tensor& t) {
  TensorMeta m;
  m.dtype = t.scalar_type();
  m.shape = t.sizes().vec();
  m.byte_size = static_cast<uint64_t>(t.numel()) * t.element_size();
  return m;
}

std::vector<TensorMeta> metas_of(const std::vector<at::Tensor>& ts) {
  std::vector<TensorMeta> out;
  out.reserve(ts.size());
  for (const auto& t : ts) out.push_back(meta_of(t));
  return out;
}

std::string check_payload(const std::vector<TensorMeta>& metas,
                          const std::vector<at::Tensor>& tensors) {
  if (metas.size() != tensors.size())
    return "header describes " + std::to_string(metas.size()) + " tensors, frame carries " +
           std::to_string(tensors.size());
  for (size_t i = 0; i < metas.size(); ++i) {
    const auto& m = metas[i];
    const auto& t = tensors[i];
    if (!t.defined()) return "tensor " + std::to_string(i) + " is missing";
    if (t.scalar_type() != m.dtype)
      return "tensor " + std::to_string(i) + " is " + c10::toString(t.scalar_type()) +
             ", header says " + c10::toString(m.dtype);
    if (t.sizes().vec() != m.shape)
      return "tensor " + std::to_string(i) + " has shape " + c10::str(t.sizes()) +
             ", header says " + c10::str(at::IntArrayRef(m.shape));
    const auto bytes = static_cast<uint64_t>(t.numel()) * t.element_size();
    if (bytes != m.byte_size)
      return "tensor " + std::to_string(i) + " holds " + std::to_string(bytes) +
             " bytes, header says " + std::to_string(m.byte_size);
  }
  return {};
}

}  // namespace swarmrt::messages
