#!/usr/bin/env bash
# Runs an interoperability test script with the test venv's Python: run_py.sh VENV SCRIPT [ARGS...].
# A missing venv is a failure (exit 1) with the fix named, never a skip.
set -euo pipefail
venv=$1 script=$2
shift 2
if [ ! -x "$venv/bin/python" ]; then
  echo "interop: no test venv at $venv: run scripts/setup.sh (it makes the venv from tests/interop/requirements.txt)" >&2
  exit 1
fi
[ -z "${TAPEFLOW_WORK_DIR:-}" ] || { rm -rf "$TAPEFLOW_WORK_DIR"; mkdir -p "$TAPEFLOW_WORK_DIR"; }
exec "$venv/bin/python" "$script" "$@"
