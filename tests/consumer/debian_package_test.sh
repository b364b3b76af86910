#!/usr/bin/env bash
# CTest `debian_package`: `cpack -G DEB` makes a Debian package of this build, whose files (unpacked
# with dpkg-deb into a scratch root, as `apt install ./tapeflow_*.deb` would lay them under /usr)
# let the README's project (app/CMakeLists.txt, app/main.cc) build with nothing but
# find_package(tapeflow), and run.
# Usage: debian_package_test.sh SOURCE_DIR BUILD_DIR WORK_DIR [CPACK] [CMAKE] [CXX_COMPILER] [COMPILER_LAUNCHER]
set -euo pipefail
src=$1 build=$2 work=$3 cpack=${4:-cpack} cmake=${5:-cmake} cxx=${6:-c++} launcher=${7:-}
fail() { echo "debian_package: $*" >&2; exit 1; }
rm -rf "$work"
mkdir -p "$work/app" "$work/root"

(cd "$work" && "$cpack" -G DEB --config "$build/CPackConfig.cmake" -B "$work/pkg") > "$work/cpack.log" 2>&1 ||
  { tail -30 "$work/cpack.log"; fail "cpack -G DEB failed"; }
deb=$(ls "$work"/pkg/tapeflow_*.deb 2>/dev/null | head -1)
[ -n "$deb" ] || fail "cpack made no tapeflow_*.deb (log: $work/cpack.log)"
dpkg-deb --field "$deb" Package Version Depends | tee "$work/fields.txt"
grep -q '^Depends: .*libhdf5-dev' "$work/fields.txt" || fail "the package does not depend on libhdf5-dev"
# What the package's tapeflowConfig.cmake finds (find_dependency) and its static libraries link must
# come with it; nlohmann-json must not be required (only COMPONENTS json needs it: <tapeflow/json.h>).
for dep in libtbb-dev libspdlog-dev zlib1g-dev libprotobuf-dev libonnx-dev libzip-dev; do
  grep -q "^Depends: .*$dep" "$work/fields.txt" || fail "the package does not depend on $dep"
done
if grep -q '^Depends: .*nlohmann' "$work/fields.txt"; then fail "the package depends on nlohmann-json (only COMPONENTS json needs it)"; fi
dpkg-deb -x "$deb" "$work/root"
for f in usr/include/tapeflow/tapeflow.h usr/share/doc/tapeflow/LICENSE; do
  [ -f "$work/root/$f" ] || fail "the package lacks /$f"
done
find "$work/root/usr" -name tapeflowConfig.cmake | grep -q . || fail "the package lacks tapeflowConfig.cmake"

awk -v dir="$work" '
  /^\*\*`app\/[^`]+`\*\*$/ { name = $0; gsub(/^\*\*`|`\*\*$/, "", name); next }
  name != "" && /^```/ && !inside { inside = 1; next }
  inside && /^```$/ { inside = 0; name = ""; next }
  inside { print > (dir "/" name) }
' "$src/README.md"
[ -s "$work/app/main.cc" ] || fail "README.md has no **\`app/main.cc\`** block"
args=(-S "$work/app" -B "$work/app/build" -DCMAKE_PREFIX_PATH="$work/root/usr" -DCMAKE_BUILD_TYPE=Release
      -DCMAKE_CXX_COMPILER="$cxx")
[ -n "$launcher" ] && args+=(-DCMAKE_CXX_COMPILER_LAUNCHER="$launcher")
"$cmake" "${args[@]}" > "$work/configure.log" 2>&1 || { cat "$work/configure.log"; fail "configuring against the package failed"; }
"$cmake" --build "$work/app/build" -j 2 > "$work/build.log" 2>&1 || { cat "$work/build.log"; fail "building against the package failed"; }
"$work/app/build/fit_line" || fail "the README project built against the package failed (exit $?)"
echo "debian_package: ok ($(basename "$deb"), $(du -h "$deb" | cut -f1))"
