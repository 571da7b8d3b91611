#include "tokens/prepare.hpp"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "tokens/shard.hpp"
#include "tokens/tokenizer.hpp"

namespace swarmrt::tokens {
namespace fs = std::filesystem;
namespace {

// The inputs' text, in the order given.
std::string read_inputs(const std::vector<std::string>& inputs) {
  if (inputs.empty()) throw TokenizerError("no --input given");
  std::string text;
  for (const auto& in : inputs) text += read_text(in);
  return text;
}

void write_text_file(const fs::path& path, const std::string& body) {
  const fs::path tmp = path.string() + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out << body;
    if (!out.flush()) throw TokenizerError(tmp.string() + ": cannot write");
  }
  fs::rename(tmp, path);
}

}  // namespace

std::string read_text(const std::string& path) {
  auto read_file = [](const fs::path& p) {
    std::ifstream in(p, std::ios::binary);
    if (!in) throw TokenizerError(p.string() + ": cannot open");
    std::ostringstream ss;
    ss << in.rdbuf();
    return ss.str();
  };
  std::error_code ec;
  if (!fs::is_directory(path, ec)) return read_file(path);
  std::vector<fs::path> files;
  for (const auto& e : fs::recursive_directory_iterator(path))
    if (e.is_regular_file()) files.push_back(e.path());
  std::sort(files.begin(), files.end());
  std::string text;
  for (const auto& f : files) text += read_file(f);
  return text;
}

PrepareResult prepare(const PrepareOptions& o) {
  if (o.out.empty()) throw TokenizerError("--out must name a directory");
  std::error_code ec;
  if (fs::exists(o.out, ec) && !(fs::is_directory(o.out, ec) && fs::is_empty(o.out, ec)))
    throw TokenizerError(o.out + ": exists and is not an empty directory; name a new one");
  if (!(o.val_fraction > 0 && o.val_fraction < 1))
    throw TokenizerError("--val-fraction must be in (0, 1)");
  if (o.shard_tokens < 2) throw TokenizerError("--shard-tokens must be at least 2");

  std::string text = read_inputs(o.inputs);
  // The validation tail starts at a line break, so no line is split between the two.
  size_t cut = static_cast<size_t>(static_cast<double>(text.size()) * (1 - o.val_fraction));
  cut = std::min(text.find('\n', cut), text.size());
  if (cut < text.size()) ++cut;
  if (cut == 0 || cut == text.size())
    throw TokenizerError("the input (" + std::to_string(text.size()) +
                         " bytes) is too small to hold out a validation part");
  const std::string val = text.substr(cut);
  text.resize(cut);

  // Train (or copy) the tokenizer into a scratch directory beside `out`, so a failure leaves
  // no half-prepared `out` behind.
  const fs::path out(o.out);
  const fs::path scratch = out.string() + ".preparing";
  fs::remove_all(scratch, ec);
  fs::create_directories(scratch);
  try {
    const fs::path model = scratch / kTokenizerFile;
    if (!o.tokenizer.empty()) {
      load_sentencepiece(o.tokenizer);  // refuses a file that is no tokenizer
      fs::copy_file(o.tokenizer, model);
    } else {
      train_sentencepiece(text, o.vocab_size, model.string(), o.threads);
    }
    auto tok = load_sentencepiece(model.string());
    const int width = width_for_vocab(tok->size());

    PrepareResult r;
    r.vocab_size = tok->size();
    r.train_bytes = static_cast<int64_t>(text.size());
    r.val_bytes = static_cast<int64_t>(val.size());
    const auto val_ids = tok->encode(val);
    r.val_tokens = static_cast<int64_t>(val_ids.size());
    write_shard((scratch / "val_000000.bin").string(), val_ids, width);
    r.shards.push_back("val_000000.bin");
    const auto train_ids = tok->encode(text);
    text.clear();
    text.shrink_to_fit();
    r.train_tokens = static_cast<int64_t>(train_ids.size());
    for (size_t start = 0, k = 0; start < train_ids.size(); start += size_t(o.shard_tokens), ++k) {
      const size_t end = std::min(train_ids.size(), start + size_t(o.shard_tokens));
      if (end - start < 2) break;  // a shard of one token holds no target
      char name[32];
      std::snprintf(name, sizeof name, "train_%06zu.bin", k);
      write_shard(
          (scratch / name).string(),
          std::vector<uint32_t>(train_ids.begin() + long(start), train_ids.begin() + long(end)),
          width);
      r.shards.push_back(name);
    }
    const nlohmann::json info = {{"vocab_size", r.vocab_size},   {"train_tokens", r.train_tokens},
                                 {"train_bytes", r.train_bytes}, {"val_tokens", r.val_tokens},
                                 {"val_bytes", r.val_bytes},     {"tokenizer", kTokenizerFile}};
    write_text_file(scratch / kDataInfo, info.dump(1) + "\n");

    // Everything is written: move it into `out` in one rename where `out` does not exist.
    if (fs::exists(out, ec)) fs::remove(out);  // empty, checked above
    fs::create_directories(out.parent_path().empty() ? fs::path(".") : out.parent_path());
    fs::rename(scratch, out);
    return r;
  } catch (...) {
    fs::remove_all(scratch, ec);
    throw;
  }
}

std::optional<int64_t> prepared_vocab_size(const std::string& dir) {
  const fs::path path = fs::path(dir) / kDataInfo;
  std::error_code ec;
  if (dir.empty() || !fs::is_regular_file(path, ec)) return std::nullopt;
  std::ifstream in(path, std::ios::binary);
  nlohmann::json info;
  try {
    info = nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& e) {
    throw TokenizerError(path.string() + ": not JSON: " + e.what());
  }
  const auto v = info.find("vocab_size");
  if (v == info.end() || !v->is_number_integer() || v->get<int64_t>() < 1)
    throw TokenizerError(path.string() + ": no vocab_size (a positive integer)");
  return v->get<int64_t>();
}

}  // namespace swarmrt::tokens
