// Dependencies point one way (../shared/DESIGN.md): inside tape/, core <- kernels <- runtime <- ops
// <- autodiff <- function; then tape <- layers, optimizers, data <- models <- distribute <- apps.
// Every `#include "..."` of a project header in the library folders is checked: an arrow that points
// up (or sideways between layers, optimizers and data) fails, naming the file and the line; so does
// an `internal/` header included from another library, and a source file whose own header (its
// first include, same name) sits in another folder (core/variable.h implemented in runtime/).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <string>
#include <vector>

namespace {

namespace fs = std::filesystem;

// Rank of a project path ("tape/ops/math_ops.h" -> its layer); -1 if not a library path.
// Layers at the same rank that must not see each other get distinct `group`s.
struct Layer {
  int rank = -1;
  std::string group;
};

Layer layer_of(const std::string& path) {
  static const std::vector<std::pair<std::string, int>> kTape = {
      {"tape/core/", 0}, {"tape/kernels/", 1}, {"tape/runtime/", 2}, {"tape/ops/", 3},
      {"tape/autodiff/", 4}, {"tape/function/", 5}, {"tape/", 6}};  // tape/tapeflow.h: the umbrella
  for (const auto& [prefix, rank] : kTape)
    if (path.rfind(prefix, 0) == 0) return {rank, "tape"};
  static const std::vector<std::pair<std::string, int>> kTop = {
      {"layers/", 10}, {"optimizers/", 10}, {"data/", 10}, {"models/", 11}, {"distribute/", 12}, {"apps/", 13},
      {"tapeflow.h", 14}};
  for (const auto& [prefix, rank] : kTop)
    if (path.rfind(prefix, 0) == 0) return {rank, prefix};
  return {};
}

// Whether a file in `from` may include a header in `to`.
bool allowed(const Layer& from, const Layer& to) {
  if (to.rank < 0) return true;  // not a library header (tests/, bench/)
  if (to.rank < from.rank) return from.rank != 10 || to.rank < 10;  // layers/optimizers/data see tape only
  return to.rank == from.rank && to.group == from.group;
}

// The internal headers a library offers the others' implementations: the JSON behind
// tapeflow::Config (tape/core/config.h) and the JSON forms of the layer and optimizer
// (de)serializers, which every config reader and writer uses. They are internal so that they are
// never installed: nlohmann-json stays out of the public headers.
const std::set<std::string> kSharedInternals = {"tape/core/internal/config_json.h",
                                                "layers/internal/serialization_json.h",
                                                "optimizers/internal/serialization_json.h"};

// A header under some `internal/` folder is private to its library (the first path component:
// tape/, layers/, models/, ...): tape/runtime/internal/recorder_stack.h is for tape/ only; the
// kSharedInternals are for every library above theirs (the arrows still apply).
bool internal_visible(const std::string& from_path, const std::string& header) {
  if (header.find("/internal/") == std::string::npos) return true;
  if (kSharedInternals.count(header)) return true;
  return header.substr(0, header.find('/')) == from_path.substr(0, from_path.find('/'));
}

// A source file implements the header it includes first when their names match
// (tape/runtime/variable.cc implements ".../variable.h"); the header must then sit in the
// same folder, so that a header's layer is the layer of its implementation.
bool implemented_in_place(const std::string& source_path, const std::string& first_include) {
  const fs::path src(source_path), header(first_include);
  if (src.stem() != header.stem() || !header.has_parent_path()) return true;  // not its own header, or beside it
  // Beside it, or in its folder's internal/ (tape/kernels/conv/igemm.cc and conv/internal/igemm.h).
  return src.parent_path() == header.parent_path() || src.parent_path() / "internal" == header.parent_path();
}

TEST(IncludeLayering, NoArrowPointsUp) {
  const fs::path root(TAPEFLOW_SOURCE_DIR);
  std::size_t files = 0, includes = 0;
  for (const char* dir : {"tape", "layers", "optimizers", "data", "models", "distribute", "apps"}) {
    if (!fs::exists(root / dir)) continue;
    for (const auto& entry : fs::recursive_directory_iterator(root / dir)) {
      const auto ext = entry.path().extension();
      if (ext != ".h" && ext != ".cc") continue;
      const std::string rel = fs::relative(entry.path(), root).generic_string();
      const Layer from = layer_of(rel);
      ASSERT_GE(from.rank, 0) << rel;
      ++files;
      std::ifstream in(entry.path());
      std::string line;
      int number = 0;
      bool first = true;
      while (std::getline(in, line)) {
        ++number;
        if (line.rfind("#include \"", 0) != 0) continue;
        const std::string target = line.substr(10, line.find('"', 10) - 10);
        ++includes;
        EXPECT_TRUE(allowed(from, layer_of(target))) << rel << ":" << number << " includes \"" << target
                                                     << "\", which sits above it";
        EXPECT_TRUE(internal_visible(rel, target))
            << rel << ":" << number << " includes \"" << target << "\", internal to another library";
        if (ext == ".cc" && first) {
          EXPECT_TRUE(implemented_in_place(rel, target))
              << rel << " implements \"" << target << "\" from another folder (a header's layer is its code's layer)";
        }
        first = false;
      }
    }
  }
  EXPECT_GT(files, 100u);
  EXPECT_GT(includes, 300u);
}

// The checker itself: up arrows and sideways arrows fail, down arrows pass.
TEST(IncludeLayering, CheckerCatchesUpAndSidewaysArrows) {
  EXPECT_FALSE(allowed(layer_of("tape/core/random.cc"), layer_of("tape/kernels/parallel.h")));
  EXPECT_FALSE(allowed(layer_of("tape/runtime/op_registry.cc"), layer_of("tape/ops/register_ops.h")));
  EXPECT_FALSE(allowed(layer_of("layers/dense.h"), layer_of("optimizers/optimizer.h")));
  EXPECT_FALSE(allowed(layer_of("tape/ops/math_ops.cc"), layer_of("layers/layer.h")));
  EXPECT_FALSE(allowed(layer_of("models/model.h"), layer_of("apps/common/flags.h")));
  EXPECT_TRUE(allowed(layer_of("tape/autodiff/jacobian.cc"), layer_of("tape/ops/array_ops.h")));
  EXPECT_TRUE(allowed(layer_of("models/model.h"), layer_of("layers/layer.h")));
  EXPECT_TRUE(allowed(layer_of("tape/tapeflow.h"), layer_of("tape/function/function.h")));
}

// The other two rules: internal headers stay in their library, headers sit with their code.
TEST(IncludeLayering, CheckerCatchesForeignInternalsAndMisplacedImplementations) {
  EXPECT_FALSE(internal_visible("layers/batch_normalization.cc", "tape/runtime/internal/recorder_stack.h"));
  EXPECT_TRUE(internal_visible("tape/autodiff/gradient_tape.cc", "tape/runtime/internal/recorder_stack.h"));
  EXPECT_TRUE(internal_visible("layers/dense.cc", "tape/runtime/recorder.h"));
  EXPECT_TRUE(internal_visible("models/config.cc", "tape/core/internal/config_json.h"));
  EXPECT_FALSE(internal_visible("models/config.cc", "layers/internal/normalized_axes.h"));
  EXPECT_FALSE(implemented_in_place("tape/runtime/variable.cc", "tape/core/variable.h"));
  EXPECT_TRUE(implemented_in_place("tape/runtime/variable.cc", "tape/runtime/variable.h"));
  EXPECT_TRUE(implemented_in_place("tape/ops/register_ops.cc", "tape/ops/register_ops.h"));
  EXPECT_TRUE(implemented_in_place("tape/kernels/conv.cc", "tape/kernels/conv.h"));
  EXPECT_TRUE(implemented_in_place("tape/kernels/conv/igemm.cc", "tape/kernels/conv/internal/igemm.h"));
  EXPECT_FALSE(implemented_in_place("tape/kernels/igemm.cc", "tape/kernels/conv/internal/igemm.h"));
  EXPECT_TRUE(implemented_in_place("tape/ops/math_ops.cc", "tape/ops/math_ops.h"));
  EXPECT_TRUE(implemented_in_place("apps/gan/png_grid.cc", "png_grid.h"));
}

}  // namespace
