#!/usr/bin/env bash
# CTest `readme_blocks`: every fenced ```cpp block of README.md compiles against the installed
# package, as a user copying it would build it. Installs this build tree into a fresh prefix, writes
# each block to readme_L<line>.cc (the README line of its opening fence), builds them all in one
# C++-only CMake project with find_package(tapeflow), and runs each (in a scratch working directory,
# so the files a block saves land there).
# A block without main() is the body of one: its #include lines go first, after
#   #include <tapeflow/tapeflow.h>  and  namespace tf = tapeflow;
# Blocks named by a **`app/<file>`** line are the consumer project's files (CTest consumer_project).
# Usage: readme_blocks_test.sh SOURCE_DIR BUILD_DIR WORK_DIR [CMAKE] [CXX_COMPILER] [COMPILER_LAUNCHER]
set -euo pipefail
src=$1 build=$2 work=$3 cmake=${4:-cmake} cxx=${5:-c++} launcher=${6:-}
readme=${README:-$src/README.md}
fail() { echo "readme_blocks: $*" >&2; exit 1; }

rm -rf "$work"
mkdir -p "$work/project" "$work/run"

# 1. The blocks, each into its own source file.
awk -v dir="$work/project" '
  /^\*\*`app\/[^`]+`\*\*$/ { named = 1; next }
  !inside && /^```cpp[[:space:]]*$/ { inside = 1; start = NR; body = ""; next }
  !inside && /^```/ { other = !other; named = 0; next }
  inside && /^```[[:space:]]*$/ {
    inside = 0
    if (!named) {
      f = dir "/readme_L" start ".cc"
      if (body ~ /int main\(/) { printf "%s", body > f }
      else {
        n = split(body, lines, "\n"); includes = ""; rest = ""
        for (i = 1; i < n; ++i) {
          if (lines[i] ~ /^#include/) includes = includes lines[i] "\n"; else rest = rest "  " lines[i] "\n"
        }
        printf "#include <tapeflow/tapeflow.h>\n%snamespace tf = tapeflow;\nint main() {\n%s}\n", includes, rest > f
      }
      close(f)
    }
    named = 0; next
  }
  inside { body = body $0 "\n"; next }
' "$readme"
mapfile -t blocks < <(cd "$work/project" && ls readme_L*.cc 2>/dev/null | sort -V)
((${#blocks[@]})) || fail "no \`\`\`cpp block found in $readme"
echo "readme_blocks: ${#blocks[@]} blocks: ${blocks[*]}"

{
  echo 'cmake_minimum_required(VERSION 3.25)'
  echo 'project(readme_blocks LANGUAGES CXX)'
  echo 'find_package(tapeflow REQUIRED)'
  for b in "${blocks[@]}"; do
    echo "add_executable(${b%.cc} $b)"
    echo "target_link_libraries(${b%.cc} PRIVATE tapeflow::tapeflow)"
  done
} > "$work/project/CMakeLists.txt"

# 2. Install, configure, build (each block's errors name its README line through the file name).
"$cmake" --install "$build" --prefix "$work/prefix" > "$work/install.log" || { cat "$work/install.log"; fail "cmake --install failed"; }
args=(-S "$work/project" -B "$work/project/build" -DCMAKE_PREFIX_PATH="$work/prefix" -DCMAKE_BUILD_TYPE=Release
      -DCMAKE_CXX_COMPILER="$cxx")
[ -n "$launcher" ] && args+=(-DCMAKE_CXX_COMPILER_LAUNCHER="$launcher")
"$cmake" "${args[@]}" > "$work/configure.log" 2>&1 || { cat "$work/configure.log"; fail "configuring failed"; }
failed=()
for b in "${blocks[@]}"; do
  if ! "$cmake" --build "$work/project/build" --target "${b%.cc}" > "$work/${b%.cc}.build.log" 2>&1; then
    grep -E 'error|Error' "$work/${b%.cc}.build.log" | head -20 >&2
    failed+=("README.md line ${b//[^0-9]/} (does not compile; source $work/project/$b)")
  fi
done

# 3. Run every block that compiled.
for b in "${blocks[@]}"; do
  [ -x "$work/project/build/${b%.cc}" ] || continue
  if ! (cd "$work/run" && timeout 600 "$work/project/build/${b%.cc}" > "$work/${b%.cc}.run.log" 2>&1); then
    tail -20 "$work/${b%.cc}.run.log" >&2
    failed+=("README.md line ${b//[^0-9]/} (its program failed)")
  fi
done
((${#failed[@]} == 0)) || { printf 'readme_blocks: %s\n' "${failed[@]}" >&2; exit 1; }
echo "readme_blocks: ok (${#blocks[@]} blocks compiled)"
