#!/usr/bin/env bash
# Same-run comparison of tapeflow's benchmarks with the peers in ../shared/peers (PyTorch 1.13 Python
# and libtorch 1.13 from Debian, OpenBLAS 0.3.21 OpenMP build). Workloads alternate peer / ours so
# that both see the same machine state; report the ratios, not single times.
#
#   bash scripts/compare_peers.sh                 # W1-W5 at 2 threads
#   WL="w8 w9" bash scripts/compare_peers.sh      # the convnet step and the DCGAN step
#   THREADS="1 2" WL="w2 w3" bash scripts/compare_peers.sh
#   WL="w11 w12" bash scripts/compare_peers.sh    # the LSTM step and the ViT step (issue 36)
#
# With PT2 / TFPY set (eval "$(bash ../shared/peers/pypi/setup.sh)"), w11 and w12 also run the PyPI
# peers in the same run: PyTorch 2.15 (MKL + oneDNN) on the same py/ scripts, and TensorFlow 2.21 /
# Keras 3 (pypi/keras_apps.py: eager, tf.function, XLA steps). Targets count against the fastest.
#
# Needs: python3-torch libtorch-dev (apt), a Release build in ./build with benches
# (bash scripts/build.sh). The peers' folder is copied to $PEERS_WORK (default /tmp/tapeflow-peers)
# and set up there (OpenBLAS fetched with apt-get download, libtorch_bench built), so
# ../shared/peers is never written. OPENBLAS_CORETYPE defaults to Haswell (AVX2); use SkylakeX
# only on a machine with AVX-512 (grep avx512f /proc/cpuinfo).
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
SRC="${PEERS_DIR:-$ROOT/../shared/peers}"
WORK="${PEERS_WORK:-/tmp/tapeflow-peers}"
CORE="${OPENBLAS_CORETYPE:-Haswell}"
B="$ROOT/build/bench"
[[ -x "$B/bench_jacobian_bench" ]] || { echo "no benches in $B: run bash scripts/build.sh first" >&2; exit 1; }
if [[ ! -x "$WORK/build/libtorch_bench" ]]; then
  rm -rf "$WORK" && cp -r "$SRC" "$WORK"
  (cd "$WORK" && SECTIONS="setup" ./run_all.sh >/dev/null)
  cmake -S "$WORK/cpp" -B "$WORK/build" -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
  ninja -C "$WORK/build" libtorch_bench >/dev/null
fi
OBL="$WORK/_deps/openblas-openmp/usr/lib/x86_64-linux-gnu/openblas-openmp"
peer() {  # peer CMD...: one line per result, "impl variant: median unit"
  env BENCH_BLAS="openblas-$CORE" LD_LIBRARY_PATH="$OBL" OPENBLAS_CORETYPE="$CORE" \
    MALLOC_MMAP_THRESHOLD_=33554432 MALLOC_TRIM_THRESHOLD_=67108864 BENCH_RESULTS=/dev/null "$@" 2>&1 |
    grep '^RESULT' | sed -E 's/^RESULT //' |
    python3 -c 'import json, sys
for line in sys.stdin:
    r = json.loads(line)
    print("  %s %s: %.4g %s" % (r["impl"], r["variant"], r["median"], r["unit"]))'
}
pypi() {  # pypi w11|w12 THREADS SCRIPT: PyTorch 2.15 and TensorFlow 2.21, when PT2 / TFPY are set
  if [[ -n "${PT2:-}" ]]; then
    (cd "$SRC/py" && BENCH_BLAS=mkl BENCH_RESULTS=/dev/null "$PT2" "$3" "$2" step 2>&1 | grep '^RESULT' |
      sed -E 's/^RESULT //' | python3 -c 'import json, sys
for line in sys.stdin:
    r = json.loads(line)
    print("  pytorch2 %s: %.4g %s" % (r["variant"], r["median"], r["unit"]))')
  fi
  if [[ -n "${TFPY:-}" ]]; then
    (cd "$SRC/pypi" && KERAS_BACKEND=tensorflow "$TFPY" keras_apps.py step "$1" "$2" 2>/dev/null | sed 's/^/  tf2.21 /')
  fi
}
ours() { "$B/$1" --benchmark_filter="$2" 2>&1 | grep -E '^(BM_|W[0-9]+)' | sed 's/^/  tapeflow /'; }
cd "$WORK"
# Both sides use AVX-512 where the CPU has it (oneDNN; tapeflow's float tiles, simd512.h).
ISA=$(grep -qw avx512f /proc/cpuinfo && echo "AVX-512 CPU" || echo "AVX2 CPU")
for t in ${THREADS:-2}; do
  for w in ${WL:-w1 w2 w3 w4 w5}; do
    echo "== $w, $t thread(s), $(date +%T), load $(cut -d' ' -f1 /proc/loadavg), $ISA"
    case $w in
      w1) peer /usr/bin/python3 py/w1_mlp.py "$t" step; peer build/libtorch_bench "$t" w1step
          ours bench_train_bench "W1TrainStep/$t/" ;;
      w2) peer /usr/bin/python3 py/w2_hessian.py "$t"; peer build/libtorch_bench "$t" w2
          ours bench_jacobian_bench "W2(Small|Large)HessianNewton/$t\$" ;;
      w3) peer /usr/bin/python3 py/w3_batch_jacobian.py "$t"
          ours bench_jacobian_bench "W3BatchJacobian/$t\$" ;;
      w4) peer /usr/bin/python3 py/w4_gan.py "$t"; peer build/libtorch_bench "$t" w4
          ours bench_apps_bench "W4GanStep/$t/" ;;
      w5) peer /usr/bin/python3 py/w5_gradreg.py "$t"; peer build/libtorch_bench "$t" w5
          ours bench_apps_bench "W5InputGradRegStep/$t/" ;;
      w8) peer /usr/bin/python3 py/w8_cnn.py "$t" step; peer /usr/bin/python3 py/w8_cnn.py "$t" step_cl
          peer build/libtorch_bench "$t" w8step
          ours bench_conv_bench "W8Step/$t/" ;;
      w9) peer /usr/bin/python3 py/w9_dcgan.py "$t" tfsame; peer build/libtorch_bench "$t" w9
          ours bench_conv_bench "W9Step/$t/" ;;
      w11) peer /usr/bin/python3 py/w11_lstm.py "$t" step; peer build/libtorch_bench "$t" w11
           pypi w11 "$t" w11_lstm.py
           ours bench_train_bench "W11Step/$t/" ;;
      w12) peer /usr/bin/python3 py/w12_vit.py "$t" step; peer build/libtorch_bench "$t" w12
           pypi w12 "$t" w12_vit.py
           ours bench_train_bench "W12Step/$t/" ;;
      *) echo "unknown workload $w" >&2; exit 2 ;;
    esac
  done
done
