#!/usr/bin/env python3
"""Test-host link emulation for scripts/test_hosts.sh (issue 33). Test infrastructure, not tapeflow.

Why this exists: the slow-link test wants "delay 5ms rate 1gbit" on one host's link. The usual tool,
tc's netem qdisc, needs the kernel's sch_netem (CONFIG_NET_SCH_NETEM); kernels without it (this CI
machine's: only tbf/htb/ingress) cannot delay a veth. So test_hosts.sh puts the host behind two TAP
devices instead, one as the host's eth0 and one on the switch's bridge, and this relay copies each
Ethernet frame from one to the other after a fixed delay (both directions: RTT = 2 x delay). The rate
is tc's tbf on both taps (tbf is in every kernel with traffic control). TAP devices have no checksum
or segmentation offloads, so the kernel hands the relay finished, MTU-sized frames.

  test_hosts_link.py relay --host-netns /run/netns/H --host-tap eth0 --switch-tap tN --delay-ms 5 \
      --ready FILE
      run in the switch's namespace; attaches to the two (already made, persistent) taps, the host's
      inside its namespace (setns), writes FILE when both are attached, then relays until killed.
  test_hosts_link.py ping --to ADDR [--count N]
      UDP round trips to ADDR's echo (port 7000): prints "rtt min/median/max = a/b/c ms" (the
      machine here has no ping(8)); exit 1 if no answer arrives.
  test_hosts_link.py echo
      the UDP echo for `ping` (port 7000), until killed.
"""
import argparse
import collections
import ctypes
import fcntl
import os
import select
import socket
import statistics
import struct
import sys
import time

TUNSETIFF = 0x400454CA
IFF_TAP = 0x0002
IFF_NO_PI = 0x1000
CLONE_NEWNET = 0x40000000
PORT = 7000


def open_tap(name):
    fd = os.open("/dev/net/tun", os.O_RDWR | os.O_NONBLOCK)
    fcntl.ioctl(fd, TUNSETIFF, struct.pack("16sH", name.encode(), IFF_TAP | IFF_NO_PI))
    return fd


def setns(path):
    libc = ctypes.CDLL(None, use_errno=True)
    fd = os.open(path, os.O_RDONLY)
    try:
        if libc.setns(fd, CLONE_NEWNET) != 0:
            err = ctypes.get_errno()
            raise OSError(err, f"setns {path}: {os.strerror(err)}")
    finally:
        os.close(fd)


def relay(args):
    delay = args.delay_ms / 1000.0
    own = f"/proc/self/ns/net"
    back = os.open(own, os.O_RDONLY)  # keep our own namespace to come back to
    setns(args.host_netns)
    host = open_tap(args.host_tap)
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.setns(back, CLONE_NEWNET) != 0:
        sys.exit("test_hosts_link: cannot return to the switch's namespace")
    os.close(back)
    switch = open_tap(args.switch_tap)
    with open(args.ready, "w") as f:
        f.write(str(os.getpid()))
    # One FIFO per direction: a constant delay keeps frames in arrival order.
    queues = {host: collections.deque(), switch: collections.deque()}  # frames waiting to leave FROM key
    other = {host: switch, switch: host}
    while True:
        now = time.monotonic()
        due = [q[0][0] for q in queues.values() if q]
        timeout = max(0.0, min(due) - now) if due else None
        readable, _, _ = select.select([host, switch], [], [], timeout)
        now = time.monotonic()
        for fd in readable:
            for _ in range(64):
                try:
                    frame = os.read(fd, 65536)
                except BlockingIOError:
                    break
                queues[fd].append((now + delay, frame))
        now = time.monotonic()
        for src, q in queues.items():
            while q and q[0][0] <= now:
                _, frame = q.popleft()
                try:
                    os.write(other[src], frame)
                except (BlockingIOError, OSError):
                    pass  # a full or down tap drops the frame, as a congested link would


def echo(_args):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind(("0.0.0.0", PORT))
    while True:
        data, addr = s.recvfrom(2048)
        s.sendto(data, addr)


def ping(args):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.settimeout(1.0)
    rtts = []
    for i in range(args.count):
        t0 = time.monotonic()
        s.sendto(struct.pack("!I", i), (args.to, PORT))
        try:
            while True:
                data, _ = s.recvfrom(2048)
                if struct.unpack("!I", data[:4])[0] == i:
                    break
            rtts.append((time.monotonic() - t0) * 1000.0)
        except socket.timeout:
            pass
        time.sleep(0.05)
    if not rtts:
        sys.exit(f"test_hosts_link: no echo from {args.to}:{PORT} in {args.count} tries")
    print(f"rtt min/median/max = {min(rtts):.3f}/{statistics.median(rtts):.3f}/{max(rtts):.3f} ms "
          f"({len(rtts)} of {args.count} answered)")


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("relay")
    r.add_argument("--host-netns", required=True)
    r.add_argument("--host-tap", required=True)
    r.add_argument("--switch-tap", required=True)
    r.add_argument("--delay-ms", type=float, required=True)
    r.add_argument("--ready", required=True)
    sub.add_parser("echo")
    g = sub.add_parser("ping")
    g.add_argument("--to", required=True)
    g.add_argument("--count", type=int, default=10)
    args = p.parse_args()
    {"relay": relay, "echo": echo, "ping": ping}[args.cmd](args)


if __name__ == "__main__":
    main()
