// The one file that includes SentencePiece, built as a shared library of its own and loaded
// with dlopen(RTLD_LOCAL | RTLD_DEEPBIND) by sentencepiece_api.cpp. Why: Debian's
// libsentencepiece carries a private copy of protobuf and exports its symbols, and LibTorch
// loads the system libprotobuf; linked into one executable, libprotobuf's start-up code binds
// to SentencePiece's copy and the process dies before main. Loaded locally, each library
// keeps its own protobuf. The interface is C so no C++ type crosses the boundary.
#include <sentencepiece_processor.h>
#include <sentencepiece_trainer.h>

#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

// SentencePiece's own logging level (exported, not in its headers). Its log lines go to
// std::cerr, and in a library bound deep (RTLD_DEEPBIND) std::cerr is libstdc++'s own copy,
// which an executable that copied the object into itself never constructed: writing there
// crashes. So nothing below fatal is logged (errors still come back as a Status); the one
// warning seen in practice is that the newline piece makes tokenizer.vocab's lines ambiguous.
namespace sentencepiece::logging {
void SetMinLogLevel(int);
}

namespace {
// Quiet from the moment the shim is loaded (3 = fatal only), and seeded: the trainer samples
// and shuffles its input sentences, and the same input must give the same tokenizer.
[[maybe_unused]] const bool quiet = (sentencepiece::logging::SetMinLogLevel(3),
                                     sentencepiece::SetRandomGeneratorSeed(20240520), true);

void set_error(char* err, size_t len, const std::string& msg) {
  if (!err || len == 0) return;
  std::strncpy(err, msg.c_str(), len - 1);
  err[len - 1] = '\0';
}
}  // namespace

extern "C" {

void* swarmrt_spm_load(const char* file, char* err, size_t errlen) {
  auto* sp = new sentencepiece::SentencePieceProcessor();
  const auto status = sp->Load(file);
  if (!status.ok()) {
    set_error(err, errlen, status.ToString());
    delete sp;
    return nullptr;
  }
  return sp;
}

void swarmrt_spm_free(void* sp) {
  delete static_cast<sentencepiece::SentencePieceProcessor*>(sp);
}

long swarmrt_spm_size(void* sp) {
  return static_cast<sentencepiece::SentencePieceProcessor*>(sp)->GetPieceSize();
}

int swarmrt_spm_piece_id(void* sp, const char* piece) {
  auto* p = static_cast<sentencepiece::SentencePieceProcessor*>(sp);
  const int id = p->PieceToId(piece);
  return id == p->unk_id() ? -1 : id;
}

// Ids into *ids (malloc'd; the caller frees with swarmrt_spm_release); 0 on success.
int swarmrt_spm_encode(void* sp, const char* text, size_t len, int** ids, size_t* n, char* err,
                       size_t errlen) {
  std::vector<int> out;
  const auto status =
      static_cast<sentencepiece::SentencePieceProcessor*>(sp)->Encode(std::string(text, len), &out);
  if (!status.ok()) {
    set_error(err, errlen, status.ToString());
    return 1;
  }
  *n = out.size();
  *ids = static_cast<int*>(std::malloc(sizeof(int) * (out.empty() ? 1 : out.size())));
  if (!out.empty()) std::memcpy(*ids, out.data(), sizeof(int) * out.size());
  return 0;
}

int swarmrt_spm_decode(void* sp, const int* ids, size_t n, char** text, size_t* len, char* err,
                       size_t errlen) {
  std::string out;
  const auto status = static_cast<sentencepiece::SentencePieceProcessor*>(sp)->Decode(
      std::vector<int>(ids, ids + n), &out);
  if (!status.ok()) {
    set_error(err, errlen, status.ToString());
    return 1;
  }
  *len = out.size();
  *text = static_cast<char*>(std::malloc(out.size() + 1));
  std::memcpy(*text, out.data(), out.size());
  return 0;
}

void swarmrt_spm_release(void* buffer) {
  std::free(buffer);
}

namespace {
// The non-empty lines of a text, for the trainer.
class TextLines final : public sentencepiece::SentenceIterator {
 public:
  TextLines(const char* text, size_t len) : text_(text, len) { Next(); }
  bool done() const override { return done_; }
  void Next() override {
    while (pos_ < text_.size()) {
      const size_t end = std::min(text_.find('\n', pos_), text_.size());
      line_.assign(text_.substr(pos_, end - pos_));
      pos_ = end + 1;
      if (!line_.empty()) return;
    }
    done_ = true;
  }
  const std::string& value() const override { return line_; }
  sentencepiece::util::Status status() const override { return {}; }

 private:
  std::string_view text_;
  size_t pos_ = 0;
  std::string line_;
  bool done_ = false;
};
}  // namespace

// Trains on the lines of `text` with the n options keys[i] = values[i]; 0 on success.
int swarmrt_spm_train(const char* text, size_t len, const char* const* keys,
                      const char* const* values, size_t n, char* err, size_t errlen) {
  std::unordered_map<std::string, std::string> args;
  for (size_t i = 0; i < n; ++i) args[keys[i]] = values[i];
  TextLines lines(text, len);
  const auto status = sentencepiece::SentencePieceTrainer::Train(args, &lines);
  if (!status.ok()) {
    set_error(err, errlen, status.ToString());
    return 1;
  }
  return 0;
}

}  // extern "C"
