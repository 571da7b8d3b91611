#include "model/checkpoint.hpp"
#include "model/crc.hpp"

#include "leader/fence.hpp"

#include <ATen/ATen.h>
#include <fcntl.h>
#include <torch/nn/module.h>
#include <torch/optim/optimizer.h>
#include <torch/serialize/input-archive.h>
#include <torch/serialize/output-archive.h>
#include <unistd.h>
#include <zlib.h>
#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

namespace swarmrt::model {
namespace fs = std::filesystem;

// Layout: "SWRTCKPT" | u32 version | u32 crc32(body) | u64 body_len | body
// body:   u64 meta_len, meta | u64 n_tensors, { u32 name_len, name, i32 dtype, u32 ndim,
//         i64 dims[ndim], u64 nbytes, bytes } | u64 n_blobs, { u32 name_len, name, u64 len, bytes }
namespace {
constexpr char kMagic[8] = {'S', 'W', 'R', 'T', 'C', 'K', 'P', 'T'};
constexpr uint32_t kVersion = 1;
constexpr size_t kHeader = 8 + 4 + 4 + 8;

const std::set<at::ScalarType> kDtypes = {at::kFloat, at::kDouble, at::kHalf, at::kBFloat16,
                                          at::kLong,  at::kInt,    at::kByte, at::kBool};

template <class T>
void put(std::string& out, T v) {
  out.append(reinterpret_cast<const char*>(&v), sizeof(T));
}
void put_bytes(std::string& out, const void* p, size_t n) {
  out.append(static_cast<const char*>(p), n);
}

// Bounds-checked reading of the body: every failure names the field that did not fit.
class Reader {
 public:
  Reader(const std::string& path, const char* p, size_t n) : path_(path), p_(p), n_(n) {}
  template <class T>
  T get(const char* what) {
    need(sizeof(T), what);
    T v;
    std::memcpy(&v, p_ + off_, sizeof(T));
    off_ += sizeof(T);
    return v;
  }
  const char* take(size_t n, const char* what) {
    need(n, what);
    const char* r = p_ + off_;
    off_ += n;
    return r;
  }
  bool done() const { return off_ == n_; }
  [[noreturn]] void fail(const std::string& msg) const {
    throw CheckpointError(path_ + ": malformed checkpoint: " + msg);
  }

 private:
  void need(size_t n, const char* what) const {
    if (n > n_ - off_) fail(std::string("body ends inside ") + what);
  }
  const std::string& path_;
  const char* p_;
  size_t n_, off_ = 0;
};

bool write_fully(int fd, const char* p, size_t n) {
  while (n > 0) {
    const ssize_t w = ::write(fd, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    p += w;
    n -= static_cast<size_t>(w);
  }
  return true;
}

// The step of "step_<digits>.ckpt", or -1.
int64_t step_of(const std::string& filename) {
  if (filename.rfind("step_", 0) != 0 || filename.size() <= 10 ||
      filename.compare(filename.size() - 5, 5, ".ckpt") != 0)
    return -1;
  const auto digits = filename.substr(5, filename.size() - 10);
  if (digits.empty() || digits.size() > 18 ||
      digits.find_first_not_of("0123456789") != std::string::npos)
    return -1;
  return std::stoll(digits);
}

void fsync_path(const fs::path& p, int flags) {
  int fd = ::open(p.c_str(), flags);
  if (fd >= 0) {
    ::fsync(fd);
    ::close(fd);
  }
}
}  // namespace

const at::Tensor* Checkpoint::find(const std::string& name) const {
  for (const auto& [n, t] : tensors)
    if (n == name) return &t;
  return nullptr;
}

void write_checkpoint(const std::string& path, const Checkpoint& ckpt) {
  std::string body;
  put<uint64_t>(body, ckpt.meta_json.size());
  put_bytes(body, ckpt.meta_json.data(), ckpt.meta_json.size());
  put<uint64_t>(body, ckpt.tensors.size());
  for (const auto& [name, tensor] : ckpt.tensors) {
    if (!kDtypes.count(tensor.scalar_type()))
      throw CheckpointError(path + ": tensor '" + name + "' has unsupported dtype " +
                            std::string(c10::toString(tensor.scalar_type())));
    auto t = tensor.detach().to(at::kCPU).contiguous();
    put<uint32_t>(body, static_cast<uint32_t>(name.size()));
    put_bytes(body, name.data(), name.size());
    put<int32_t>(body, static_cast<int32_t>(t.scalar_type()));
    put<uint32_t>(body, static_cast<uint32_t>(t.dim()));
    for (auto d : t.sizes()) put<int64_t>(body, d);
    const uint64_t nbytes = t.numel() * t.element_size();
    put<uint64_t>(body, nbytes);
    put_bytes(body, t.data_ptr(), nbytes);
  }
  put<uint64_t>(body, ckpt.blobs.size());
  for (const auto& [name, bytes] : ckpt.blobs) {
    put<uint32_t>(body, static_cast<uint32_t>(name.size()));
    put_bytes(body, name.data(), name.size());
    put<uint64_t>(body, bytes.size());
    put_bytes(body, bytes.data(), bytes.size());
  }

  std::string header(kMagic, sizeof(kMagic));
  put<uint32_t>(header, kVersion);
  put<uint32_t>(header, crc32_of(body.data(), body.size()));
  put<uint64_t>(header, body.size());

  const fs::path target(path);
  if (target.has_parent_path()) fs::create_directories(target.parent_path());
  const std::string tmp = path + ".tmp-" + std::to_string(::getpid());
  {
    // write, fsync and close are each checked: a file that did not reach the disk whole is
    // never renamed into place.
    const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0)
      throw CheckpointError(path + ": cannot create " + tmp + ": " + std::strerror(errno));
    bool ok = write_fully(fd, header.data(), header.size()) &&
              write_fully(fd, body.data(), body.size()) && ::fsync(fd) == 0;
    const int saved = errno;
    ok = ::close(fd) == 0 && ok;
    if (!ok) {
      std::remove(tmp.c_str());
      throw CheckpointError(path + ": writing the checkpoint failed: " + std::strerror(saved) +
                            " (disk full?)");
    }
  }
  // A replaced leader moves no checkpoint into place (leader/fence.hpp).
  if (const auto why = leader::write_fenced(); !why.empty()) {
    std::remove(tmp.c_str());
    throw CheckpointError(path + ": not written: " + why);
  }
  std::error_code ec;
  fs::rename(tmp, target, ec);
  if (ec) {
    std::remove(tmp.c_str());
    throw CheckpointError(path + ": cannot move the checkpoint into place: " + ec.message());
  }
  if (target.has_parent_path()) fsync_path(target.parent_path(), O_RDONLY | O_DIRECTORY);
}

Checkpoint read_checkpoint(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw CheckpointError(path + ": cannot open checkpoint");
  std::string data((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (data.size() < kHeader)
    throw CheckpointError(path + ": truncated checkpoint (" + std::to_string(data.size()) +
                          " bytes, shorter than the " + std::to_string(kHeader) + "-byte header)");
  if (std::memcmp(data.data(), kMagic, sizeof(kMagic)) != 0)
    throw CheckpointError(path + ": not a swarmrt checkpoint (bad magic)");
  uint32_t version, crc;
  uint64_t body_len;
  std::memcpy(&version, data.data() + 8, 4);
  std::memcpy(&crc, data.data() + 12, 4);
  std::memcpy(&body_len, data.data() + 16, 8);
  if (version != kVersion)
    throw CheckpointError(path + ": checkpoint format version " + std::to_string(version) +
                          ", this build reads version " + std::to_string(kVersion));
  if (body_len != data.size() - kHeader)
    throw CheckpointError(path + ": truncated checkpoint (header promises " +
                          std::to_string(body_len) + " body bytes, file holds " +
                          std::to_string(data.size() - kHeader) + ")");
  const char* body = data.data() + kHeader;
  if (crc32_of(body, body_len) != crc)
    throw CheckpointError(path + ": checksum mismatch: the checkpoint is corrupt");

  Reader r(path, body, body_len);
  Checkpoint ckpt;
  const auto meta_len = r.get<uint64_t>("metadata length");
  ckpt.meta_json.assign(r.take(meta_len, "metadata"), meta_len);
  const auto n_tensors = r.get<uint64_t>("tensor count");
  for (uint64_t i = 0; i < n_tensors; ++i) {
    const auto name_len = r.get<uint32_t>("tensor name length");
    std::string name(r.take(name_len, "tensor name"), name_len);
    const auto dtype = static_cast<at::ScalarType>(r.get<int32_t>("tensor dtype"));
    if (!kDtypes.count(dtype)) r.fail("tensor '" + name + "' has an unknown dtype");
    const auto ndim = r.get<uint32_t>("tensor rank");
    if (ndim > 8) r.fail("tensor '" + name + "' has rank " + std::to_string(ndim));
    std::vector<int64_t> dims(ndim);
    int64_t numel = 1;
    for (auto& d : dims) {
      d = r.get<int64_t>("tensor shape");
      if (d < 0 || (d > 0 && numel > (int64_t{1} << 40) / d)) r.fail("tensor '" + name + "' shape");
      numel *= d;
    }
    const auto nbytes = r.get<uint64_t>("tensor size");
    // Sizes are checked against the shape and against the bytes left in the file before
    // anything is allocated, so a crafted header cannot ask for more memory than it brings.
    const auto need = static_cast<uint64_t>(numel) * c10::elementSize(dtype);
    if (nbytes != need)
      r.fail("tensor '" + name + "' holds " + std::to_string(nbytes) + " bytes, shape needs " +
             std::to_string(need));
    const char* bytes = r.take(nbytes, "tensor data");
    auto t = at::empty(dims, at::TensorOptions().dtype(dtype));
    std::memcpy(t.data_ptr(), bytes, nbytes);
    ckpt.tensors.emplace_back(std::move(name), std::move(t));
  }
  const auto n_blobs = r.get<uint64_t>("blob count");
  for (uint64_t i = 0; i < n_blobs; ++i) {
    const auto name_len = r.get<uint32_t>("blob name length");
    std::string name(r.take(name_len, "blob name"), name_len);
    const auto len = r.get<uint64_t>("blob length");
    ckpt.blobs[name].assign(r.take(len, "blob data"), len);
  }
  if (!r.done()) r.fail("trailing bytes after the last blob");
  return ckpt;
}

NamedTensors parameters_of(const torch::nn::Module& module) {
  NamedTensors out;
  for (const auto& item : module.named_parameters())
    out.emplace_back(item.key(), item.value().detach().to(at::kCPU).clone());
  return out;
}

void load_parameters(torch::nn::Module& module, const Checkpoint& ckpt, const std::string& origin) {
  torch::NoGradGuard no_grad;
  for (auto& item : module.named_parameters()) {
    const at::Tensor* src = ckpt.find(item.key());
    if (!src) throw CheckpointError(origin + ": checkpoint has no parameter '" + item.key() + "'");
    if (src->sizes() != item.value().sizes())
      throw CheckpointError(origin + ": parameter '" + item.key() + "' has shape " +
                            c10::str(src->sizes()) + " in the checkpoint, the model expects " +
                            c10::str(item.value().sizes()));
    item.value().copy_(*src);
  }
}

std::string optimizer_bytes(torch::optim::Optimizer& opt) {
  torch::serialize::OutputArchive archive;
  opt.save(archive);
  std::string bytes;
  archive.save_to([&](const void* data, size_t n) {
    bytes.append(static_cast<const char*>(data), n);
    return n;
  });
  return bytes;
}

void load_optimizer_bytes(torch::optim::Optimizer& opt, const std::string& bytes,
                          const at::Device& device) {
  torch::serialize::InputArchive archive;
  archive.load_from(bytes.data(), bytes.size(), device);
  opt.load(archive);
}

std::string CheckpointDir::save(int64_t step, const Checkpoint& ckpt, int64_t keep) {
  char name[32];
  std::snprintf(name, sizeof(name), "step_%08lld.ckpt", static_cast<long long>(step));
  const std::string path = (fs::path(dir_) / name).string();
  write_checkpoint(path, ckpt);
  auto files = list();
  for (size_t i = static_cast<size_t>(std::max<int64_t>(keep, 1)); i < files.size(); ++i)
    fs::remove(files[i]);
  return path;
}

std::vector<std::string> CheckpointDir::list() const {
  std::vector<std::pair<int64_t, std::string>> found;
  std::error_code ec;
  if (!fs::is_directory(dir_, ec)) return {};
  for (const auto& e : fs::directory_iterator(dir_)) {
    const auto step = step_of(e.path().filename().string());
    if (e.is_regular_file() && step >= 0) found.emplace_back(step, e.path().string());
  }
  // By step number: names are zero-padded to 8 digits, but step 100000000 has 9.
  std::sort(found.rbegin(), found.rend());
  std::vector<std::string> files;
  for (auto& [step, path] : found) files.push_back(std::move(path));
  return files;
}

bool CheckpointDir::has(int64_t step) const {
  for (const auto& path : list())
    if (step_of(fs::path(path).filename().string()) == step) return true;
  return false;
}

size_t CheckpointDir::remove_stale_temporaries() const {
  size_t removed = 0;
  std::error_code ec;
  if (!fs::is_directory(dir_, ec)) return 0;
  for (const auto& e : fs::directory_iterator(dir_)) {
    const auto name = e.path().filename().string();
    if (e.is_regular_file() && name.rfind("step_", 0) == 0 &&
        name.find(".ckpt.tmp-") != std::string::npos)
      removed += fs::remove(e.path(), ec) ? 1 : 0;
  }
  return removed;
}

std::optional<std::pair<std::string, Checkpoint>> CheckpointDir::newest_valid(
    const std::function<void(const std::string&, const std::string&)>& on_refused,
    const std::function<void(const std::string&, const Checkpoint&)>& check) const {
  for (const auto& path : list()) {
    try {
      auto ckpt = read_checkpoint(path);
      if (check) check(path, ckpt);
      return std::make_pair(path, std::move(ckpt));
    } catch (const std::exception& e) {  // LibTorch's own errors (c10::Error) too
      on_refused(path, e.what());
    }
  }
  return std::nullopt;
}

}  // namespace swarmrt::model
