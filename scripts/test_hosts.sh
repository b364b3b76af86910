#!/usr/bin/env bash
# Test hosts on one machine: N "hosts" as Linux network namespaces, each with its own hostname (a UTS
# namespace, set when something runs on it), its own address in a private test subnet and a veth
# link to a bridge; Open MPI sees N machines that talk TCP to each other (issue 33).
#
#   scripts/test_hosts.sh check          exit 0 if namespaces can be made here, else 77 with the reason
#   scripts/test_hosts.sh up N           makes hosts ${TAPEFLOW_TEST_HOSTS}1..N (replacing any of that
#                                        prefix); exit 77 with the reason where they cannot be made.
#                                        Their TCP congestion control is $TAPEFLOW_TEST_HOSTS_CC
#                                        (default cubic, Linux's default: see set_congestion_control)
#   scripts/test_hosts.sh down           removes them all: kills their processes, deletes every namespace,
#                                        link and hosts file of the prefix (idempotent; never fails)
#   scripts/test_hosts.sh status         the hosts, their addresses and links
#   scripts/test_hosts.sh exec HOST CMD...        runs CMD on HOST (its network and hostname)
#   scripts/test_hosts.sh mpirun ARGS...          mpirun from host 1 over TCP between the hosts: adds
#       --mca plm_rsh_agent scripts/test_hosts_agent.sh (starts Open MPI's daemons on the other hosts),
#       --bind-to none (unless ARGS has --bind-to: the hosts share the cores, see cmd_mpirun),
#       --mca btl tcp,self (TCP only: no shared-memory transport, also between ranks of one host) and
#       the interface flags, and TCP keepalives on Open MPI's control connections (2 s idle, 3 probes
#       1 s apart) so that mpirun learns of a host that went away in ~5 s; pass --host H1:SLOTS,H2:SLOTS
#       and the program as usual (exit 77 if the hosts are not up). TAPEFLOW_TEST_HOSTS_BTL replaces
#       the btl list (e.g. vader,tcp,self: shared memory between the ranks of one host)
#   scripts/test_hosts.sh kill HOST      SIGKILL to every process on HOST (the machine crashes)
#   scripts/test_hosts.sh link HOST down|up       the switch side of HOST's link (the cable is pulled)
#   scripts/test_hosts.sh shape HOST "delay 5ms rate 1gbit"
#       netem on the switch side of HOST's link where the kernel has it; else (no sch_netem, as here)
#       HOST behind two TAP devices and a relay that delays every frame (test_hosts_link.py) plus a
#       token bucket (tbf) for the rate: see cmd_shape. "none" removes it.
#   scripts/test_hosts.sh rtt HOST_A HOST_B       UDP round trips A -> B: "rtt min/median/max = ... ms"
#
# Layout: a switch namespace ${P}sw holds a bridge br0 and one veth end p<i> per host; the other end is
# eth0 in host ${P}<i>, address 10.233.0.<i>/24 (no route anywhere else, no address outside these
# namespaces: nothing leaves them). /etc/netns/<host>/hosts names every host for `ip netns exec`.
# Deleting a namespace deletes its links, so `down` leaves nothing behind.
# Needs: Linux with network and UTS namespaces, root (CAP_SYS_ADMIN, CAP_NET_ADMIN), iproute2
# (ip, tc), util-linux (unshare), bridge and veth support in the kernel, Open MPI for `mpirun`.
# The prefix is $TAPEFLOW_TEST_HOSTS (default tfh; letters and digits, at most 8 characters), so two
# builds running their tests at once use different hosts.
set -uo pipefail

P="${TAPEFLOW_TEST_HOSTS:-tfh}"
HERE="$(cd "$(dirname "$0")" && pwd)"
SUBNET=10.233.0
TCP_RETRIES=5

die() { echo "test_hosts: $*" >&2; exit 1; }
[[ "$P" =~ ^[a-z][a-z0-9]{0,7}$ ]] || die "TAPEFLOW_TEST_HOSTS must be 1-8 lower-case letters or digits starting with a letter, got '$P'"

host_index() {  # HOST -> i (exits unless HOST is one of ours)
  [[ "$1" =~ ^${P}([0-9]+)$ ]] || die "'$1' is not a test host (names are ${P}1, ${P}2, ...)"
  ip netns list 2>/dev/null | awk '{print $1}' | grep -qx "$1" || die "host '$1' does not exist (run: $0 up N)"
  echo "${BASH_REMATCH[1]}"
}

# Hosts, the switch, and a probe of `check` left behind if it was killed midway.
our_namespaces() { ip netns list 2>/dev/null | awk '{print $1}' | grep -E "^${P}([0-9]+|sw|probe[0-9]*)$"; }

cmd_check() {
  [ "$(id -u)" -eq 0 ] || { echo "test_hosts: needs root (network namespaces), running as uid $(id -u)" >&2; exit 77; }
  command -v ip >/dev/null || { echo "test_hosts: iproute2's ip is not installed" >&2; exit 77; }
  command -v unshare >/dev/null || { echo "test_hosts: util-linux's unshare is not installed" >&2; exit 77; }
  local probe="${P}probe$$"
  probe="${probe:0:15}"
  if ! ip netns add "$probe" 2>/tmp/test_hosts_check.$$; then
    echo "test_hosts: cannot make a network namespace here: $(cat /tmp/test_hosts_check.$$)" >&2
    rm -f /tmp/test_hosts_check.$$
    exit 77
  fi
  local ok=1 why=""
  ip -n "$probe" link add br0 type bridge 2>/dev/null || { ok=0; why="no bridge support in the kernel"; }
  ip -n "$probe" link add p1 type veth peer name eth0 2>/dev/null || { ok=0; why="no veth support in the kernel"; }
  ip netns exec "$probe" unshare --uts true 2>/dev/null || { ok=0; why="cannot make a UTS namespace"; }
  ip netns del "$probe" 2>/dev/null
  rm -f /tmp/test_hosts_check.$$
  [ "$ok" -eq 1 ] || { echo "test_hosts: $why" >&2; exit 77; }
  exit 0
}

cmd_down() {
  local ns pid
  for ns in $(our_namespaces); do
    # Processes outlive their namespace's deletion: kill them first (twice: a dying mpirun may fork).
    for _ in 1 2; do
      for pid in $(ip netns pids "$ns" 2>/dev/null); do kill -KILL "$pid" 2>/dev/null; done
    done
  done
  for ns in $(our_namespaces); do
    ip netns del "$ns" 2>/dev/null || true
    rm -rf "/etc/netns/$ns"
  done
  rm -f /run/${P}-relay-*.pid /run/${P}-relay-*.log
  # Hosts files of namespaces that are already gone.
  for ns in /etc/netns/*; do
    [ -e "$ns" ] || continue
    [[ "$(basename "$ns")" =~ ^${P}([0-9]+|sw)$ ]] && rm -rf "$ns"
  done
  return 0
}

# A new namespace inherits the machine's default TCP congestion control. Some images default to BBR,
# whose pacing spreads each burst over its bandwidth estimate: a 1 MiB gradient exchange between two
# test hosts took 0.74 ms with BBR and 0.42 ms with CUBIC (W1's comm-only, median of 8 alternating
# runs, issue 33's notes). The test hosts model a cluster's Linux hosts, whose default is CUBIC.
# TAPEFLOW_TEST_HOSTS_CC picks another (e.g. bbr to see it). A namespace may only pick an algorithm in
# the machine-wide net.ipv4.tcp_allowed_congestion_control; `up` adds CC to that list when it is
# loaded but not listed (the list only says what unprivileged programs may choose; no connection
# changes) and says so.
CC="${TAPEFLOW_TEST_HOSTS_CC:-cubic}"
check_congestion_control() {  # before anything is made
  local available
  available="$(cat /proc/sys/net/ipv4/tcp_available_congestion_control 2>/dev/null)"
  [[ "$CC" =~ ^[a-z0-9_]+$ ]] && grep -qw -- "$CC" <<<"$available" ||
    die "TAPEFLOW_TEST_HOSTS_CC: TCP congestion control '$CC' is not available here (available: ${available:-none})"
}
set_congestion_control() {
  local h="$1" cc="$CC" allowed
  if ! ip netns exec "$h" sh -c "echo $cc > /proc/sys/net/ipv4/tcp_congestion_control" 2>/dev/null; then
    allowed="$(cat /proc/sys/net/ipv4/tcp_allowed_congestion_control)"
    echo "test_hosts: adding $cc to net.ipv4.tcp_allowed_congestion_control ($allowed) so that the hosts can use it" >&2
    echo "$allowed $cc" > /proc/sys/net/ipv4/tcp_allowed_congestion_control
    ip netns exec "$h" sh -c "echo $cc > /proc/sys/net/ipv4/tcp_congestion_control"
  fi
}

cmd_up() {
  local n="${1:-}"
  [[ "$n" =~ ^[0-9]+$ ]] && [ "$n" -ge 1 ] && [ "$n" -le 32 ] || die "up N: N must be 1..32, got '${n}'"
  ( cmd_check ) || exit 77  # the reason is on stderr
  check_congestion_control
  cmd_down
  local sw="${P}sw" i h
  trap 'cmd_down; die "up failed; removed what was made"' ERR
  set -e
  ip netns add "$sw"
  ip -n "$sw" link set lo up
  ip -n "$sw" link add br0 type bridge
  ip -n "$sw" link set br0 up
  local hosts="127.0.0.1 localhost"$'\n'
  for i in $(seq 1 "$n"); do hosts+="$SUBNET.$i ${P}$i"$'\n'; done
  for i in $(seq 1 "$n"); do
    h="${P}$i"
    ip netns add "$h"
    mkdir -p "/etc/netns/$h"
    printf '%s' "$hosts" > "/etc/netns/$h/hosts"
    ip -n "$h" link set lo up
    ip -n "$sw" link add "p$i" type veth peer name eth0 netns "$h"
    ip -n "$sw" link set "p$i" master br0
    ip -n "$sw" link set "p$i" up
    ip -n "$h" addr add "$SUBNET.$i/24" dev eth0
    ip -n "$h" link set eth0 up
    # A dead peer ends a TCP connection with unacknowledged data after ~6 s (15 retries, ~15 min, by
    # default): mpirun then learns that a host is gone instead of waiting for it forever.
    ip netns exec "$h" sh -c "echo $TCP_RETRIES > /proc/sys/net/ipv4/tcp_retries2"
    set_congestion_control "$h"
  done
  set +e
  trap - ERR
  for i in $(seq 1 "$n"); do wait_forwarding "$i"; done
  echo "test_hosts: up $n hosts: $(seq -s ' ' -f "${P}%g" 1 "$n") on $SUBNET.0/24, TCP congestion control $(ip netns exec "${P}1" cat /proc/sys/net/ipv4/tcp_congestion_control)"
}

cmd_status() {
  local ns
  for ns in $(our_namespaces); do
    echo "== $ns"
    ip -n "$ns" -brief addr 2>/dev/null
    ip netns exec "$ns" tc qdisc show 2>/dev/null | grep -v "noqueue" || true
  done
}

cmd_exec() {
  local h="${1:-}"
  host_index "$h" >/dev/null
  shift
  [ $# -ge 1 ] || die "exec HOST CMD...: no command"
  exec ip netns exec "$h" unshare --uts -- sh -c 'hostname "$0" && exec "$@"' "$h" "$@"
}

cmd_mpirun() {
  ip netns list 2>/dev/null | awk '{print $1}' | grep -qx "${P}1" ||
    { echo "test_hosts: the test hosts are not up (no ${P}1): run $0 up N first" >&2; exit 77; }
  local root=() bind=(--bind-to none) a
  [ "$(id -u)" -eq 0 ] && root=(--allow-run-as-root)
  # The test hosts share this machine's cores, but each one's daemon thinks it owns them all: with
  # Open MPI's default binding (--bind-to core for 2 ranks or fewer) the first rank of every host
  # is pinned to core 0, so two hosts x 1 rank share one core and every step takes twice as long
  # (W1 at 512/rank: 8.1 ms local vs 3.9 on one host, issue 33). Unbound unless the caller says.
  for a in "$@"; do [[ "$a" == --bind-to || "$a" == --bind-to=* ]] && bind=(); done
  cmd_exec "${P}1" mpirun "${root[@]}" "${bind[@]}" \
    --mca plm_rsh_agent "$HERE/test_hosts_agent.sh" \
    --mca btl "${TAPEFLOW_TEST_HOSTS_BTL:-tcp,self}" --mca btl_tcp_if_include eth0 --mca oob_tcp_if_include eth0 \
    --mca oob_tcp_keepalive_time 2 --mca oob_tcp_keepalive_intvl 1 --mca oob_tcp_keepalive_probes 3 \
    "$@"
}

cmd_kill() {
  local h="${1:-}" pid
  host_index "$h" >/dev/null
  for pid in $(ip netns pids "$h"); do kill -KILL "$pid" 2>/dev/null; done
  echo "test_hosts: killed every process on $h"
}

# Waits (up to 5 s) until host i's bridge port forwards and its eth0 has carrier: no STP, so at once,
# but links come up asynchronously, and a job started before then cannot connect to the host.
wait_forwarding() {
  local i=$1
  for _ in $(seq 1 50); do
    bridge -n "${P}sw" link show dev "p$i" 2>/dev/null | grep -q "state forwarding" &&
      ip -n "${P}$i" link show eth0 2>/dev/null | grep -q "LOWER_UP" && return 0
    sleep 0.1
  done
}

cmd_link() {
  local h="${1:-}" state="${2:-}" i
  i="$(host_index "$h")" || exit 1
  [[ "$state" == up || "$state" == down ]] || die "link HOST up|down, got '$state'"
  ip -n "${P}sw" link set "p$i" "$state"
  [ "$state" = down ] || wait_forwarding "$i"
  echo "test_hosts: $h's link is $state"
}

# Shaping HOST's link. netem where the kernel has it (delay and rate on the switch side). Without
# sch_netem (CONFIG_NET_SCH_NETEM unset, as on this CI machine: tc offers only tbf/htb/ingress, so
# `tc qdisc ... netem delay 5ms` fails), the delay is made by test_hosts_link.py: the host's veth
# eth0 is set aside (renamed veth0, down), a TAP device named eth0 with the host's address takes its
# place, a second TAP t<i> joins the switch's bridge, and the relay (in the switch's namespace)
# copies every frame between the two after the delay, each way (RTT = 2 x delay); the rate is a
# token bucket (tbf) on both taps. Needs /dev/net/tun (the tun module) and python3. `shape HOST none`
# puts the veth back.
relay_pidfile() { echo "/run/${P}-relay-$1.pid"; }

unshape() {  # i
  local i=$1 h="${P}$1" pid
  ip netns exec "${P}sw" tc qdisc del dev "p$i" root 2>/dev/null
  pid="$(cat "$(relay_pidfile "$i")" 2>/dev/null)"
  if [ -n "$pid" ]; then kill -KILL "$pid" 2>/dev/null; fi
  rm -f "$(relay_pidfile "$i")"
  if ip -n "$h" link show veth0 >/dev/null 2>&1; then
    ip -n "$h" link del eth0 2>/dev/null
    ip -n "$h" link set veth0 name eth0
    ip -n "$h" addr add "$SUBNET.$i/24" dev eth0 2>/dev/null
    ip -n "$h" link set eth0 up
  fi
  ip -n "${P}sw" link del "t$i" 2>/dev/null
  wait_forwarding "$i"
}

cmd_shape() {
  local h="${1:-}" spec="${2:-}" i rate delay mac
  i="$(host_index "$h")" || exit 1
  [ -n "$spec" ] || die "shape HOST SPEC: no SPEC (e.g. \"delay 5ms rate 1gbit\", or none)"
  unshape "$i"
  if [ "$spec" = none ]; then
    echo "test_hosts: $h's link is not shaped"
    return 0
  fi
  # shellcheck disable=SC2086
  if ip netns exec "${P}sw" tc qdisc replace dev "p$i" root netem $spec 2>/dev/null; then
    echo "test_hosts: $h's link: netem $spec"
    return 0
  fi
  rate="$(sed -n 's/.*rate \([^ ]*\).*/\1/p' <<<"$spec")"
  delay="$(sed -n 's/.*delay \([0-9.]*\)ms.*/\1/p' <<<"$spec")"
  [ -n "$delay" ] || die "shape: without netem only 'delay Nms [rate R]' is emulated, got '$spec'"
  [ -c /dev/net/tun ] || die "shape: the kernel has no netem and no /dev/net/tun for the relay"
  command -v python3 >/dev/null || die "shape: the kernel has no netem and the relay needs python3"
  local sw="${P}sw" ready
  ready="$(relay_pidfile "$i")"
  ip -n "$sw" tuntap add "t$i" mode tap || die "shape: ip tuntap add t$i failed"
  ip -n "$sw" link set "t$i" master br0
  ip -n "$sw" link set "t$i" up
  # The tap keeps the veth's MAC address: the other hosts' ARP caches stay right.
  mac="$(ip -n "$h" -o link show eth0 | sed -n 's|.*link/ether \([0-9a-f:]*\).*|\1|p')"
  ip -n "$h" link set eth0 down
  ip -n "$h" link set eth0 name veth0
  ip -n "$h" tuntap add eth0 mode tap || { unshape "$i"; die "shape: ip tuntap add eth0 on $h failed"; }
  ip -n "$h" link set eth0 address "$mac"
  ip -n "$h" addr add "$SUBNET.$i/24" dev eth0
  ip -n "$h" link set eth0 up
  ip netns exec "$sw" setsid python3 "$HERE/test_hosts_link.py" relay --host-netns "/run/netns/$h" \
    --host-tap eth0 --switch-tap "t$i" --delay-ms "$delay" --ready "$ready" \
    </dev/null >"/run/${P}-relay-$i.log" 2>&1 &
  for _ in $(seq 1 50); do [ -s "$ready" ] && break; sleep 0.1; done
  [ -s "$ready" ] || { cat "/run/${P}-relay-$i.log" >&2; unshape "$i"; die "shape: the relay did not start"; }
  if [ -n "$rate" ]; then
    ip netns exec "$sw" tc qdisc replace dev "t$i" root tbf rate "$rate" burst 256kb latency 100ms &&
      ip netns exec "$h" tc qdisc replace dev eth0 root tbf rate "$rate" burst 256kb latency 100ms ||
      { unshape "$i"; die "shape: tc qdisc tbf rate $rate failed on $h's link"; }
  fi
  for _ in $(seq 1 50); do
    bridge -n "$sw" link show dev "t$i" 2>/dev/null | grep -q "state forwarding" &&
      ip -n "$h" link show eth0 2>/dev/null | grep -q "LOWER_UP" && break
    sleep 0.1
  done
  echo "test_hosts: $h's link: no netem in this kernel; ${delay} ms each way through a TAP relay" \
    "(test_hosts_link.py)${rate:+, tbf rate $rate}"
}

# Round trips from host A to host B (UDP echo, 10 tries): "rtt min/median/max = a/b/c ms".
cmd_rtt() {
  local a="${1:-}" b="${2:-}" ib pid rc
  host_index "$a" >/dev/null
  ib="$(host_index "$b")" || exit 1
  ip netns exec "$b" python3 "$HERE/test_hosts_link.py" echo </dev/null >/dev/null 2>&1 &
  pid=$!
  sleep 0.3
  ip netns exec "$a" python3 "$HERE/test_hosts_link.py" ping --to "$SUBNET.$ib" --count 10
  rc=$?
  kill "$pid" 2>/dev/null
  wait "$pid" 2>/dev/null
  return $rc
}

sub="${1:-}"
shift || true
case "$sub" in
  check) cmd_check ;;
  up) cmd_up "$@" ;;
  down) cmd_down ;;
  status) cmd_status ;;
  exec) cmd_exec "$@" ;;
  mpirun) cmd_mpirun "$@" ;;
  kill) cmd_kill "$@" ;;
  link) cmd_link "$@" ;;
  shape) cmd_shape "$@" ;;
  rtt) cmd_rtt "$@" ;;
  *) die "usage: $0 check | up N | down | status | exec HOST CMD... | mpirun ARGS... | kill HOST | link HOST up|down | shape HOST SPEC | rtt HOST_A HOST_B" ;;
esac
