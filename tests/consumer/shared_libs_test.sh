#!/usr/bin/env bash
# CTest `shared_libraries` (issue 32): the BUILD_SHARED_LIBS=ON variant of this build tree, as users
# who pick it get it. Configures the same sources with the same compiler and flags as BUILD_DIR
# (read from its CMakeCache.txt) plus -DBUILD_SHARED_LIBS=ON, libraries and apps only, into
# BUILD_DIR-shared (a sibling at the same depth, so the compiler cache's relative paths match and
# the objects of BUILD_DIR are reused: everything is position-independent in both variants), then:
#  - every library is a libtapeflow_<name>.so and no libtapeflow_*.a is built;
#  - train_classifier depends on those .so files and runs from the build tree (a short training)
#    and, installed, from bin/ (RUNPATH $ORIGIN/../lib);
#  - consumer_test.sh (the README's project through find_package and pkg-config, the component
#    split, the missing-HDF5 message) passes against the shared install, and the README program
#    it builds links libtapeflow_*.so.
# Usage: shared_libs_test.sh SOURCE_DIR BUILD_DIR WORK_DIR [CMAKE] [CXX_COMPILER] [COMPILER_LAUNCHER]
set -euo pipefail
src=$1 build=$2 work=$3 cmake=${4:-cmake} cxx=${5:-c++} launcher=${6:-}
fail() { echo "shared_libraries: $*" >&2; exit 1; }
build=$(cd "$build" && pwd)
shared="$build-shared"

cache_value() { sed -n "s/^$1:[A-Z]*=//p" "$build/CMakeCache.txt" | head -1; }
args=(-S "$src" -B "$shared" -DBUILD_SHARED_LIBS=ON -DCMAKE_CXX_COMPILER="$cxx"
      -DTAPEFLOW_BUILD_TESTS=OFF -DTAPEFLOW_BUILD_BENCH=OFF -DTAPEFLOW_BUILD_EXAMPLES=OFF -DTAPEFLOW_BUILD_APPS=ON)
for var in CMAKE_BUILD_TYPE TAPEFLOW_WERROR TAPEFLOW_NATIVE TAPEFLOW_SANITIZE TAPEFLOW_WITH_MPI CMAKE_MAKE_PROGRAM; do
  value=$(cache_value "$var")
  [ -n "$value" ] && args+=("-D$var=$value")
done
generator=$(cache_value CMAKE_GENERATOR)
[ -n "$generator" ] && args+=(-G "$generator")
[ -n "$launcher" ] && args+=(-DCMAKE_CXX_COMPILER_LAUNCHER="$launcher")
rm -rf "$shared" "$work"
mkdir -p "$work"
"$cmake" "${args[@]}" > "$work/configure.log" 2>&1 || { cat "$work/configure.log"; fail "configuring with BUILD_SHARED_LIBS=ON failed"; }
"$cmake" --build "$shared" -j 2 > "$work/build.log" 2>&1 || { tail -50 "$work/build.log"; fail "building with BUILD_SHARED_LIBS=ON failed"; }

# The libraries are shared objects with the tapeflow_ names.
# (apps/common's tapeflow_app_common is the apps' own static helper, not part of the package.)
libs=(tape layers optimizers data models)
[ -d "$shared/distribute" ] && libs+=(distribute)  # built where MPI was found
for lib in "${libs[@]}"; do
  [ -n "$(find "$shared" -name "libtapeflow_$lib.so")" ] || fail "libtapeflow_$lib.so was not built"
  [ -z "$(find "$shared" -name "libtapeflow_$lib.a")" ] || fail "libtapeflow_$lib.a was built with BUILD_SHARED_LIBS=ON"
done

# The app links them and runs (a short training on the real data).
app="$shared/apps/train_classifier"
[ -x "$app" ] || fail "apps/train_classifier was not built"
readelf -d "$app" | grep -q 'NEEDED.*libtapeflow_tape\.so' || fail "train_classifier does not link libtapeflow_tape.so"
"$app" --limit 512 --epochs 1 --verbose 0 > "$work/app.log" 2>&1 || { cat "$work/app.log"; fail "train_classifier (shared) failed"; }
grep -q 'accuracy' "$work/app.log" || { cat "$work/app.log"; fail "train_classifier (shared) printed no accuracy"; }

# The installed package, used as a consumer would.
bash "$src/tests/consumer/consumer_test.sh" "$src" "$shared" "$work/consumer" "$cmake" "$cxx" "$launcher" ||
  fail "the consumer test failed against the shared install"
readelf -d "$work/consumer/app/build/fit_line" | grep -q 'NEEDED.*libtapeflow_tape\.so' ||
  fail "the README program built against the shared install does not link libtapeflow_tape.so"
"$work/consumer/prefix/bin/train_classifier" --help > /dev/null ||
  fail "the installed train_classifier does not start (RUNPATH?)"
echo "shared_libraries: ok"
