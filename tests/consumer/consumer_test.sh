#!/usr/bin/env bash
# CTest `consumer_project`: tapeflow used as users do. Installs this build tree with
# `cmake --install` into a fresh prefix, checks the installed layout, then configures, builds and
# runs the project shown in README.md ("Using tapeflow from your own project": the files
# app/CMakeLists.txt and app/main.cc are extracted from the README, so the README is what is built).
# The project is C++ only and does not set the C++ standard: tapeflow's targets must carry both.
# Then the package as a library's: libtapeflow_* names, LICENSE, apps in bin/, find_package(tapeflow)
# without MPI (COMPONENTS distribute brings it) and without nlohmann-json (only the opt-in bridge
# <tapeflow/json.h>, COMPONENTS json, needs it: a custom layer builds with nlohmann-json poisoned),
# and the same main.cc built through pkg-config.
# Usage: consumer_test.sh SOURCE_DIR BUILD_DIR WORK_DIR [CMAKE] [CXX_COMPILER] [COMPILER_LAUNCHER]
set -euo pipefail
src=$1 build=$2 work=$3 cmake=${4:-cmake} cxx=${5:-c++} launcher=${6:-}
fail() { echo "consumer_project: $*" >&2; exit 1; }

rm -rf "$work"
mkdir -p "$work/app"

# 1. The README's files, verbatim: a line **`app/<file>`** names the fenced block that follows.
awk -v dir="$work" '
  /^\*\*`app\/[^`]+`\*\*$/ { name = $0; gsub(/^\*\*`|`\*\*$/, "", name); next }
  name != "" && /^```/ && !inside { inside = 1; next }
  inside && /^```$/ { inside = 0; name = ""; next }
  inside { print > (dir "/" name) }
' "$src/README.md"
for f in CMakeLists.txt main.cc; do
  [ -s "$work/app/$f" ] || fail "README.md has no **\`app/$f\`** block (section: Using tapeflow from your own project)"
done
grep -q 'LANGUAGES CXX)' "$work/app/CMakeLists.txt" || fail "the README project must be C++ only (LANGUAGES CXX)"
if grep -q 'CMAKE_CXX_STANDARD' "$work/app/CMakeLists.txt"; then
  fail "the README project must not set CMAKE_CXX_STANDARD (tapeflow's targets carry cxx_std_20)"
fi

# 2. Install the build tree.
"$cmake" --install "$build" --prefix "$work/prefix" > "$work/install.log" || { cat "$work/install.log"; fail "cmake --install failed"; }

# 3. The installed headers: all under include/tapeflow/, project includes prefixed with tapeflow/,
#    no <hdf5.h>, internal/ headers only when an installed public header includes them.
inc="$work/prefix/include"
[ -f "$inc/tapeflow/tapeflow.h" ] || fail "include/tapeflow/tapeflow.h is not installed"
extra=$(ls -A "$inc" | grep -vx tapeflow || true)
[ -z "$extra" ] || fail "include/ holds more than tapeflow/ (would collide with other packages): $extra"
if grep -rnE '#[[:space:]]*include[[:space:]]*<(hdf5|H5)' "$inc"; then fail "an installed header includes HDF5"; fi
if grep -rnE '#[[:space:]]*include[[:space:]]*"(tape|layers|optimizers|data|models|distribute)/' "$inc"; then
  fail "an installed header includes a project header without the tapeflow/ prefix"
fi
while IFS= read -r h; do
  rel=${h#"$inc/"}
  grep -rqF --include='*.h' "#include \"$rel\"" "$inc" || fail "$rel is installed but no installed header includes it"
done < <(find "$inc" -path '*/internal/*' -name '*.h')

# 4. Configure (C++ only), build and run the README's project.
args=(-S "$work/app" -B "$work/app/build" -DCMAKE_PREFIX_PATH="$work/prefix" -DCMAKE_BUILD_TYPE=Release
      -DCMAKE_CXX_COMPILER="$cxx")
[ -n "$launcher" ] && args+=(-DCMAKE_CXX_COMPILER_LAUNCHER="$launcher")
"$cmake" "${args[@]}" > "$work/configure.log" 2>&1 || { cat "$work/configure.log"; fail "configuring the README project failed"; }
"$cmake" --build "$work/app/build" -j 2 > "$work/build.log" 2>&1 || { cat "$work/build.log"; fail "building the README project failed"; }
"$work/app/build/fit_line" || fail "the README project's program failed (exit $?)"

# 5. A package that installs like a library: prefixed library names, the LICENSE, the apps in bin/.
lib=$(dirname "$(find "$work/prefix" -name 'libtapeflow_tape.*' | head -1)")
[ -n "$lib" ] && [ "$lib" != . ] || fail "lib/libtapeflow_tape.* is not installed (libraries are named tapeflow_<folder>)"
for bare in tape layers optimizers data models distribute; do
  if ls "$lib/lib$bare."* > /dev/null 2>&1; then fail "lib/lib$bare.* is installed: names must start with tapeflow_"; fi
done
[ -s "$work/prefix/share/doc/tapeflow/LICENSE" ] || fail "share/doc/tapeflow/LICENSE is not installed"
grep -q "Apache License" "$work/prefix/share/doc/tapeflow/LICENSE" || fail "LICENSE is not the Apache License"
if [ -x "$build/apps/train_classifier" ]; then
  [ -x "$work/prefix/bin/train_classifier" ] || fail "bin/train_classifier is not installed"
  "$work/prefix/bin/train_classifier" --help > /dev/null || fail "the installed train_classifier --help failed"
fi

config="$work/prefix/lib/cmake/tapeflow/tapeflowConfig.cmake"
[ -f "$config" ] || config=$(find "$work/prefix" -name tapeflowConfig.cmake | head -1)

# 6. The core needs no MPI: find_package(tapeflow) works with MPI hidden; COMPONENTS distribute
#    brings tapeflow::distribute (and needs MPI) when this build has it.
"$cmake" -S "$work/app" -B "$work/app/build-nompi" -DCMAKE_PREFIX_PATH="$work/prefix" -DCMAKE_CXX_COMPILER="$cxx" \
  -DCMAKE_DISABLE_FIND_PACKAGE_MPI=ON > "$work/nompi.log" 2>&1 ||
  { cat "$work/nompi.log"; fail "find_package(tapeflow) needs MPI (it should only with COMPONENTS distribute)"; }
# 6b. No installed header but the opt-in bridge tapeflow/json.h includes nlohmann-json, and
#     find_package(tapeflow) does not need it: the README project and a custom layer
#     (examples/custom_layer.cc: get_config / from_config through tapeflow::Config) configure with
#     nlohmann-json hidden from CMake and build with it poisoned for the compiler (an
#     <nlohmann/json.hpp> that is an #error, first on the include path), and run.
if grep -rnE '#[[:space:]]*include[[:space:]]*<nlohmann/' "$inc" | grep -v "^$inc/tapeflow/json.h:"; then
  fail "an installed header other than tapeflow/json.h includes nlohmann-json"
fi
mkdir -p "$work/poison/nlohmann" "$work/custom"
for h in json.hpp json_fwd.hpp; do
  printf '#error "a tapeflow header included nlohmann/%s"\n' "$h" > "$work/poison/nlohmann/$h"
done
cp "$src/examples/custom_layer.cc" "$work/custom/custom_layer.cc"
cat > "$work/custom/CMakeLists.txt" <<'CMAKE'
cmake_minimum_required(VERSION 3.25)
project(custom_layer LANGUAGES CXX)
find_package(tapeflow REQUIRED)
add_executable(custom_layer custom_layer.cc)
target_link_libraries(custom_layer PRIVATE tapeflow::tapeflow)
CMAKE
for proj in app custom; do
  pargs=(-S "$work/$proj" -B "$work/$proj/build-nojson" -DCMAKE_PREFIX_PATH="$work/prefix" -DCMAKE_BUILD_TYPE=Release
         -DCMAKE_CXX_COMPILER="$cxx" -DCMAKE_DISABLE_FIND_PACKAGE_nlohmann_json=ON "-DCMAKE_CXX_FLAGS=-I$work/poison")
  [ -n "$launcher" ] && pargs+=(-DCMAKE_CXX_COMPILER_LAUNCHER="$launcher")
  "$cmake" "${pargs[@]}" > "$work/$proj-nojson.log" 2>&1 ||
    { cat "$work/$proj-nojson.log"; fail "find_package(tapeflow) needs nlohmann-json ($proj project)"; }
  "$cmake" --build "$work/$proj/build-nojson" -j 2 >> "$work/$proj-nojson.log" 2>&1 ||
    { cat "$work/$proj-nojson.log"; fail "the $proj project does not build without nlohmann-json"; }
done
(cd "$work/custom" && ./build-nojson/custom_layer) || fail "the custom layer example built without nlohmann-json failed (exit $?)"
# 6c. COMPONENTS json: tapeflow::json brings nlohmann-json and <tapeflow/json.h> converts both ways;
#     without nlohmann-json, COMPONENTS json fails naming it.
mkdir -p "$work/jsonc"
cat > "$work/jsonc/CMakeLists.txt" <<'CMAKE'
cmake_minimum_required(VERSION 3.25)
project(jsonc LANGUAGES CXX)
find_package(tapeflow REQUIRED COMPONENTS json)
add_executable(bridge bridge.cc)
target_link_libraries(bridge PRIVATE tapeflow::json)
CMAKE
cat > "$work/jsonc/bridge.cc" <<'CC'
#include <tapeflow/json.h>
#include <tapeflow/tapeflow.h>
namespace tf = tapeflow;
int main() {
  tf::layers::Dense dense({.units = 3, .activation = "relu"});
  nlohmann::json j = tf::to_json(dense.get_config());
  if (j["units"] != 3 || j["activation"] != "relu") return 1;
  j["units"] = 5;
  const auto again = tf::layers::Dense::from_config(tf::from_json(j));
  return tf::to_json(again->get_config())["units"] == 5 ? 0 : 2;
}
CC
jargs=(-S "$work/jsonc" -DCMAKE_PREFIX_PATH="$work/prefix" -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_COMPILER="$cxx")
[ -n "$launcher" ] && jargs+=(-DCMAKE_CXX_COMPILER_LAUNCHER="$launcher")
"$cmake" "${jargs[@]}" -B "$work/jsonc/build" > "$work/jsonc.log" 2>&1 ||
  { cat "$work/jsonc.log"; fail "find_package(tapeflow COMPONENTS json) failed"; }
"$cmake" --build "$work/jsonc/build" -j 2 >> "$work/jsonc.log" 2>&1 || { cat "$work/jsonc.log"; fail "building against tapeflow::json failed"; }
"$work/jsonc/build/bridge" || fail "the tapeflow/json.h round trip failed (exit $?)"
if "$cmake" "${jargs[@]}" -B "$work/jsonc/build-nojson" -DCMAKE_DISABLE_FIND_PACKAGE_nlohmann_json=ON > "$work/jsonc-nojson.log" 2>&1; then
  fail "find_package(tapeflow COMPONENTS json) succeeded without nlohmann-json"
fi
grep -q "nlohmann_json" "$work/jsonc-nojson.log" || { cat "$work/jsonc-nojson.log"; fail "without nlohmann-json the COMPONENTS json error does not name it"; }
mkdir -p "$work/dist"
cat > "$work/dist/CMakeLists.txt" <<'CMAKE'
cmake_minimum_required(VERSION 3.25)
project(dist LANGUAGES CXX)
find_package(tapeflow REQUIRED COMPONENTS distribute)
if(NOT TARGET tapeflow::distribute)
  message(FATAL_ERROR "COMPONENTS distribute did not define tapeflow::distribute")
endif()
CMAKE
dist_args=(-S "$work/dist" -DCMAKE_PREFIX_PATH="$work/prefix" -DCMAKE_CXX_COMPILER="$cxx")
if [ -f "$(dirname "$config")/tapeflow_distributeTargets.cmake" ]; then
  "$cmake" "${dist_args[@]}" -B "$work/dist/build" > "$work/dist.log" 2>&1 ||
    { cat "$work/dist.log"; fail "find_package(tapeflow COMPONENTS distribute) failed"; }
  if "$cmake" "${dist_args[@]}" -B "$work/dist/build-nompi" -DCMAKE_DISABLE_FIND_PACKAGE_MPI=ON > "$work/dist-nompi.log" 2>&1; then
    fail "find_package(tapeflow COMPONENTS distribute) succeeded without MPI"
  fi
elif "$cmake" "${dist_args[@]}" -B "$work/dist/build" > "$work/dist.log" 2>&1; then
  fail "this build has no distribute, yet find_package(tapeflow COMPONENTS distribute) succeeded"
fi

# 7. pkg-config: the README's main.cc built with nothing but `pkg-config --cflags --libs tapeflow`.
pc_dir=$(dirname "$(find "$work/prefix" -name tapeflow.pc | head -1)")
[ -f "$pc_dir/tapeflow.pc" ] || fail "lib/pkgconfig/tapeflow.pc is not installed"
pc_flags=$(PKG_CONFIG_PATH="$pc_dir" pkg-config --cflags --libs tapeflow) || fail "pkg-config cannot read tapeflow.pc"
case "$pc_flags" in *"$work/prefix"*) ;; *) fail "tapeflow.pc does not point into the install prefix: $pc_flags" ;; esac
# shellcheck disable=SC2086
$launcher "$cxx" -std=c++20 -O1 "$work/app/main.cc" -o "$work/fit_line_pc" $pc_flags > "$work/pc.log" 2>&1 ||
  { cat "$work/pc.log"; fail "building the README project with pkg-config failed"; }
# (pkg-config gives no run path: a shared install's libraries are found as users find them, by
# LD_LIBRARY_PATH; a static one needs nothing.)
LD_LIBRARY_PATH="$lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" "$work/fit_line_pc" > /dev/null || fail "the pkg-config build of the README project failed (exit $?)"

# 8. Error path: an install whose HDF5 library has gone says so, naming tapeflow and the file.
cp -r "$work/prefix" "$work/broken"
config="$work/broken/lib/cmake/tapeflow/tapeflowConfig.cmake"
[ -f "$config" ] || config=$(find "$work/broken" -name tapeflowConfig.cmake | head -1)
sed -i 's|set(_tapeflow_hdf5_libraries "[^;"]*|set(_tapeflow_hdf5_libraries "/nonexistent/libhdf5.so|' "$config"
if "$cmake" -S "$work/app" -B "$work/broken-build" -DCMAKE_PREFIX_PATH="$work/broken" > "$work/broken.log" 2>&1; then
  fail "configuring against an install without its HDF5 library succeeded"
fi
tr -s ' \n' '  ' < "$work/broken.log" |
  grep -q "tapeflow was built against the HDF5 C library /nonexistent/libhdf5.so, which is missing; install it" ||
  { cat "$work/broken.log"; fail "the missing-HDF5 message does not name tapeflow and the library"; }
echo "consumer_project: ok"
