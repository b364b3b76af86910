// load_model on an arbitrary .h5 file (Keras 2 HDF5: model_config, training_config, model and
// optimizer weights), compiled as predict and fit's users load it.
#include <cstddef>
#include <cstdint>
#include <exception>

#include "fuzz/fuzz_util.h"
#include "models/saving_model.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string path = tapeflow::fuzz::write_file("model.h5", data, size);
  try {
    tapeflow::models::load_model(path);
  } catch (const std::exception&) {
  }
  return 0;
}
