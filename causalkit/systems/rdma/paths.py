"""Pluggable packet paths between two emulated NIC ports, with fault hooks.

A path is a bidirectional link with two ends (``0`` and ``1``). Three transports:

- :class:`InProcessPath`: two deques in one process (deterministic with a virtual clock);
- :class:`UdpPath`: two UDP sockets bound to ``127.0.0.1`` (real kernel loopback);
- :class:`SharedMemoryPath`: two single-producer/single-consumer byte rings in one
  :class:`multiprocessing.shared_memory.SharedMemory` block, so the two ends may live in different
  processes (``SharedMemoryPath.attach(name, end)`` on the other side).

Fault hooks (applied by the sending end, on the path's clock): :meth:`NicPath.kill`
(permanent), :meth:`NicPath.link_down` (a down window, e.g. a port flap), :meth:`NicPath.drop`
(random loss of every packet), :meth:`NicPath.drop_acks_only` (random loss of
responder-to-requester packets only: data is placed but its ACK is lost) and
:meth:`NicPath.delay` (constant one-way latency added).
"""

from __future__ import annotations

import abc
import heapq
import itertools
import socket
import struct
from collections import deque
from multiprocessing import shared_memory

import numpy as np

from causalkit._validation import check_fraction
from causalkit.systems.rdma.wire import KIND_REQ

__all__ = ["NicPath", "InProcessPath", "UdpPath", "SharedMemoryPath"]


class NicPath(abc.ABC):
    """Base class: fault injection and delayed delivery; subclasses move raw bytes.

    Parameters
    ----------
    seed : int
        Seed of the random generator used by :meth:`drop` and :meth:`drop_acks_only`.
    """

    emulated = True

    def __init__(self, seed: int = 0):
        self._rng = np.random.default_rng(seed)
        self._killed = False
        self._down: list[tuple[float, float]] = []
        self._drop_p = 0.0
        self._drop_ack_p = 0.0
        self._delay = 0.0
        self._pending: list[list] = [[], []]  # per sending end: heap of (due, seq, bytes)
        self._seq = itertools.count()
        self.clock = None  # set by the fabric: a callable returning "now" in seconds
        self.sent = [0, 0]
        self.dropped = [0, 0]

    # ------------------------------------------------------------------ fault hooks
    def kill(self) -> None:
        """Cut the path for good (cable pulled, NIC port dead)."""
        self._killed = True

    def link_down(self, t0: float, t1: float) -> None:
        """Take the link down from ``t0`` to ``t1`` seconds after now (a port flap)."""
        if not 0 <= t0 < t1:
            raise ValueError(f"link_down needs 0 <= t0 < t1; got t0={t0}, t1={t1}")
        now = self._now()
        self._down.append((now + t0, now + t1))

    def drop(self, p: float) -> None:
        """Lose every packet independently with probability ``p``."""
        self._drop_p = check_fraction(p, "p")

    def drop_acks_only(self, p: float) -> None:
        """Lose responder-to-requester packets (ACK/NAK/responses) with probability ``p``."""
        self._drop_ack_p = check_fraction(p, "p")

    def delay(self, d: float) -> None:
        """Add a one-way latency of ``d`` seconds to every packet."""
        if not d >= 0:
            raise ValueError(f"delay d must be >= 0; got {d}")
        self._delay = float(d)

    def heal(self) -> None:
        """Remove every fault except :meth:`kill`."""
        self._down, self._drop_p, self._drop_ack_p, self._delay = [], 0.0, 0.0, 0.0

    def is_up(self, now: float | None = None) -> bool:
        """Whether a packet sent now would get through the down windows and kill."""
        now = self._now() if now is None else now
        return not self._killed and not any(t0 <= now < t1 for t0, t1 in self._down)

    # ------------------------------------------------------------------ data movement
    def _now(self) -> float:
        if self.clock is None:
            raise RuntimeError("path is not attached to a fabric (no clock)")
        return self.clock()

    def send(self, end: int, data: bytes, kind: int) -> None:
        """Send ``data`` from ``end``; ``kind`` is the packet kind (for ACK-only loss)."""
        now = self._now()
        self.sent[end] += 1
        lost = not self.is_up(now) or (self._drop_p and self._rng.random() < self._drop_p) or (
            kind != KIND_REQ and self._drop_ack_p and self._rng.random() < self._drop_ack_p)
        if lost:
            self.dropped[end] += 1
            return
        if self._delay:
            heapq.heappush(self._pending[end], (now + self._delay, next(self._seq), data))
        else:
            self._put(end, data)

    def poll(self, end: int) -> list[bytes]:
        """Flush matured delayed packets sent from ``end``, then return packets arrived at it."""
        heap = self._pending[end]
        if heap:
            now = self._now()
            while heap and heap[0][0] <= now:
                _, _, data = heapq.heappop(heap)
                if self.is_up(now):
                    self._put(end, data)
                else:
                    self.dropped[end] += 1
        return self._take(end)

    def next_due(self, end: int) -> float | None:
        """Time of the next delayed packet from ``end`` (None when none is waiting)."""
        heap = self._pending[end]
        return heap[0][0] if heap else None

    @abc.abstractmethod
    def _put(self, end: int, data: bytes) -> None:
        """Deliver ``data`` from ``end`` to the other end."""

    @abc.abstractmethod
    def _take(self, end: int) -> list[bytes]:
        """Packets that have arrived at ``end``."""

    def close(self) -> None:  # noqa: B027 - optional hook; in-process paths hold nothing
        """Release OS resources (sockets, shared memory)."""


class InProcessPath(NicPath):
    """Two in-memory queues: deterministic delivery order, no OS involvement."""

    transport = "inprocess"

    def __init__(self, seed: int = 0):
        super().__init__(seed)
        self._queues = (deque(), deque())  # arrivals at end 0, end 1

    def _put(self, end, data):
        self._queues[1 - end].append(data)

    def _take(self, end):
        q = self._queues[end]
        out = list(q)
        q.clear()
        return out


class UdpPath(NicPath):
    """Two UDP sockets on the loopback interface (``127.0.0.1``), one per end."""

    transport = "udp"
    _MAX = 65507

    def __init__(self, seed: int = 0):
        super().__init__(seed)
        self._socks = []
        for _ in range(2):
            s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            s.bind(("127.0.0.1", 0))
            s.setblocking(False)
            s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 22)
            self._socks.append(s)
        self._addr = [s.getsockname() for s in self._socks]

    def _put(self, end, data):
        if len(data) > self._MAX:
            raise ValueError(f"UDP path: packet of {len(data)} bytes exceeds {self._MAX}; "
                             "lower the mtu")
        try:
            self._socks[end].sendto(data, self._addr[1 - end])
        except (BlockingIOError, OSError):  # socket buffer full: the packet is lost, as on a wire
            self.dropped[end] += 1

    def _take(self, end):
        out, s = [], self._socks[end]
        while True:
            try:
                out.append(s.recv(self._MAX))
            except (BlockingIOError, InterruptedError):
                return out

    def close(self):
        for s in self._socks:
            s.close()


class SharedMemoryPath(NicPath):
    """Byte rings in shared memory: one SPSC ring per direction, usable across processes.

    Layout per ring: ``head`` (uint64, consumer position), ``tail`` (uint64, producer position),
    then ``capacity`` data bytes holding records ``[uint32 length][bytes]``; a record that does not
    fit is dropped (counted in ``dropped``), like a full switch buffer. Positions only grow, so
    ``tail - head`` is the fill level; each counter has one writer.

    Parameters
    ----------
    capacity : int
        Bytes per ring.
    name : str or None
        Shared-memory block name; ``None`` creates a fresh one (see ``name``).
    create : bool
        Create the block (owner) or attach to an existing one.
    """

    transport = "shm"
    _HDR = 16

    def __init__(self, capacity: int = 1 << 22, seed: int = 0, name: str | None = None,
                 create: bool = True):
        super().__init__(seed)
        self.capacity = int(capacity)
        size = 2 * (self._HDR + self.capacity)
        if create:
            self._shm = shared_memory.SharedMemory(name=name, create=True, size=size)
            self._shm.buf[:size] = bytes(size)
        else:
            self._shm = shared_memory.SharedMemory(name=name, create=False)
        self._owner = create
        self.name = self._shm.name
        self._ctr = np.ndarray((2, 2), dtype=np.uint64, buffer=self._shm.buf,
                               offset=0, strides=(self._HDR + self.capacity, 8))

    @classmethod
    def attach(cls, name: str, capacity: int = 1 << 22, seed: int = 1) -> SharedMemoryPath:
        """Open the path created by another process under ``name``."""
        return cls(capacity=capacity, seed=seed, name=name, create=False)

    def _base(self, ring: int) -> int:
        return ring * (self._HDR + self.capacity) + self._HDR

    def _copy_in(self, ring: int, pos: int, data: bytes) -> None:
        base, cap, n = self._base(ring), self.capacity, len(data)
        start = pos % cap
        first = min(n, cap - start)
        self._shm.buf[base + start:base + start + first] = data[:first]
        if first < n:
            self._shm.buf[base:base + n - first] = data[first:]

    def _copy_out(self, ring: int, pos: int, n: int) -> bytes:
        base, cap = self._base(ring), self.capacity
        start = pos % cap
        first = min(n, cap - start)
        out = bytes(self._shm.buf[base + start:base + start + first])
        if first < n:
            out += bytes(self._shm.buf[base:base + n - first])
        return out

    def _put(self, end, data):
        ring = 1 - end  # ring r holds arrivals at end r
        head, tail = int(self._ctr[ring, 0]), int(self._ctr[ring, 1])
        need = 4 + len(data)
        if need > self.capacity - (tail - head):
            self.dropped[end] += 1
            return
        self._copy_in(ring, tail, struct.pack("<I", len(data)) + data)
        self._ctr[ring, 1] = tail + need  # publish after the bytes are in place

    def _take(self, end):
        out = []
        head, tail = int(self._ctr[end, 0]), int(self._ctr[end, 1])
        while head < tail:
            (n,) = struct.unpack("<I", self._copy_out(end, head, 4))
            out.append(self._copy_out(end, head + 4, n))
            head += 4 + n
        self._ctr[end, 0] = head
        return out

    def close(self):
        del self._ctr
        self._shm.close()
        if self._owner:
            self._shm.unlink()
