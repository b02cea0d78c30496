"""Every socket a systems driver listens on (TCP LISTEN, bound unconnected UDP) is on the loopback
interface: each driver's quick run is watched through /proc while it runs.

A connected UDP socket (state 01) is not counted: it receives only from its one peer, and glibc's
``getaddrinfo`` opens one to each candidate address of a host name (``connect`` then
``getsockname``, no datagram sent) to order them (RFC 3484), which gives it the host's own
address for a moment whenever a process resolves its host name."""

import ipaddress
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.skipif(not Path("/proc/net/tcp").exists(), reason="needs Linux /proc")

QUICK_RUNS = {
    "trace": ["--fault", "compute_straggler", "--world-size", "2", "--steps", "24"],
    # restart mode: torchrun, its workers and the coordinator's store (live mode uses the same
    # coordinator store and gloo devices on 127.0.0.1, and takes twice as long)
    "elastic": ["--schedule", "2,3", "--steps", "6", "--mode", "restart"],
    "rdma": ["--transport", "udp", "--hosts", "2", "--elems", "2000", "--iterations", "4"],
    "netsched": ["--leaves", "4", "--trace-jobs", "15", "--loads", "0.7", "--schedulers", "ecmp"],
    "ann": ["--dataset", "synthetic", "--family", "hnsw", "--n-base", "2000", "--n-queries",
            "50"],
}


def _address(hex_addr: str):
    host, port = hex_addr.split(":")
    raw = bytes.fromhex(host)
    if len(raw) == 4:
        return ipaddress.IPv4Address(raw[::-1]), int(port, 16)
    words = b"".join(raw[i:i + 4][::-1] for i in range(0, 16, 4))
    address = ipaddress.IPv6Address(words)
    return address.ipv4_mapped or address, int(port, 16)


def _bound_sockets() -> dict[str, tuple]:
    """inode -> (protocol, address, port) of listening TCP and unconnected bound UDP sockets."""
    found = {}
    for proto in ("tcp", "tcp6", "udp", "udp6"):
        path = Path("/proc/net") / proto
        if not path.exists():
            continue
        for line in path.read_text().splitlines()[1:]:
            fields = line.split()
            if fields[3] != ("0A" if proto.startswith("tcp") else "07"):  # LISTEN; UDP unconnected
                continue
            address, port = _address(fields[1])
            found[fields[9]] = (proto, address, port)
    return found


def _tree(root: int) -> set[int]:
    parents = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            parents[int(stat.parent.name)] = int(stat.read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
    tree, grew = {root}, True
    while grew:
        new = {pid for pid, ppid in parents.items() if ppid in tree} - tree
        tree |= new
        grew = bool(new)
    return tree


def _socket_inodes(pids) -> set[str]:
    inodes = set()
    for pid in pids:
        try:
            for fd in Path(f"/proc/{pid}/fd").iterdir():
                target = os.readlink(fd)
                if target.startswith("socket:["):
                    inodes.add(target[8:-1])
        except OSError:
            continue
    return inodes


def _watch(proc, seen: list, stop: threading.Event) -> None:
    while not stop.is_set() and proc.poll() is None:
        inodes = _socket_inodes(_tree(proc.pid))
        seen.extend(v for k, v in _bound_sockets().items() if k in inodes)
        time.sleep(0.05)


@pytest.mark.parametrize("driver", sorted(QUICK_RUNS))
def test_driver_listens_on_loopback_only(driver, tmp_path):
    env = {**os.environ, "MPLBACKEND": "Agg", "OMP_NUM_THREADS": "1"}
    proc = subprocess.Popen([sys.executable, "-m", "causalkit", "systems", driver,
                             *QUICK_RUNS[driver]], cwd=tmp_path, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    seen, stop = [], threading.Event()
    watcher = threading.Thread(target=_watch, args=(proc, seen, stop), daemon=True)
    watcher.start()
    try:
        out, err = proc.communicate(timeout=300)
    finally:
        stop.set()
        watcher.join()
    assert proc.returncode == 0, err[-2000:]
    outside = {(p, str(a), port) for p, a, port in seen if not a.is_loopback}
    assert not outside, f"{driver} listened outside loopback: {sorted(outside)}"
    if driver in ("trace", "elastic"):  # real torch.distributed processes: sockets were seen
        assert seen, "the watcher saw no listening socket at all"
