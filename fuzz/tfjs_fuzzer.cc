// load_tfjs on a TensorFlow.js layers-model directory: the input up to its first NUL byte is
// model.json, the rest is group1-shard1of1.bin (the weights its manifest may name).
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <exception>

#include "fuzz/fuzz_util.h"
#include "models/tfjs.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const auto* nul = static_cast<const std::uint8_t*>(std::memchr(data, 0, size));
  const std::size_t json_size = nul ? static_cast<std::size_t>(nul - data) : size;
  const std::string path = tapeflow::fuzz::write_file("model.json", data, json_size);
  const std::size_t rest = nul ? size - json_size - 1 : 0;
  tapeflow::fuzz::write_file("group1-shard1of1.bin", nul ? nul + 1 : data, rest);
  try {
    tapeflow::models::load_tfjs(path);
  } catch (const std::exception&) {
  }
  return 0;
}
