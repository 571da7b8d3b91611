// libFuzzer target for every decoder that reads bytes from a peer: the micro-batch and round
// headers, whole wire messages, and the chunk reassembler (the input is cut into chunks at
// its own length fields). A DecodeError is the expected answer to bad input; anything else
// (a crash, a sanitizer report, another exception) is a bug.
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "messages/wire.hpp"

using namespace swarmrt::messages;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    decode_microbatch(data, size);
  } catch (const DecodeError&) {
  }
  try {
    decode_round(data, size);
  } catch (const DecodeError&) {
  }
  try {
    decode_message(data, size);
  } catch (const DecodeError&) {
  }
  Reassembler r(/*max_message=*/1 << 20, /*max_pending=*/4);
  size_t at = 0;
  while (at < size) {
    // Each chunk is as long as the 16-bit value in front of it says (bounded by what is left).
    uint16_t len = 0;
    if (size - at >= 2) std::memcpy(&len, data + at, 2), at += 2;
    const size_t take = std::min<size_t>(len, size - at);
    try {
      r.add(data + at, take);
    } catch (const DecodeError&) {
    }
    at += take;
    if (len == 0) break;
  }
  return 0;
}
