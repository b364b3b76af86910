#!/usr/bin/env bash
# The main job (scripts/run_main.sh) builds only what it runs: its TARGETS are train_classifier, and
# nothing that target depends on (ninja's transitive inputs) is a test or a benchmark. Issue 14: the
# main job used to compile 75 test programs it never ran. Usage: main_job_targets.sh SOURCE BUILD NINJA
set -euo pipefail
src=$1 build=$2 ninja=$3
targets=$(sed -n 's/^TARGETS=\([^ ]*\) .*/\1/p' "$src/scripts/run_main.sh")
if [ "$targets" != train_classifier ]; then
  echo "scripts/run_main.sh builds TARGETS='$targets', expected train_classifier" >&2
  exit 1
fi
inputs=$("$ninja" -C "$build" -t inputs "$targets")
bad=$(grep -E '(^|/)(tests|bench)/' <<<"$inputs" || true)
if [ -n "$bad" ]; then
  echo "the main job's target $targets depends on test or benchmark files:" >&2
  head -5 <<<"$bad" >&2
  exit 1
fi
echo "$targets: $(wc -l <<<"$inputs") build inputs, none under tests/ or bench/"
