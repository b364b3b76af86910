// load_weights and Checkpoint::read on an arbitrary .h5 file, into fuzz_util.h's small model
// (the first input byte picks which reader; the rest is the file).
#include <cstddef>
#include <cstdint>
#include <exception>

#include "fuzz/fuzz_util.h"
#include "models/checkpoint.h"
#include "models/saving.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 1) return 0;
  static const tapeflow::fuzz::TinyModel tiny = tapeflow::fuzz::tiny_model();
  const std::string path = tapeflow::fuzz::write_file("weights.h5", data + 1, size - 1);
  try {
    if (data[0] & 1) {
      tapeflow::models::Checkpoint ckpt({.model = tiny.model, .optimizer = tiny.optimizer});
      ckpt.read(path);
    } else {
      tapeflow::models::load_weights(*tiny.model, path);
    }
  } catch (const std::exception&) {
  }
  return 0;
}
