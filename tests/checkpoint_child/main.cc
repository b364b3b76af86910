// checkpoint_child: fresh processes for tests that need one.
//   checkpoint_child <checkpoint.h5> <function name>
//     Loads a checkpoint (which registers its saved functions) and prints d/dv of
//     <function>(v * v) at v = 2. Exit 0 and the gradient on stdout ("None" if unconnected), or
//     exit 2 with the error on stderr.
//   checkpoint_child --disk-full <dir> <file size limit in bytes> <rows>
//     Saves <dir>/ckpt.h5 (16 rows of 1024 float32 ones), then, with RLIMIT_FSIZE at the limit
//     (write() fails with EFBIG as on a full disk), saves <rows> rows of twos over it. The second
//     save must throw naming the file, keep the old file readable and leave no temporary file;
//     the process then exits normally, so HDF5's exit-time handling runs (it used to end in
//     SIGSEGV after a failed H5Fclose). Exit 0, or 3-6 with the broken promise on stderr.
#include <signal.h>
#include <sys/resource.h>

#include <cstdio>
#include <cstring>
#include <exception>
#include <filesystem>
#include <string>
#include <vector>

#include "models/checkpoint.h"
#include "models/io/h5_io.h"
#include "tape/tapeflow.h"

namespace {

namespace tf = tapeflow;

void save(const std::string& path, long rows, float v) {
  std::vector<float> values(static_cast<std::size_t>(rows) * 1024, v);
  tf::io::H5Writer w(path, {.chunk_bytes = 64 << 10});
  w.write_dataset("kernel", tf::DType::kFloat32, {rows, 1024}, values.data());
  w.write_attribute("/", "format", std::string("tapeflow-checkpoint"));
  w.commit();
}

int fail(int code, const std::string& what) {
  std::fprintf(stderr, "disk-full: %s\n", what.c_str());
  return code;
}

int disk_full(const std::string& dir, rlim_t limit, long rows) {
  const std::string path = (std::filesystem::path(dir) / "ckpt.h5").string();
  save(path, 16, 1.0f);
  ::signal(SIGXFSZ, SIG_IGN);
  const rlimit r{limit, limit};
  if (::setrlimit(RLIMIT_FSIZE, &r) != 0) return fail(7, "setrlimit failed");
  try {
    save(path, rows, 2.0f);
    return fail(3, "the save did not fail");
  } catch (const std::runtime_error& e) {
    if (std::string(e.what()).find(path) == std::string::npos) return fail(4, std::string("message: ") + e.what());
    std::fprintf(stderr, "disk-full: save failed as expected: %s\n", e.what());
  }
  try {
    tf::io::H5Reader reader(path);
    const tf::io::ArrayData a = reader.read_dataset("kernel");
    float first = 0;
    std::memcpy(&first, a.bytes.data(), sizeof first);
    if (a.shape != std::vector<std::int64_t>{16, 1024} || first != 1.0f) return fail(5, "the old file changed");
  } catch (const std::exception& e) {
    return fail(5, std::string("the old file cannot be read: ") + e.what());
  }
  for (const auto& e : std::filesystem::directory_iterator(dir))
    if (e.path().filename().string().find(".tmp-") != std::string::npos)
      return fail(6, "temporary file left: " + e.path().string());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 5 && std::string(argv[1]) == "--disk-full") {
    try {
      return disk_full(argv[2], static_cast<rlim_t>(std::stoull(argv[3])), std::stol(argv[4]));
    } catch (const std::exception& e) {
      return fail(8, e.what());
    }
  }
  if (argc != 3) {
    std::fprintf(stderr, "usage: %s <checkpoint.h5> <function name> | --disk-full <dir> <limit> <rows>\n", argv[0]);
    return 2;
  }
  try {
    tf::models::Checkpoint checkpoint;
    checkpoint.read(argv[1]);
    tf::Variable v(2.0);
    tf::GradientTape tape;
    tf::Tensor output = tf::call_function(argv[2], {v * v})[0];
    auto g = tape.gradient(output, v);
    if (g) std::printf("gradient %.17g\n", g->item());
    else std::printf("gradient None\n");
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 2;
  }
}
