"""NCCL-style workloads on emulated hosts: the Simple P2P protocol and a ring all-reduce.

**Emulated**: ranks are threads, NICs are :mod:`.verbs` software devices. A :class:`Cluster` has
``n`` hosts with two NICs each (rail-optimised: NIC k of every host sits on rail k); host ``i`` is
linked to host ``i+1`` on both rails. With ``shift=True`` every QP is a :class:`~.shift.ShiftQP`
whose backup lives on the other rail; otherwise plain RC QPs on rail 0.

The P2P protocol follows NCCL's *Simple* protocol: the receiver grants a slot with a clear-to-send
(CTS) RDMA WRITE into the sender's FIFO (an idempotent step number); the sender RDMA-WRITEs the data
into the slot, then a zero-length WRITE_WITH_IMM carrying the step as immediate data; the receiver
touches the slot only after polling that notification, consumes it, reposts the RECV and grants the
slot again for step ``s + nslots``.

The ring all-reduce is the bandwidth-optimal reduce-scatter + all-gather over ``2(n-1)`` steps
(Patarasuk & Yuan, "Bandwidth optimal all-reduce algorithms for clusters of workstations",
JPDC 2009), the schedule NCCL's ring uses.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field

import numpy as np

from causalkit._validation import check_positive_int
from causalkit.systems.rdma.paths import InProcessPath, SharedMemoryPath, UdpPath
from causalkit.systems.rdma.shift import KVStore, ShiftEndpoint
from causalkit.systems.rdma.verbs import (
    Fabric,
    Opcode,
    QPCap,
    QPState,
    RecvWR,
    SendWR,
    VerbsError,
    WCStatus,
)

__all__ = ["TRANSPORTS", "TransportError", "Cluster", "SimpleSender", "SimpleReceiver",
           "build_ring", "ring_allreduce", "RingAllReduce", "run_allreduce", "run_p2p"]

TRANSPORTS = {"inprocess": InProcessPath, "udp": UdpPath, "shm": SharedMemoryPath}


class TransportError(RuntimeError):
    """A work completion failed (or a wait timed out): the collective aborts, as NCCL would."""


def _wait_ok(cq, timeout: float, what: str, abort: threading.Event | None = None):
    deadline = time.monotonic() + timeout
    while not cq.wait(min(0.05, max(deadline - time.monotonic(), 0))):
        if abort is not None and abort.is_set():
            raise TransportError(f"aborted while waiting for {what} (another rank failed)")
        if time.monotonic() >= deadline:
            raise TransportError(f"timed out after {timeout:.1f} s waiting for {what}")
    wc = cq.poll(1)[0]
    if wc.status != WCStatus.SUCCESS:
        raise TransportError(f"{what}: completion with status {wc.status.name}")
    return wc


@dataclass
class Host:
    """One emulated host: two NICs, and either a SHIFT endpoint or a PD on NIC 0."""

    index: int
    nics: list
    endpoint: ShiftEndpoint | None = None
    pd: object = None

    def reg_mr(self, buf):
        return self.endpoint.reg_mr(buf) if self.endpoint else self.pd.reg_mr(buf)

    def create_cq(self, cqe: int = 4096):
        return self.endpoint.create_cq(cqe) if self.endpoint else self.nics[0].create_cq(cqe)

    def create_qp(self, send_cq, recv_cq, cap: QPCap):
        return (self.endpoint or self.pd).create_qp(send_cq, recv_cq, cap)


@dataclass
class Cluster:
    """Hosts, their fabric and the paths per rail: ``paths[(i, j, rail)]`` links host i and j."""

    fabric: Fabric
    hosts: list
    shift: bool
    transport: str
    paths: dict = field(default_factory=dict)
    rts: dict = field(default_factory=dict)

    def nic_paths(self, host: int, rail: int = 0) -> list:
        """Every path touching NIC ``rail`` of ``host``."""
        return [p for (i, j, r), p in self.paths.items() if r == rail and host in (i, j)]

    def close(self) -> None:
        """Stop the background threads and the engine; release sockets and shared memory."""
        for h in self.hosts:
            if h.endpoint is not None:
                h.endpoint.stop()
        self.fabric.stop()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def build_ring(n_hosts: int, *, shift: bool = True, transport: str = "inprocess",
               mtu: int = 4096, timeout: int = 13, retry_cnt: int = 4, seed: int = 0,
               probe_interval: float = 0.02) -> Cluster:
    """Build and start a ring of ``n_hosts`` hosts with two rails (see the module docstring).

    ``timeout`` (exponent) and ``retry_cnt`` are the RC attributes of every QP: an unreachable
    peer is detected after about ``(retry_cnt + 1) * 4.096 us * 2**timeout``.
    """
    n_hosts = check_positive_int(n_hosts, "n_hosts", minimum=2)
    if transport not in TRANSPORTS:
        raise ValueError(f"transport must be one of {sorted(TRANSPORTS)}; got {transport!r}")
    fabric = Fabric("threaded")
    hosts = [Host(i, [fabric.add_device(f"h{i}-nic{k}", mtu=mtu) for k in range(2)])
             for i in range(n_hosts)]
    cluster = Cluster(fabric, hosts, shift, transport,
                      rts={"timeout": timeout, "retry_cnt": retry_cnt, "rnr_retry": 7})
    for i in range(n_hosts):
        j = (i + 1) % n_hosts
        if (j, i, 0) in cluster.paths:
            continue
        for rail in range(2):
            path = TRANSPORTS[transport](seed=seed * 1000 + 10 * i + rail)
            cluster.paths[(i, j, rail)] = fabric.connect(hosts[i].nics[rail], hosts[j].nics[rail],
                                                         path)
    kv = KVStore()
    for h in hosts:
        if shift:
            h.endpoint = ShiftEndpoint(h.nics[0], h.nics[1], kv, probe_interval=probe_interval)
        else:
            h.pd = h.nics[0].alloc_pd()
    fabric.start()
    for h in hosts:
        if h.endpoint is not None:
            h.endpoint.start()
    return cluster


def _connect(cluster: Cluster, qa, qb) -> None:
    for qp, peer in ((qa, qb), (qb, qa)):
        dev = peer._qp["d"].device.name if cluster.shift else peer.device.name
        qp.modify(QPState.INIT)
        qp.modify(QPState.RTR, dest_dev=dev, dest_qp_num=peer.qp_num, rq_psn=0)
    for qp in (qa, qb):
        qp.modify(QPState.RTS, sq_psn=0, **cluster.rts)


class SimpleSender:
    """Sending end of a Simple-protocol channel (see the module docstring)."""

    def __init__(self, host: Host, nslots: int, cap: QPCap):
        self.nslots = nslots
        self.fifo = np.zeros(nslots, dtype=np.uint64)
        self.fifo_mr = host.reg_mr(self.fifo)
        self.scq, self.rcq = host.create_cq(), host.create_cq()
        self.qp = host.create_qp(self.scq, self.rcq, cap)
        self.step = 0
        self.abort = None

    def send(self, sge, remote, timeout: float = 30.0) -> None:
        """Send the bytes of ``sge`` as the next step; ``remote`` is the receiver's slot table."""
        s, slot = self.step, self.step % self.nslots
        deadline = time.monotonic() + timeout
        while int(self.fifo[slot]) < s + 1:  # wait for the clear-to-send of step s
            if time.monotonic() > deadline:
                raise TransportError(f"timed out waiting for CTS of step {s}")
            if self.abort is not None and self.abort.is_set():
                raise TransportError(f"aborted while waiting for CTS of step {s}")
            # every earlier send completion has been consumed, so anything here is an error
            # (e.g. the QP surfaced a failure): give up now rather than at the timeout
            early = self.scq.poll(1)
            if early:
                raise TransportError(f"while waiting for CTS of step {s}: completion with "
                                     f"status {early[0].status.name}")
            time.sleep(2e-4)
        addr, rkey, slot_bytes = remote
        if sge.length > slot_bytes:
            raise ValueError(f"message of {sge.length} bytes exceeds the slot ({slot_bytes})")
        self.qp.post_send([SendWR(2 * s, Opcode.RDMA_WRITE, (sge,), addr + slot * slot_bytes,
                                  rkey, signaled=False),
                           SendWR(2 * s + 1, Opcode.RDMA_WRITE_WITH_IMM, (), 0, 0,
                                  imm_data=s & 0x3FFFFFFF)])
        _wait_ok(self.scq, timeout, f"send completion of step {s}", self.abort)
        self.step += 1


class SimpleReceiver:
    """Receiving end of a Simple-protocol channel with ``nslots`` slots of ``slot_bytes``."""

    def __init__(self, host: Host, nslots: int, slot_bytes: int, cap: QPCap):
        self.nslots, self.slot_bytes = nslots, slot_bytes
        self.slots = np.zeros(nslots * slot_bytes, dtype=np.uint8)
        self.slots_mr = host.reg_mr(self.slots)
        self.cts = np.zeros(nslots, dtype=np.uint64)
        self.cts_mr = host.reg_mr(self.cts)
        self.scq, self.rcq = host.create_cq(), host.create_cq()
        self.qp = host.create_qp(self.scq, self.rcq, cap)
        self.step = 0
        self._peer_fifo = None
        self.abort = None

    @property
    def remote(self):
        """What the sender needs: (slot base address, rkey, slot size)."""
        return self.slots_mr.addr, self.slots_mr.rkey, self.slot_bytes

    def start(self, fifo_mr) -> None:
        """Post the RECVs and grant the first ``nslots`` steps."""
        self._peer_fifo = (fifo_mr.addr, fifo_mr.rkey)
        self.qp.post_recv([RecvWR(i) for i in range(self.nslots)])
        for s in range(self.nslots):
            self._grant(s)

    def _grant(self, s: int) -> None:
        slot = s % self.nslots
        self.cts[slot] = s + 1
        for wc in self.scq.poll(64):  # reap earlier CTS completions
            if wc.status != WCStatus.SUCCESS:
                raise TransportError(f"clear-to-send write: status {wc.status.name}")
        self.qp.post_send(SendWR(s, Opcode.RDMA_WRITE, (self.cts_mr.sge(8 * slot, 8),),
                                 self._peer_fifo[0] + 8 * slot, self._peer_fifo[1]))

    def recv(self, timeout: float = 30.0) -> np.ndarray:
        """Wait for the next step's notification; return a view of its slot (valid until
        :meth:`release`)."""
        s = self.step
        wc = _wait_ok(self.rcq, timeout, f"notification of step {s}", self.abort)
        if wc.imm_data != (s & 0x3FFFFFFF):
            raise TransportError(f"notification out of order: got step {wc.imm_data}, "
                                 f"expected {s}")
        slot = s % self.nslots
        return self.slots[slot * self.slot_bytes:(slot + 1) * self.slot_bytes]

    def release(self) -> None:
        """Consume the current step: repost its RECV and grant step ``s + nslots``."""
        s = self.step
        self.qp.post_recv(RecvWR(s + self.nslots))
        self._grant(s + self.nslots)
        self.step += 1


def _channel(cluster: Cluster, src: int, dst: int, nslots: int, slot_bytes: int):
    cap = QPCap(max_send_wr=4 * nslots + 8, max_recv_wr=2 * nslots + 4, max_send_sge=1,
                max_recv_sge=1)
    tx = SimpleSender(cluster.hosts[src], nslots, cap)
    rx = SimpleReceiver(cluster.hosts[dst], nslots, slot_bytes, cap)
    _connect(cluster, tx.qp, rx.qp)
    rx.start(tx.fifo_mr)
    return tx, rx


def ring_allreduce(acc: np.ndarray, acc_mr, tx: SimpleSender, rx: SimpleReceiver, remote,
                   rank: int, n: int, timeout: float = 30.0) -> None:
    """In-place sum all-reduce of ``acc`` (float64, registered as ``acc_mr``) across the ring.

    Reduce-scatter: at step k rank r sends chunk (r-k) mod n and adds the received chunk
    (r-k-1) mod n; all-gather: at step k it sends chunk (r+1-k) mod n and stores chunk (r-k) mod n.
    """
    bounds = np.linspace(0, acc.size, n + 1).astype(int)

    def sge(c):
        return acc_mr.sge(8 * bounds[c], 8 * (bounds[c + 1] - bounds[c]))

    def chunk(view, c):
        return view[:8 * (bounds[c + 1] - bounds[c])].view(np.float64)

    for k in range(n - 1):
        tx.send(sge((rank - k) % n), remote, timeout)
        c = (rank - k - 1) % n
        acc[bounds[c]:bounds[c + 1]] += chunk(rx.recv(timeout), c)
        rx.release()
    for k in range(n - 1):
        tx.send(sge((rank + 1 - k) % n), remote, timeout)
        c = (rank - k) % n
        acc[bounds[c]:bounds[c + 1]] = chunk(rx.recv(timeout), c)
        rx.release()


def _inputs(seed: int, rank: int, it: int, n_elems: int) -> np.ndarray:
    """Integer-valued float64 inputs: sums are exact, so any reduction order gives equal bits."""
    return np.random.default_rng([seed, rank, it]).integers(-1000, 1000, n_elems).astype(np.float64)


class RingAllReduce:
    """Persistent ring all-reduce state: one Simple channel per ring edge and registered buffers.

    Parameters
    ----------
    cluster : Cluster
    n_elems : int
        float64 elements per rank.
    nslots : int
        Slots per channel.
    seed : int
        Seed of the default integer-valued inputs.
    """

    def __init__(self, cluster: Cluster, n_elems: int, *, nslots: int = 4, seed: int = 0):
        n = len(cluster.hosts)
        self.cluster, self.n, self.seed = cluster, n, seed
        self.n_elems = check_positive_int(n_elems, "n_elems", minimum=n)
        slot_bytes = 8 * int(np.ceil(n_elems / n)) + 8
        self.chans = [_channel(cluster, r, (r + 1) % n, nslots, slot_bytes) for r in range(n)]
        self.accs = [np.zeros(n_elems, dtype=np.float64) for _ in range(n)]
        self.mrs = [cluster.hosts[r].reg_mr(self.accs[r]) for r in range(n)]
        self.iterations_done = 0

    @property
    def qps(self) -> list:
        """Every QP of the ring (sending and receiving ends)."""
        return [c[0].qp for c in self.chans] + [c[1].qp for c in self.chans]

    def reference(self, it: int) -> np.ndarray:
        """Exact sum of the default inputs of iteration ``it``."""
        return sum(_inputs(self.seed, r, it, self.n_elems) for r in range(self.n))

    def run(self, iterations: int, *, on_iteration=None, fill=None, after=None,
            timeout: float = 30.0) -> dict:
        """Run ``iterations`` all-reduces, one thread per rank (see :func:`run_allreduce`)."""
        n, first = self.n, self.iterations_done
        abort = threading.Event()
        for tx, rx in self.chans:
            tx.abort = rx.abort = abort
        keep = fill is None
        if keep:
            def fill(r, it, buf):
                buf[:] = _inputs(self.seed, r, it, self.n_elems)
        results = {r: [] for r in range(n)}
        errors, times = {}, []

        def rank_main(r):
            tx, rx = self.chans[r][0], self.chans[(r - 1) % n][1]
            remote = self.chans[r][1].remote
            acc = self.accs[r]
            try:
                for i in range(iterations):
                    if r == 0 and on_iteration is not None:
                        on_iteration(i)
                    fill(r, first + i, acc)
                    ring_allreduce(acc, self.mrs[r], tx, rx, remote, r, n, timeout)
                    if keep:
                        results[r].append(acc.copy())
                    if after is not None:
                        after(r, i, acc)
                    if r == 0:
                        times.append(time.monotonic())
            except (TransportError, VerbsError) as exc:
                errors[r] = exc
                abort.set()

        t0 = time.monotonic()
        threads = [threading.Thread(target=rank_main, args=(r,), daemon=True) for r in range(n)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=timeout * (iterations + 2))
        self.iterations_done += iterations
        reference = [self.reference(first + i) for i in range(iterations)] if keep else []
        return {"results": results, "reference": reference, "times": times, "t0": t0,
                "errors": errors, "bytes_per_op": 8 * self.n_elems, "qps": self.qps}


def run_allreduce(cluster: Cluster, n_elems: int, iterations: int, *, seed: int = 0,
                  nslots: int = 4, on_iteration=None, fill=None, after=None,
                  timeout: float = 30.0) -> dict:
    """Run ``iterations`` ring all-reduces of ``n_elems`` float64 per rank, one thread per rank.

    ``fill(rank, it, buf)`` writes rank's input (default: integer-valued random numbers, so the
    sums are exact in any order); ``after(rank, it, buf)`` sees the reduced result.
    ``on_iteration(it)`` is called by rank 0 before each iteration (fault injection). When one
    rank fails the others abort. Returns a dict: ``results`` (rank -> list of arrays, only with
    the default ``fill``), ``reference`` (exact sums of the default inputs), ``times`` (rank 0's
    completion time per iteration), ``errors`` (rank -> exception), ``qps``.
    """
    ring = RingAllReduce(cluster, n_elems, nslots=nslots, seed=seed)
    return ring.run(iterations, on_iteration=on_iteration, fill=fill, after=after,
                    timeout=timeout)


def run_p2p(cluster: Cluster, msg_bytes: int, n_msgs: int, *, seed: int = 0, nslots: int = 4,
            on_message=None, timeout: float = 30.0) -> dict:
    """Stream ``n_msgs`` messages of ``msg_bytes`` from host 0 to host 1 with the Simple protocol;
    the receiver checks every message against the expected pattern. ``on_message(i)`` is called
    by the sender before message i. Returns ``ok`` (per message), ``times``, ``errors``."""
    check_positive_int(msg_bytes, "msg_bytes")
    tx, rx = _channel(cluster, 0, 1, nslots, msg_bytes)
    tx.abort = rx.abort = abort = threading.Event()
    remote = rx.remote
    src = np.zeros(nslots * msg_bytes, dtype=np.uint8)
    src_mr = cluster.hosts[0].reg_mr(src)
    ok, times, errors = [], [], {}

    def pattern(i):
        return np.random.default_rng([seed, i]).integers(0, 256, msg_bytes, dtype=np.uint8)

    def sender():
        try:
            for i in range(n_msgs):
                if on_message is not None:
                    on_message(i)
                slot = i % nslots  # the source slot is rewritten only after its WR completed
                src[slot * msg_bytes:(slot + 1) * msg_bytes] = pattern(i)
                tx.send(src_mr.sge(slot * msg_bytes, msg_bytes), remote, timeout)
        except (TransportError, VerbsError) as exc:
            errors[0] = exc
            abort.set()

    def receiver():
        try:
            for i in range(n_msgs):
                view = rx.recv(timeout)
                ok.append(bool(np.array_equal(view, pattern(i))))
                times.append(time.monotonic())
                rx.release()
        except (TransportError, VerbsError) as exc:
            errors[1] = exc
            abort.set()

    t0 = time.monotonic()
    threads = [threading.Thread(target=f, daemon=True) for f in (sender, receiver)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=timeout * 4)
    return {"ok": ok, "times": times, "t0": t0, "errors": errors, "bytes_per_op": msg_bytes,
            "qps": [tx.qp, rx.qp]}
