// load_model on an arbitrary .keras file (Keras 3: a zip of metadata.json, config.json and
// model.weights.h5), compiled as predict and fit's users load it.
#include <cstddef>
#include <cstdint>
#include <exception>

#include "fuzz/fuzz_util.h"
#include "models/saving_model.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string path = tapeflow::fuzz::write_file("model.keras", data, size);
  try {
    tapeflow::models::load_model(path);
  } catch (const std::exception&) {
  }
  return 0;
}
