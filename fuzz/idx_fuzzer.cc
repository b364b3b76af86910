// read_idx on an arbitrary IDX file (predict's --images / --labels; gzip or raw).
#include <cstddef>
#include <cstdint>
#include <exception>

#include "data/idx.h"
#include "fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string path = tapeflow::fuzz::write_file("data.idx", data, size);
  try {
    tapeflow::data::read_idx(path);
  } catch (const std::exception&) {
  }
  return 0;
}
