#!/bin/sh
# Open MPI's launch agent for the test hosts of scripts/test_hosts.sh (--mca plm_rsh_agent): called as
# ssh would be, `test_hosts_agent.sh [ssh options] HOST COMMAND...`, it runs COMMAND (Open MPI's orted
# with its arguments, joined by spaces and run by sh as sshd would) on HOST: in HOST's network
# namespace and a UTS namespace whose hostname is HOST. The agent itself stays where mpirun is (as an
# ssh client stays on the launching machine) and waits for the daemon: if the daemon is killed (the
# host "crashes": scripts/test_hosts.sh kill HOST), it exits 0, as ssh to a crashed machine would not
# report a failure either, so mpirun learns of the lost host from its connection to the daemon (and
# names it: "ORTE has lost communication with a remote daemon ... on node HOST") instead of taking the
# launcher's exit for a daemon that failed to start. Other failures keep their exit status.
while [ $# -gt 0 ]; do
  case "$1" in
    -x|-T|-t|-q|-n) shift ;;   # ssh flags Open MPI may pass
    -*) echo "test_hosts_agent: unknown option $1" >&2; exit 255 ;;
    *) break ;;
  esac
done
[ $# -ge 2 ] || { echo "test_hosts_agent: usage: $0 HOST COMMAND..." >&2; exit 255; }
host="$1"
shift
case "$host" in
  *[!a-z0-9]*|"") echo "test_hosts_agent: bad host name '$host'" >&2; exit 255 ;;
esac
ip netns list | awk '{print $1}' | grep -qx "$host" || { echo "test_hosts_agent: no test host '$host'" >&2; exit 255; }
ip netns exec "$host" unshare --uts -- sh -c 'hostname "$0" && eval "$*"' "$host" "$@"
status=$?
[ "$status" -gt 128 ] && exit 0  # killed by a signal
exit "$status"
