#!/usr/bin/env bash
# Data-parallel scaling in one run (issue 33): bench_distribute_w1 at 2 ranks x 1 thread for
#   W1 (the MLP) at 512 and at 128 examples per rank, and W8 (the CNN) at 128 per rank,
# on one host (the shared-memory window, and the network sum, interleaved by the benchmark) and on
# 2 test hosts of scripts/test_hosts.sh (TCP over veth; needs root), each configuration REPEATS
# times, alternating one host / two hosts (A/B/A/B) so that a change of machine load hits both.
# The benchmark itself interleaves, block by block, the step with communication and the same step
# with the reduction skipped ("local": the machine's own bound) and reports "% of local" medians.
# Load averages are printed before and after every run: on a shared machine, rerun when it is quiet.
#   scripts/scaling.sh [BUILD_DIR]       (REPEATS=2 STEPS=20 by default; output on stdout)
# Then, on 2 test hosts, the transport's floor (bench_transport_floor: plain MPI, W1's sizes), and W1
# at 512 per rank and W8 over the slow link (5 ms each way, 1 Gbit).
# The test hosts use the prefix $TAPEFLOW_TEST_HOSTS (default tfsc), made here and removed at the end,
# and TCP congestion control $TAPEFLOW_TEST_HOSTS_CC (default cubic; see scripts/test_hosts.sh).
set -uo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
BUILD="$(cd "${1:-$HERE/../build}" && pwd)"
BENCH="$BUILD/bench/distribute/bench_distribute_w1"
REPEATS="${REPEATS:-2}"
STEPS="${STEPS:-20}"
export TAPEFLOW_TEST_HOSTS="${TAPEFLOW_TEST_HOSTS:-tfsc}"
[ -x "$BENCH" ] || { echo "scaling: no $BENCH (build the target bench_distribute_w1)" >&2; exit 1; }

two_hosts=0
if up="$(bash "$HERE/test_hosts.sh" up 2)"; then
  two_hosts=1
  trap 'bash "$HERE/test_hosts.sh" down' EXIT
  echo "scaling: $up"  # says the hosts' TCP congestion control (TAPEFLOW_TEST_HOSTS_CC)
else
  echo "scaling: no test hosts here (see scripts/test_hosts.sh check): one host only" >&2
fi
P="$TAPEFLOW_TEST_HOSTS"
configs=("--model mlp --batch 512" "--model mlp --batch 128" "--model cnn --batch 128")
echo "scaling: $(date -u +%FT%TZ), $(nproc) cores, REPEATS=$REPEATS STEPS=$STEPS"
for rep in $(seq 1 "$REPEATS"); do
  for cfg in "${configs[@]}"; do
    # shellcheck disable=SC2086
    {
      echo "== repeat $rep, one host (shm + network sum): $cfg --per-rank; load $(cut -d' ' -f1-3 /proc/loadavg)"
      mpirun --allow-run-as-root --oversubscribe --bind-to none -np 2 "$BENCH" $cfg --per-rank --threads 1 --steps "$STEPS"
      if [ "$two_hosts" = 1 ]; then
        echo "== repeat $rep, 2 test hosts (TCP over veth): $cfg --per-rank; load $(cut -d' ' -f1-3 /proc/loadavg)"
        bash "$HERE/test_hosts.sh" mpirun --host "${P}1:1,${P}2:1" -np 2 "$BENCH" $cfg --per-rank --threads 1 \
          --steps "$STEPS"
      fi
    }
  done
done
FLOOR="$BUILD/bench/distribute/bench_transport_floor"
if [ "$two_hosts" = 1 ] && [ -x "$FLOOR" ]; then
  # The transport's own floor: plain MPI moving the same bytes between the 2 test hosts, to set
  # against the comm-only figures above (what the reducer adds to the wire's cost).
  echo "== transport floor, 2 test hosts (TCP over veth); load $(cut -d' ' -f1-3 /proc/loadavg)"
  bash "$HERE/test_hosts.sh" mpirun --host "${P}1:1,${P}2:1" -np 2 "$FLOOR" --bytes 1081384 540692 401408 139284
fi
if [ "$two_hosts" = 1 ]; then
  # The slow link of issue 33 (host 2 behind a 5 ms-each-way relay and a 1 Gbit token bucket; see
  # test_hosts.sh shape): the step time when the reduction crosses it.
  bash "$HERE/test_hosts.sh" shape "${P}2" "delay 5ms rate 1gbit"
  bash "$HERE/test_hosts.sh" rtt "${P}1" "${P}2"
  for cfg in "--model mlp --batch 512" "--model cnn --batch 128"; do
    echo "== slow link (5 ms each way, 1 Gbit), 2 test hosts: $cfg --per-rank; load $(cut -d' ' -f1-3 /proc/loadavg)"
    # shellcheck disable=SC2086
    bash "$HERE/test_hosts.sh" mpirun --host "${P}1:1,${P}2:1" -np 2 "$BENCH" $cfg --per-rank --threads 1 --steps "$STEPS"
  done
  bash "$HERE/test_hosts.sh" shape "${P}2" none
fi
echo "scaling: done, load $(cut -d' ' -f1-3 /proc/loadavg)"
