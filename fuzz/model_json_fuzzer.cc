// model_from_json on arbitrary text (Keras's model.to_json(); also what .h5 and TF.js files hold).
#include <cstddef>
#include <cstdint>
#include <exception>
#include <string>

#include "models/config.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  try {
    tapeflow::models::model_from_json(std::string(reinterpret_cast<const char*>(data), size));
  } catch (const std::exception&) {  // a clear error is the expected outcome; crashes and hangs are not
  }
  return 0;
}
