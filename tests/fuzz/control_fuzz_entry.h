// Fuzz entry for everything that parses bytes from a control-plane peer. Used by the libFuzzer
// target and by the always-built bounded smoke driver; built into those, not into the library.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace hmc::control {

// Feeds data through:
//  1. decode_frame, repeatedly, as one stream (each complete frame's payload goes to the decoder
//     registered for its type; each frame re-encodes to the same bytes);
//  2. FrameParser, in pieces of data-dependent sizes (it must yield the same frames and the
//     same final state as step 1);
//  3. the decoder picked by data[0], with data[1..] as its payload (reaches every decoder
//     without a valid frame header).
// Every decoder is checked for encode(decode(x)) being stable. A failed check prints what went
// wrong and aborts.
void fuzz_one(const uint8_t* data, size_t len);

// Valid inputs (framed message streams and decoder-selector inputs) to seed a corpus.
struct FuzzSeed {
  std::string name;
  std::vector<uint8_t> bytes;
};
std::vector<FuzzSeed> fuzz_seeds();

}  // namespace hmc::control
