#include "tokens/tokenizer.hpp"

#include <dlfcn.h>

#include <algorithm>
#include <cstdlib>
#include <mutex>
#include <string_view>

namespace swarmrt::tokens {
namespace {

// SentencePiece through its shim (spm_shim.cpp, which says why it is loaded apart).
struct Shim {
  void* (*load)(const char*, char*, size_t);
  void (*free)(void*);
  long (*size)(void*);
  int (*piece_id)(void*, const char*);
  int (*encode)(void*, const char*, size_t, int**, size_t*, char*, size_t);
  int (*decode)(void*, const int*, size_t, char**, size_t*, char*, size_t);
  void (*release)(void*);
  int (*train)(const char*, size_t, const char* const*, const char* const*, size_t, char*, size_t);
};

const Shim& shim() {
  static std::once_flag once;
  static Shim s;
  static std::string failure;
  std::call_once(once, [] {
    const char* env = std::getenv("SWARMRT_SPM_SHIM");
    std::vector<std::string> candidates;
    if (env && *env) candidates.push_back(env);
    candidates.push_back(SWARMRT_SPM_SHIM_PATH);
    candidates.push_back("libswarmrt_spm.so");
    void* handle = nullptr;
    for (const auto& c : candidates)
      if ((handle = ::dlopen(c.c_str(), RTLD_NOW | RTLD_LOCAL | RTLD_DEEPBIND))) break;
    if (!handle) {
      failure = std::string("cannot load the SentencePiece shim (") + SWARMRT_SPM_SHIM_PATH +
                "; set SWARMRT_SPM_SHIM): " + ::dlerror();
      return;
    }
    auto sym = [&](const char* name) {
      void* p = ::dlsym(handle, name);
      if (!p && failure.empty()) failure = std::string("the SentencePiece shim lacks ") + name;
      return p;
    };
    s.load = reinterpret_cast<decltype(s.load)>(sym("swarmrt_spm_load"));
    s.free = reinterpret_cast<decltype(s.free)>(sym("swarmrt_spm_free"));
    s.size = reinterpret_cast<decltype(s.size)>(sym("swarmrt_spm_size"));
    s.piece_id = reinterpret_cast<decltype(s.piece_id)>(sym("swarmrt_spm_piece_id"));
    s.encode = reinterpret_cast<decltype(s.encode)>(sym("swarmrt_spm_encode"));
    s.decode = reinterpret_cast<decltype(s.decode)>(sym("swarmrt_spm_decode"));
    s.release = reinterpret_cast<decltype(s.release)>(sym("swarmrt_spm_release"));
    s.train = reinterpret_cast<decltype(s.train)>(sym("swarmrt_spm_train"));
  });
  if (!failure.empty()) throw TokenizerError(failure);
  return s;
}

class ByteTokenizer final : public Tokenizer {
 public:
  std::vector<uint32_t> encode(const std::string& text) const override {
    std::vector<uint32_t> ids;
    ids.reserve(text.size());
    for (unsigned char c : text) ids.push_back(c);
    return ids;
  }
  std::string decode(const std::vector<uint32_t>& ids) const override {
    std::string out;
    for (uint32_t id : ids)
      if (id < 256) out.push_back(static_cast<char>(id));
    return out;
  }
  int64_t size() const override { return 256; }
};

class SentencePieceTokenizer final : public Tokenizer {
 public:
  explicit SentencePieceTokenizer(const std::string& file) : api_(shim()) {
    char err[512] = "";
    sp_ = api_.load(file.c_str(), err, sizeof err);
    if (!sp_) throw TokenizerError(file + ": cannot load tokenizer: " + err);
    newline_ = api_.piece_id(sp_, "\n");
    if (newline_ < 0) {
      api_.free(sp_);
      throw TokenizerError(file +
                           ": the tokenizer has no newline piece (train it with `swarmrt data "
                           "prepare`)");
    }
  }
  ~SentencePieceTokenizer() override { api_.free(sp_); }
  SentencePieceTokenizer(const SentencePieceTokenizer&) = delete;
  SentencePieceTokenizer& operator=(const SentencePieceTokenizer&) = delete;

  // Line by line: the model has never seen a line break inside a piece, and encoding a whole
  // corpus as one string would hold all its lattice at once.
  std::vector<uint32_t> encode(const std::string& text) const override {
    std::vector<uint32_t> ids;
    size_t start = 0;
    while (start <= text.size()) {
      const size_t end = std::min(text.find('\n', start), text.size());
      if (end > start) {
        int* line = nullptr;
        size_t n = 0;
        char err[512] = "";
        if (api_.encode(sp_, text.data() + start, end - start, &line, &n, err, sizeof err) != 0)
          throw TokenizerError(std::string("cannot encode: ") + err);
        ids.insert(ids.end(), line, line + n);
        api_.release(line);
      }
      if (end == text.size()) break;
      ids.push_back(static_cast<uint32_t>(newline_));
      start = end + 1;
    }
    return ids;
  }

  std::string decode(const std::vector<uint32_t>& ids) const override {
    std::vector<int> known;
    known.reserve(ids.size());
    const auto pieces = static_cast<uint32_t>(size());
    for (uint32_t id : ids)
      if (id < pieces) known.push_back(static_cast<int>(id));
    char* text = nullptr;
    size_t len = 0;
    char err[512] = "";
    if (api_.decode(sp_, known.data(), known.size(), &text, &len, err, sizeof err) != 0)
      throw TokenizerError(std::string("cannot decode: ") + err);
    std::string out(text, len);
    api_.release(text);
    return out;
  }

  int64_t size() const override { return api_.size(sp_); }

 private:
  const Shim& api_;
  void* sp_ = nullptr;
  int newline_ = 0;
};

}  // namespace

std::unique_ptr<Tokenizer> byte_tokenizer() {
  return std::make_unique<ByteTokenizer>();
}

std::unique_ptr<Tokenizer> load_sentencepiece(const std::string& model_file) {
  return std::make_unique<SentencePieceTokenizer>(model_file);
}

void train_sentencepiece(const std::string& text, int64_t vocab_size, const std::string& model_file,
                         int threads) {
  std::string prefix = model_file;
  if (prefix.size() > 6 && prefix.compare(prefix.size() - 6, 6, ".model") == 0)
    prefix.resize(prefix.size() - 6);
  const std::vector<std::pair<std::string, std::string>> args = {
      {"model_prefix", prefix},
      {"vocab_size", std::to_string(vocab_size)},
      {"model_type", "bpe"},
      {"character_coverage", "1.0"},
      {"byte_fallback", "true"},  // any byte is representable: decode(encode(t)) == t
      {"normalization_rule_name", "identity"},
      {"remove_extra_whitespaces", "false"},
      {"add_dummy_prefix", "false"},
      {"split_digits", "true"},
      {"user_defined_symbols", "\n"},
      {"bos_id", "-1"},
      {"eos_id", "-1"},
      {"input_sentence_size", "2000000"},
      {"shuffle_input_sentence", "true"},
      {"num_threads", std::to_string(threads)},
      {"minloglevel", "3"},  // see spm_shim.cpp
  };
  std::vector<const char*> keys, values;
  for (const auto& [k, v] : args) {
    keys.push_back(k.c_str());
    values.push_back(v.c_str());
  }
  char err[1024] = "";
  if (shim().train(text.data(), text.size(), keys.data(), values.data(), keys.size(), err,
                   sizeof err) != 0)
    throw TokenizerError("training the tokenizer (vocabulary " + std::to_string(vocab_size) +
                         ") failed: " + err);
}

}  // namespace swarmrt::tokens
