// Text to token ids and back. Byte data needs no model (each byte is its id); token data uses
// the SentencePiece BPE model that `swarmrt data prepare` trained (SentencePiece does the work:
// no tokenizer is written here).
#pragma once

#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

namespace swarmrt::tokens {

struct TokenizerError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;
  virtual std::vector<uint32_t> encode(const std::string& text) const = 0;
  // Ids the tokenizer has no piece for are dropped (a model's vocabulary may be padded above
  // the tokenizer's size).
  virtual std::string decode(const std::vector<uint32_t>& ids) const = 0;
  // How many ids it has pieces for: 256 for bytes.
  virtual int64_t size() const = 0;
};

std::unique_ptr<Tokenizer> byte_tokenizer();
// Loads a SentencePiece model file (tokenizer.model); throws TokenizerError naming the file.
std::unique_ptr<Tokenizer> load_sentencepiece(const std::string& model_file);

// Trains a BPE model of `vocab_size` pieces on the lines of `text` and writes it to
// `model_file` (and its .vocab beside it). The model reproduces its input exactly: no
// normalization, whitespace kept, bytes outside its pieces fall back to byte pieces, and the
// newline is a piece of its own (SentencePiece trains on lines; swarmrt keeps the line breaks).
void train_sentencepiece(const std::string& text, int64_t vocab_size, const std::string& model_file,
                         int threads);

}  // namespace swarmrt::tokens
