"""Emulated RDMA verbs with the reliable-connection (RC) transport, in pure Python.

**Emulated**: this machine has no RDMA NIC and no soft-RoCE, so every "device" here is a software
NIC (:data:`EMULATED` is ``True``; outputs built on it say ``emulated``). What it models, following
the InfiniBand specification Vol. 1 ch. 9-11 and the libibverbs API:

- protection domains and memory regions with **per-device** ``lkey``/``rkey`` (a key from another
  device does not resolve: ``LOC_PROT_ERR`` locally, ``REM_ACCESS_ERR`` remotely);
- completion queues (``poll``; ``wait`` plays the completion channel);
- RC queue pairs with the state machine RESET -> INIT -> RTR -> RTS (and ERR); posting on a QP in
  the wrong state fails with ``EINVAL``; a full queue with ``ENOMEM``; too many SGEs, a message over
  ``max_msg_sz`` or an atomic that is not 8 bytes with ``EINVAL`` (the errors ``ibv_post_send``
  returns);
- work-queue rings in host memory that can be **read back** (:meth:`QueuePair.send_queue`), with
  posting separate from ringing the **doorbell** (:meth:`QueuePair.post_send` ``ring=False`` then
  :meth:`QueuePair.ring_doorbell`);
- segmentation into MTU-sized packets with PSNs, cumulative ACKs sent **after placement**, NAKs
  (sequence error, RNR, invalid request, remote access), **go-back-N** retransmission on timeout
  (``4.096 us * 2**timeout``), retry exhaustion (``RETRY_EXC_ERR``) moving the QP to ERR and
  **flushing** every later WR (``WR_FLUSH_ERR``);
- opcodes WRITE, WRITE_WITH_IMM, SEND, SEND_WITH_IMM, READ, FETCH_AND_ADD, CMP_AND_SWP; duplicate
  atomics are answered from a responder cache (never re-executed), duplicate READs re-executed.

Payload is gathered from application memory when each packet is (re)transmitted and placed straight
into the destination buffer: the datapath is zero-copy, so a replayed WR re-reads and re-writes live
memory, exactly the behaviour the trilemma is about.

A :class:`Fabric` owns the devices, a lock and the clock. ``mode="threaded"`` runs one engine thread
(real clock) that moves packets and fires timers; ``mode="manual"`` has a virtual clock advanced by
:meth:`Fabric.run_until`, for deterministic single-threaded use.
"""

from __future__ import annotations

import enum
import errno
import itertools
import threading
import time
import zlib
from collections import deque
from dataclasses import dataclass, field, replace

import numpy as np

from causalkit.systems.rdma.paths import InProcessPath, NicPath
from causalkit.systems.rdma.wire import (
    FLAG_FIRST,
    FLAG_LAST,
    KIND_ACK,
    KIND_ATOMIC_RESP,
    KIND_NAK,
    KIND_READ_RESP,
    KIND_REQ,
    NAK_INV_REQ,
    NAK_REM_ACCESS,
    NAK_RNR,
    NAK_SEQ,
    Packet,
)

__all__ = ["EMULATED", "VerbsError", "WCStatus", "Opcode", "WCOpcode", "QPState", "Access",
           "SGE", "SendWR", "RecvWR", "WC", "QPCap", "Fabric", "Device", "ProtectionDomain",
           "MemoryRegion", "CompletionQueue", "QueuePair", "ack_timeout_seconds", "bring_up"]

#: Every device in this module is a software emulation (no RDMA hardware on this machine).
EMULATED = True

_WINDOW = 64            # packets in flight per QP
_ACK_EVERY = 16         # responder coalesces ACKs (always ACKs a message's last packet)
_RNR_TIMER = 0.5e-3     # seconds an RNR-NAKed requester waits before resending
_MAX_TX_PER_STEP = 64   # packets one QP may send per engine step (fairness between QPs)


class VerbsError(OSError):
    """A verb failed synchronously, with the errno a real provider returns (EINVAL, ENOMEM...)."""

    def __init__(self, err: int, message: str):
        super().__init__(err, message)


class WCStatus(enum.IntEnum):
    """``ibv_wc_status`` values."""

    SUCCESS = 0
    LOC_LEN_ERR = 1
    LOC_QP_OP_ERR = 2
    LOC_PROT_ERR = 4
    WR_FLUSH_ERR = 5
    REM_INV_REQ_ERR = 9
    REM_ACCESS_ERR = 10
    REM_OP_ERR = 11
    RETRY_EXC_ERR = 12
    RNR_RETRY_EXC_ERR = 13


class Opcode(enum.IntEnum):
    """``ibv_wr_opcode`` values."""

    RDMA_WRITE = 0
    RDMA_WRITE_WITH_IMM = 1
    SEND = 2
    SEND_WITH_IMM = 3
    RDMA_READ = 4
    ATOMIC_CMP_AND_SWP = 5
    ATOMIC_FETCH_AND_ADD = 6


class WCOpcode(enum.IntEnum):
    """``ibv_wc_opcode`` values."""

    SEND = 0
    RDMA_WRITE = 1
    RDMA_READ = 2
    COMP_SWAP = 3
    FETCH_ADD = 4
    RECV = 128
    RECV_RDMA_WITH_IMM = 129


class QPState(enum.IntEnum):
    """``ibv_qp_state`` values."""

    RESET = 0
    INIT = 1
    RTR = 2
    RTS = 3
    ERR = 6


class Access(enum.IntFlag):
    """``ibv_access_flags``."""

    LOCAL_WRITE = 1
    REMOTE_WRITE = 2
    REMOTE_READ = 4
    REMOTE_ATOMIC = 8
    ALL = 15


_ATOMICS = (Opcode.ATOMIC_CMP_AND_SWP, Opcode.ATOMIC_FETCH_AND_ADD)
_TWO_SIDED = (Opcode.SEND, Opcode.SEND_WITH_IMM, Opcode.RDMA_WRITE_WITH_IMM)
_WC_OF = {Opcode.RDMA_WRITE: WCOpcode.RDMA_WRITE, Opcode.RDMA_WRITE_WITH_IMM: WCOpcode.RDMA_WRITE,
          Opcode.SEND: WCOpcode.SEND, Opcode.SEND_WITH_IMM: WCOpcode.SEND,
          Opcode.RDMA_READ: WCOpcode.RDMA_READ, Opcode.ATOMIC_CMP_AND_SWP: WCOpcode.COMP_SWAP,
          Opcode.ATOMIC_FETCH_AND_ADD: WCOpcode.FETCH_ADD}
_ALLOWED = {(QPState.RESET, QPState.INIT), (QPState.INIT, QPState.INIT),
            (QPState.INIT, QPState.RTR), (QPState.RTR, QPState.RTS), (QPState.RTS, QPState.RTS)}


def ack_timeout_seconds(timeout: int) -> float:
    """Local ACK timeout of the ``timeout`` QP attribute: ``4.096 us * 2**timeout`` (IB spec)."""
    return 4.096e-6 * (1 << int(timeout))


@dataclass(frozen=True, slots=True)
class SGE:
    """Scatter/gather element: ``length`` bytes at virtual address ``addr`` under ``lkey``."""

    addr: int
    length: int
    lkey: int


@dataclass(slots=True)
class SendWR:
    """A send-queue work request (``ibv_send_wr``).

    ``compare_add`` is the add operand of FETCH_AND_ADD or the compare value of CMP_AND_SWP;
    ``swap`` the swap value. ``signaled=False`` asks for no completion unless it fails.
    """

    wr_id: int
    opcode: Opcode
    sg_list: tuple = ()
    remote_addr: int = 0
    rkey: int = 0
    imm_data: int = 0
    signaled: bool = True
    compare_add: int = 0
    swap: int = 0


@dataclass(slots=True)
class RecvWR:
    """A receive-queue work request (``ibv_recv_wr``)."""

    wr_id: int
    sg_list: tuple = ()


@dataclass(frozen=True, slots=True)
class WC:
    """A work completion (``ibv_wc``); ``wqe_index`` is the WQE's position in its ring."""

    wr_id: int
    status: WCStatus
    opcode: WCOpcode
    qp_num: int
    byte_len: int = 0
    imm_data: int | None = None
    wqe_index: int = -1


@dataclass(frozen=True, slots=True)
class QPCap:
    """Queue capacities requested at QP creation (``ibv_qp_cap``)."""

    max_send_wr: int = 256
    max_recv_wr: int = 256
    max_send_sge: int = 4
    max_recv_sge: int = 4


def _dev_id(name: str) -> int:
    return zlib.crc32(name.encode()) & 0xFFFFFFFF


class Fabric:
    """Devices, the links between them, one lock and one clock.

    Parameters
    ----------
    mode : {"threaded", "manual"}
        ``"threaded"``: call :meth:`start` (or use as a context manager) to run the engine thread
        on the real clock. ``"manual"``: nothing runs by itself; :meth:`run_until` steps the
        engine and advances a virtual clock to the next timer when idle (deterministic).
    idle_wait : float
        Seconds the engine thread sleeps when it has nothing to do (packets arriving on UDP or
        shared-memory paths are noticed within this time).
    """

    def __init__(self, mode: str = "threaded", idle_wait: float = 2e-4):
        if mode not in ("threaded", "manual"):
            raise ValueError(f"mode must be 'threaded' or 'manual'; got {mode!r}")
        self.mode = mode
        self.idle_wait = float(idle_wait)
        self.lock = threading.RLock()
        self._wake = threading.Condition(self.lock)
        self.devices: dict[str, Device] = {}
        self.paths: list[NicPath] = []
        self._vt = 0.0
        self._thread = None
        self._stop = False
        self.steps = 0

    def now(self) -> float:
        """Current time in seconds (monotonic real time, or the virtual clock)."""
        return time.monotonic() if self.mode == "threaded" else self._vt

    def add_device(self, name: str, **kwargs) -> Device:
        """Create an emulated NIC named ``name`` (names are unique; they act as the GID)."""
        with self.lock:
            if name in self.devices:
                raise ValueError(f"device name {name!r} already exists")
            dev = Device(self, name, **kwargs)
            self.devices[name] = dev
            return dev

    def connect(self, a: Device, b: Device, path: NicPath | None = None) -> NicPath:
        """Link devices ``a`` (path end 0) and ``b`` (end 1); default an :class:`InProcessPath`."""
        path = InProcessPath() if path is None else path
        self.attach(a, b.name, path, 0)
        self.attach(b, a.name, path, 1)
        return path

    def attach(self, local: Device, remote_name: str, path: NicPath, end: int) -> NicPath:
        """Attach end ``end`` of ``path`` to ``local``, leading to the device ``remote_name``
        (which may live in another process, e.g. over a :class:`SharedMemoryPath`)."""
        if not isinstance(path, NicPath):
            raise TypeError(f"path must be a NicPath; got {type(path).__name__}")
        with self.lock:
            path.clock = self.now
            local._links[_dev_id(remote_name)] = (path, end)
            if path not in self.paths:
                self.paths.append(path)
        return path

    # ------------------------------------------------------------------ engine
    def step(self) -> bool:
        """One engine round over every device; returns whether anything happened."""
        with self.lock:
            self.steps += 1
            now = self.now()
            worked = False
            for dev in self.devices.values():
                worked |= dev._progress(now)
            return worked

    def next_event_time(self) -> float | None:
        """Earliest pending timer or delayed packet (virtual-clock scheduling)."""
        times = [t for dev in self.devices.values() for t in dev._timers()]
        times += [t for dev in self.devices.values() for path, end in dev._links.values()
                  if (t := path.next_due(end)) is not None]
        return min(times) if times else None

    def run_until(self, predicate, timeout: float = 10.0) -> bool:
        """Make progress until ``predicate()`` is true or ``timeout`` seconds pass.

        Manual mode steps the engine here and jumps the virtual clock to the next event when idle;
        threaded mode just waits for the engine thread.
        """
        if self.mode == "threaded":
            deadline = time.monotonic() + timeout
            with self._wake:
                while not predicate():
                    left = deadline - time.monotonic()
                    if left <= 0:
                        return False
                    self._wake.wait(min(left, 1e-3))
                return True
        deadline = self._vt + timeout
        with self.lock:
            while not predicate():
                if not self.step():
                    t = self.next_event_time()
                    if t is None or t > deadline:
                        return bool(predicate())
                    self._vt = max(self._vt, t)
            return True

    def kick(self) -> None:
        """Wake the engine (a doorbell was rung)."""
        with self._wake:
            self._wake.notify_all()

    def start(self) -> Fabric:
        """Start the engine thread (threaded mode)."""
        if self.mode != "threaded":
            raise RuntimeError("start() is only for mode='threaded'")
        if self._thread is None:
            self._stop = False
            self._thread = threading.Thread(target=self._loop, name="rdma-engine", daemon=True)
            self._thread.start()
        return self

    def stop(self) -> None:
        """Stop the engine thread and close the paths."""
        if self._thread is not None:
            with self._wake:
                self._stop = True
                self._wake.notify_all()
            self._thread.join()
            self._thread = None
        for path in self.paths:
            path.close()
        self.paths = []

    def _loop(self) -> None:
        while True:
            with self._wake:
                if self._stop:
                    return
                if self.step():
                    self._wake.notify_all()
                else:
                    self._wake.wait(self.idle_wait)

    def __enter__(self):
        if self.mode == "threaded":
            self.start()
        return self

    def __exit__(self, *exc):
        self.stop()


class Device:
    """An emulated RNIC (one port). Create with :meth:`Fabric.add_device`.

    Parameters
    ----------
    mtu : int
        Path MTU in bytes (payload per packet).
    max_qp_wr, max_sge, max_msg_sz : int
        Device limits (``ibv_device_attr``), checked at QP creation and at post time.
    """

    def __init__(self, fabric: Fabric, name: str, mtu: int = 4096, max_qp_wr: int = 16384,
                 max_sge: int = 30, max_msg_sz: int = 1 << 31):
        if mtu < 256:
            raise ValueError(f"mtu must be >= 256; got {mtu}")
        self.fabric, self.name, self.id = fabric, name, _dev_id(name)
        self.mtu, self.max_qp_wr = mtu, max_qp_wr
        self.max_sge, self.max_msg_sz = max_sge, max_msg_sz
        self._mrs_l: dict[int, MemoryRegion] = {}
        self._mrs_r: dict[int, MemoryRegion] = {}
        self._qps: dict[int, QueuePair] = {}
        self._links: dict[int, tuple[NicPath, int]] = {}
        self._keys = itertools.count(1)
        self._qpns = itertools.count(0x11)

    def __repr__(self):
        return f"Device({self.name!r})"

    def alloc_pd(self) -> ProtectionDomain:
        """Allocate a protection domain (``ibv_alloc_pd``)."""
        return ProtectionDomain(self)

    def create_cq(self, cqe: int = 1024) -> CompletionQueue:
        """Create a completion queue with room for ``cqe`` entries (``ibv_create_cq``)."""
        return CompletionQueue(self, cqe)

    def kill(self) -> None:
        """NIC death / port down for good: every path of this device is cut."""
        for path, _ in self._links.values():
            path.kill()

    @property
    def paths(self) -> list[NicPath]:
        """The paths attached to this device."""
        return [p for p, _ in self._links.values()]

    def _new_key(self, kind: str) -> int:
        return zlib.crc32(f"{self.name}:{next(self._keys)}:{kind}".encode()) & 0xFFFFFFFF

    def _send(self, pkt: Packet) -> None:
        link = self._links.get(pkt.dst_dev)
        if link is not None:
            link[0].send(link[1], pkt.encode(), pkt.kind)

    def _resolve(self, table, key, addr, length, need):
        """(mr, offset) for ``length`` bytes at ``addr`` under ``key`` with access ``need``."""
        mr = table.get(key)
        if mr is None or (mr.access & need) != need:
            return None
        off = addr - mr.addr
        if off < 0 or off + length > mr.length:
            return None
        return mr, off

    def _progress(self, now: float) -> bool:
        worked = False
        for path, end in list(self._links.values()):
            for data in path.poll(end):
                worked = True
                pkt = Packet.decode(data)
                qp = self._qps.get(pkt.dst_qpn)
                if qp is not None and (pkt.src_dev, pkt.src_qpn) == (qp._dest_dev, qp._dest_qpn):
                    qp._on_packet(pkt, now)
        for qp in list(self._qps.values()):
            worked |= qp._progress(now)
        return worked

    def _timers(self):
        for qp in self._qps.values():
            if qp.state == QPState.RTS:
                if qp._deadline is not None and qp._una < qp._tx:
                    yield qp._deadline
                if qp._rnr_until is not None:
                    yield qp._rnr_until


class ProtectionDomain:
    """A protection domain on one device (``ibv_pd``)."""

    def __init__(self, device: Device):
        self.device = device

    def reg_mr(self, buffer, access: Access = Access.ALL) -> MemoryRegion:
        """Register ``buffer`` (a writable contiguous numpy array) (``ibv_reg_mr``).

        The virtual address is the buffer's real address; ``lkey``/``rkey`` are fresh keys valid
        only on this device.
        """
        if not isinstance(buffer, np.ndarray):
            raise TypeError(f"buffer must be a numpy.ndarray; got {type(buffer).__name__}")
        if not buffer.flags.c_contiguous or not buffer.flags.writeable:
            raise ValueError("buffer must be C-contiguous and writeable")
        return MemoryRegion(self, buffer, Access(access))

    def create_qp(self, send_cq: CompletionQueue, recv_cq: CompletionQueue,
                  cap: QPCap | None = None, sq_sig_all: bool = False) -> QueuePair:
        """Create an RC queue pair in RESET (``ibv_create_qp``)."""
        dev = self.device
        cap = QPCap() if cap is None else cap
        if cap.max_send_wr < 1 or cap.max_recv_wr < 1 or \
                max(cap.max_send_wr, cap.max_recv_wr) > dev.max_qp_wr:
            raise VerbsError(errno.EINVAL, f"queue depth must be in [1, {dev.max_qp_wr}]: {cap}")
        if not 1 <= cap.max_send_sge <= dev.max_sge or not 1 <= cap.max_recv_sge <= dev.max_sge:
            raise VerbsError(errno.EINVAL, f"SGE counts must be in [1, {dev.max_sge}]: {cap}")
        for cq in (send_cq, recv_cq):
            if cq.device is not dev:
                raise VerbsError(errno.EINVAL, "CQ belongs to another device")
        return QueuePair(self, send_cq, recv_cq, cap, sq_sig_all)


class MemoryRegion:
    """A registered memory region: ``addr``, ``length``, ``lkey``, ``rkey``, ``access``."""

    def __init__(self, pd: ProtectionDomain, buffer: np.ndarray, access: Access):
        self.pd, self.access = pd, access
        self.buf = buffer.reshape(-1).view(np.uint8)
        self.addr = int(buffer.ctypes.data)
        self.length = int(self.buf.nbytes)
        dev = pd.device
        self.lkey, self.rkey = dev._new_key("l"), dev._new_key("r")
        dev._mrs_l[self.lkey] = self
        dev._mrs_r[self.rkey] = self

    def sge(self, offset: int = 0, length: int | None = None) -> SGE:
        """An SGE for ``length`` bytes (default: to the end) starting ``offset`` bytes in."""
        length = self.length - offset if length is None else length
        return SGE(self.addr + offset, length, self.lkey)

    def dereg(self) -> None:
        """Deregister (``ibv_dereg_mr``): the keys stop resolving."""
        dev = self.pd.device
        dev._mrs_l.pop(self.lkey, None)
        dev._mrs_r.pop(self.rkey, None)


class CompletionQueue:
    """A completion queue; :meth:`wait` stands in for the completion channel."""

    def __init__(self, device: Device, cqe: int):
        if cqe < 1:
            raise VerbsError(errno.EINVAL, f"cqe must be >= 1; got {cqe}")
        self.device, self.cqe = device, cqe
        self._q: deque[WC] = deque()
        self._cond = threading.Condition(device.fabric.lock)
        self.overrun = False

    def _push(self, wc: WC) -> None:
        if len(self._q) >= self.cqe:
            self.overrun = True  # a real CQ overrun is an async error; we keep the entry
        self._q.append(wc)
        self._cond.notify_all()

    def poll(self, num_entries: int = 1) -> list[WC]:
        """Remove and return up to ``num_entries`` completions (``ibv_poll_cq``)."""
        with self.device.fabric.lock:
            n = min(num_entries, len(self._q))
            return [self._q.popleft() for _ in range(n)]

    def __len__(self):
        return len(self._q)

    def wait(self, timeout: float = 1.0) -> bool:
        """Block until the CQ holds a completion or ``timeout`` seconds pass."""
        fabric = self.device.fabric
        if fabric.mode == "manual":
            return fabric.run_until(lambda: len(self._q) > 0, timeout)
        deadline = time.monotonic() + timeout
        with self._cond:
            while not self._q:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._cond.wait(left)
            return True


@dataclass(slots=True)
class _SendWQE:
    index: int
    wr: SendWR
    length: int
    npkts: int
    first_psn: int = -1
    local_error: WCStatus | None = None
    resp_seg: int = 0
    resp_done: bool = False

    @property
    def needs_response(self) -> bool:
        return self.wr.opcode == Opcode.RDMA_READ or self.wr.opcode in _ATOMICS


@dataclass(slots=True)
class _RecvWQE:
    index: int
    wr: RecvWR
    capacity: int


@dataclass(slots=True)
class _Responder:
    epsn: int = 0
    nak_sent: bool = False
    write: tuple | None = None           # (mr, offset) of the message being written
    atomic_cache: dict = field(default_factory=dict)


class QueuePair:
    """An RC queue pair. Create with :meth:`ProtectionDomain.create_qp`; drive with :meth:`modify`.

    Attributes
    ----------
    qp_num : int
    state : QPState
    """

    def __init__(self, pd, send_cq, recv_cq, cap: QPCap, sq_sig_all: bool):
        self.pd, self.device = pd, pd.device
        self.send_cq, self.recv_cq, self.cap, self.sq_sig_all = send_cq, recv_cq, cap, sq_sig_all
        self.qp_num = next(self.device._qpns)
        self.state = QPState.RESET
        self.attrs: dict = {}
        self.device._qps[self.qp_num] = self
        self._reset()

    def __repr__(self):
        return f"QueuePair({self.device.name}:{self.qp_num:#x}, {self.state.name})"

    # ------------------------------------------------------------------ control verbs
    def _reset(self):
        self._sq: list[_SendWQE | None] = [None] * self.cap.max_send_wr
        self._rq: list[_RecvWQE | None] = [None] * self.cap.max_recv_wr
        self.sq_pi = self.sq_db = self.sq_ci = 0     # producer, doorbell, consumer indices
        self._sq_free = 0                            # slots below this index may be reused
        self.rq_pi = self.rq_ci = 0
        self._assigned = 0                           # WQEs with PSNs (<= sq_db)
        self._next_psn = self._una = self._tx = self._hi = 0
        self._cursor = 0
        self._deadline = self._rnr_until = None
        self._retries = self._rnr_count = 0
        self._resp = _Responder()
        self._dest_dev = self._dest_qpn = None

    def modify(self, state: QPState, **attrs) -> None:
        """Change state (``ibv_modify_qp``).

        INIT takes ``access`` (default all); RTR needs ``dest_dev`` (remote device name),
        ``dest_qp_num`` and optionally ``rq_psn``; RTS takes ``sq_psn``, ``timeout`` (exponent,
        default 14), ``retry_cnt`` (0-7, default 7) and ``rnr_retry`` (0-7, 7 = infinite).
        Any state may go to RESET or ERR. Other transitions raise ``EINVAL``.
        """
        state = QPState(state)
        with self.device.fabric.lock:
            if state == QPState.ERR:
                self._enter_error()
                return
            if state == QPState.RESET:
                self._reset()
                self.state = QPState.RESET
                return
            if (self.state, state) not in _ALLOWED:
                raise VerbsError(errno.EINVAL, f"invalid QP transition {self.state.name} -> "
                                               f"{state.name}")
            if state == QPState.RTR:
                if "dest_dev" not in attrs or "dest_qp_num" not in attrs:
                    raise VerbsError(errno.EINVAL, "RTR needs dest_dev and dest_qp_num")
                self._dest_dev = _dev_id(str(attrs["dest_dev"]))
                self._dest_qpn = int(attrs["dest_qp_num"])
                self._resp.epsn = int(attrs.get("rq_psn", 0))
            if state == QPState.RTS:
                retry_cnt, rnr_retry = attrs.get("retry_cnt", 7), attrs.get("rnr_retry", 7)
                if not (0 <= retry_cnt <= 7 and 0 <= rnr_retry <= 7):
                    raise VerbsError(errno.EINVAL, "retry_cnt and rnr_retry must be in [0, 7]")
                if self.state == QPState.RTR:
                    psn = int(attrs.get("sq_psn", 0))
                    self._next_psn = self._una = self._tx = self._hi = psn
            self.attrs.update(attrs)
            self.state = state

    @property
    def ack_timeout(self) -> float:
        """Local ACK timeout in seconds."""
        return ack_timeout_seconds(self.attrs.get("timeout", 14))

    # ------------------------------------------------------------------ data verbs
    def post_send(self, wrs, ring: bool = True) -> None:
        """Write send WQEs into the ring (``ibv_post_send``); ``ring=False`` holds the doorbell.

        Raises
        ------
        VerbsError
            ``EINVAL`` if the QP is not in RTS or a WR is malformed (too many SGEs, message over
            ``max_msg_sz``, atomic not 8 bytes); ``ENOMEM`` if the send queue is full.
        """
        wrs = [wrs] if isinstance(wrs, SendWR) else list(wrs)
        dev = self.device
        with dev.fabric.lock:
            if self.state != QPState.RTS:
                raise VerbsError(errno.EINVAL, f"post_send on a QP in {self.state.name} "
                                               "(needs RTS)")
            if self.sq_pi - self._sq_free + len(wrs) > self.cap.max_send_wr:
                raise VerbsError(errno.ENOMEM, f"send queue full ({self.cap.max_send_wr} WQEs)")
            for wr in wrs:
                if not isinstance(wr, SendWR):
                    raise TypeError(f"post_send takes SendWR objects; got {type(wr).__name__}")
                opcode = Opcode(wr.opcode)
                if len(wr.sg_list) > self.cap.max_send_sge:
                    raise VerbsError(errno.EINVAL, f"{len(wr.sg_list)} SGEs > max_send_sge="
                                                   f"{self.cap.max_send_sge}")
                length = sum(s.length for s in wr.sg_list)
                if length > dev.max_msg_sz:
                    raise VerbsError(errno.EINVAL, f"message of {length} bytes > max_msg_sz="
                                                   f"{dev.max_msg_sz}")
                if opcode in _ATOMICS and (length != 8 or len(wr.sg_list) != 1):
                    raise VerbsError(errno.EINVAL, "atomic WRs need exactly one 8-byte SGE")
            for wr in wrs:
                wr = replace(wr, opcode=Opcode(wr.opcode), sg_list=tuple(wr.sg_list))
                length = sum(s.length for s in wr.sg_list)
                npkts = 1 if wr.opcode == Opcode.RDMA_READ or wr.opcode in _ATOMICS else \
                    max(1, -(-length // dev.mtu))
                self._sq[self.sq_pi % self.cap.max_send_wr] = _SendWQE(self.sq_pi, wr, length,
                                                                       npkts)
                self.sq_pi += 1
            if ring:
                self.ring_doorbell()

    def ring_doorbell(self, upto: int | None = None) -> None:
        """Tell the NIC that WQEs up to producer index ``upto`` (default: all) are valid."""
        with self.device.fabric.lock:
            upto = self.sq_pi if upto is None else int(upto)
            if not self.sq_db <= upto <= self.sq_pi:
                raise ValueError(f"upto must be in [{self.sq_db}, {self.sq_pi}]; got {upto}")
            self.sq_db = upto
        self.device.fabric.kick()

    def post_recv(self, wrs) -> None:
        """Post receive WQEs (``ibv_post_recv``): allowed in INIT, RTR and RTS."""
        wrs = [wrs] if isinstance(wrs, RecvWR) else list(wrs)
        with self.device.fabric.lock:
            if self.state not in (QPState.INIT, QPState.RTR, QPState.RTS):
                raise VerbsError(errno.EINVAL, f"post_recv on a QP in {self.state.name}")
            if self.rq_pi - self.rq_ci + len(wrs) > self.cap.max_recv_wr:
                raise VerbsError(errno.ENOMEM, f"receive queue full ({self.cap.max_recv_wr})")
            for wr in wrs:
                if not isinstance(wr, RecvWR):
                    raise TypeError(f"post_recv takes RecvWR objects; got {type(wr).__name__}")
                if len(wr.sg_list) > self.cap.max_recv_sge:
                    raise VerbsError(errno.EINVAL, f"{len(wr.sg_list)} SGEs > max_recv_sge="
                                                   f"{self.cap.max_recv_sge}")
            for wr in wrs:
                wr = replace(wr, sg_list=tuple(wr.sg_list))
                cap = sum(s.length for s in wr.sg_list)
                self._rq[self.rq_pi % self.cap.max_recv_wr] = _RecvWQE(self.rq_pi, wr, cap)
                self.rq_pi += 1

    def send_queue(self) -> list[tuple[int, SendWR]]:
        """Read back the outstanding send WQEs ``(index, wr)`` from the ring, oldest first."""
        with self.device.fabric.lock:
            n = self.cap.max_send_wr
            return [(i, self._sq[i % n].wr) for i in range(self.sq_ci, self.sq_pi)]

    def read_send_wqe(self, index: int) -> SendWR | None:
        """The WR stored at producer index ``index`` of the send ring, even after completion or
        flush, while its slot has not been reused (None otherwise)."""
        with self.device.fabric.lock:
            wqe = self._sq[index % self.cap.max_send_wr]
            return wqe.wr if wqe is not None and wqe.index == index else None

    def read_recv_wqe(self, index: int) -> RecvWR | None:
        """Same as :meth:`read_send_wqe` for the receive ring."""
        with self.device.fabric.lock:
            wqe = self._rq[index % self.cap.max_recv_wr]
            return wqe.wr if wqe is not None and wqe.index == index else None

    def recv_queue(self) -> list[tuple[int, RecvWR]]:
        """Read back the posted, not yet consumed receive WQEs ``(index, wr)``."""
        with self.device.fabric.lock:
            n = self.cap.max_recv_wr
            return [(i, self._rq[i % n].wr) for i in range(self.rq_ci, self.rq_pi)]

    # ------------------------------------------------------------------ memory helpers
    def _local(self, sge: SGE, need: Access):
        return self.device._resolve(self.device._mrs_l, sge.lkey, sge.addr, sge.length, need)

    def _gather(self, sges, offset: int, n: int) -> bytes:
        parts = []
        for sge in sges:
            if n <= 0:
                break
            if offset >= sge.length:
                offset -= sge.length
                continue
            mr, off = self._local(sge, Access(0))
            take = min(n, sge.length - offset)
            parts.append(mr.buf[off + offset:off + offset + take].tobytes())
            n -= take
            offset = 0
        return b"".join(parts)

    def _scatter(self, sges, offset: int, data: bytes) -> bool:
        view = np.frombuffer(data, dtype=np.uint8)
        pos = 0
        for sge in sges:
            if pos >= len(view):
                break
            if offset >= sge.length:
                offset -= sge.length
                continue
            loc = self._local(sge, Access.LOCAL_WRITE)
            if loc is None:
                return False
            mr, off = loc
            take = min(len(view) - pos, sge.length - offset)
            mr.buf[off + offset:off + offset + take] = view[pos:pos + take]
            pos += take
            offset = 0
        return True

    # ------------------------------------------------------------------ requester
    def _wqe(self, index: int) -> _SendWQE:
        return self._sq[index % self.cap.max_send_wr]

    def _progress(self, now: float) -> bool:
        if self.state != QPState.RTS:
            return False
        worked = False
        while self._assigned < self.sq_db:  # the NIC fetches doorbelled WQEs and numbers them
            wqe = self._wqe(self._assigned)
            need = Access(0) if wqe.wr.opcode in (Opcode.RDMA_WRITE, Opcode.RDMA_WRITE_WITH_IMM,
                                                  Opcode.SEND, Opcode.SEND_WITH_IMM) \
                else Access.LOCAL_WRITE
            if any(self._local(s, need) is None for s in wqe.wr.sg_list):
                wqe.local_error = WCStatus.LOC_PROT_ERR
            wqe.first_psn = self._next_psn
            self._next_psn += wqe.npkts
            self._assigned += 1
            worked = True
        if self._deadline is not None and self._una >= self._tx:
            self._deadline = None  # nothing in flight (e.g. after a go-back): timer disarmed
        if self._deadline is not None and now >= self._deadline:
            self._retries += 1
            if self._retries > self.attrs.get("retry_cnt", 7):
                self._fail(self._wqe_at(self._una), WCStatus.RETRY_EXC_ERR)
                return True
            self._go_back(self._una)
            self._deadline = now + self.ack_timeout
            worked = True
        if self._rnr_until is not None:
            if now < self._rnr_until:
                return worked
            self._rnr_until = None
        sent = 0
        while self._tx < self._next_psn and self._tx - self._una < _WINDOW and \
                sent < _MAX_TX_PER_STEP:
            wqe = self._wqe_at(self._tx)
            if wqe.local_error is not None:
                if self._una == wqe.first_psn:
                    self._fail(wqe, wqe.local_error)
                    return True
                break
            self.device._send(self._build(wqe, self._tx - wqe.first_psn))
            self._tx += 1
            self._hi = max(self._hi, self._tx)
            sent += 1
            if self._deadline is None:
                self._deadline = now + self.ack_timeout
        return worked or sent > 0

    def _wqe_at(self, psn: int) -> _SendWQE:
        i = max(self._cursor, self.sq_ci)
        wqe = self._wqe(i)
        if psn < wqe.first_psn:
            i = self.sq_ci
        while True:
            wqe = self._wqe(i)
            if wqe.first_psn <= psn < wqe.first_psn + wqe.npkts:
                self._cursor = i
                return wqe
            i += 1

    def _go_back(self, psn: int) -> None:
        self._tx = psn
        self._cursor = self.sq_ci

    def _build(self, wqe: _SendWQE, seg: int) -> Packet:
        wr, mtu = wqe.wr, self.device.mtu
        flags = (FLAG_FIRST if seg == 0 else 0) | (FLAG_LAST if seg == wqe.npkts - 1 else 0)
        pkt = Packet(KIND_REQ, int(wr.opcode), flags, 0, self.device.id, self._dest_dev,
                     self.qp_num, self._dest_qpn, wqe.first_psn + seg, seg, wr.remote_addr,
                     wr.rkey, wqe.length, wr.imm_data, wr.compare_add, wr.swap)
        if wr.opcode == Opcode.RDMA_READ:
            wqe.resp_seg = 0
        elif wr.opcode not in _ATOMICS:
            pkt.payload = self._gather(wr.sg_list, seg * mtu, min(mtu, wqe.length - seg * mtu))
        return pkt

    def _ack(self, psn: int, now: float) -> None:
        """Cumulative acknowledgement of every PSN <= ``psn``."""
        if psn < self._una or psn >= self._hi:
            return
        new_una = psn + 1
        i = self.sq_ci
        while i < self._assigned:  # an ACK past a READ/atomic whose response was lost
            wqe = self._wqe(i)
            if wqe.first_psn >= new_una:
                break
            if wqe.needs_response and not wqe.resp_done:
                new_una = wqe.first_psn
                self._go_back(new_una)
                break
            i += 1
        if new_una > self._una:
            self._una = new_una
            self._retries = 0
            if self._tx < self._una:
                self._go_back(self._una)
        self._deadline = now + self.ack_timeout if self._una < self._tx else None
        self._complete_ready()

    def _complete_ready(self) -> None:
        while self.sq_ci < self._assigned:
            wqe = self._wqe(self.sq_ci)
            if wqe.first_psn + wqe.npkts > self._una or (wqe.needs_response and
                                                        not wqe.resp_done):
                return
            if wqe.wr.signaled or self.sq_sig_all:
                self.send_cq._push(WC(wqe.wr.wr_id, WCStatus.SUCCESS, _WC_OF[wqe.wr.opcode],
                                      self.qp_num, wqe.length, None, wqe.index))
                self._sq_free = wqe.index + 1
            self.sq_ci += 1

    def _fail(self, wqe: _SendWQE, status: WCStatus) -> None:
        self.send_cq._push(WC(wqe.wr.wr_id, status, _WC_OF[wqe.wr.opcode], self.qp_num, 0, None,
                              wqe.index))
        self.sq_ci = wqe.index + 1
        self._enter_error()

    def _enter_error(self) -> None:
        """Move to ERR and flush every outstanding WQE with ``WR_FLUSH_ERR``."""
        n = self.cap.max_send_wr
        for i in range(self.sq_ci, self.sq_pi):
            wqe = self._sq[i % n]
            self.send_cq._push(WC(wqe.wr.wr_id, WCStatus.WR_FLUSH_ERR, _WC_OF[wqe.wr.opcode],
                                  self.qp_num, 0, None, i))
        for i in range(self.rq_ci, self.rq_pi):
            rwqe = self._rq[i % self.cap.max_recv_wr]
            self.recv_cq._push(WC(rwqe.wr.wr_id, WCStatus.WR_FLUSH_ERR, WCOpcode.RECV,
                                  self.qp_num, 0, None, i))
        self.sq_ci = self.sq_db = self._assigned = self._sq_free = self.sq_pi
        self.rq_ci = self.rq_pi
        self._deadline = self._rnr_until = None
        self.state = QPState.ERR

    # ------------------------------------------------------------------ packets in
    def _on_packet(self, pkt: Packet, now: float) -> None:
        if pkt.kind == KIND_REQ:
            if self.state in (QPState.RTR, QPState.RTS):
                self._on_request(pkt)
            return
        if self.state != QPState.RTS:
            return
        if pkt.kind == KIND_ACK:
            self._ack(pkt.psn, now)
        elif pkt.kind == KIND_NAK:
            self._on_nak(pkt, now)
        elif pkt.kind in (KIND_READ_RESP, KIND_ATOMIC_RESP):
            self._on_response(pkt, now)

    def _on_nak(self, pkt: Packet, now: float) -> None:
        psn = pkt.psn
        if psn < self._una or psn >= self._hi:
            return
        self._ack(psn - 1, now)
        if pkt.code == NAK_SEQ:
            self._go_back(psn)
        elif pkt.code == NAK_RNR:
            self._rnr_count += 1
            rnr_retry = self.attrs.get("rnr_retry", 7)
            if rnr_retry != 7 and self._rnr_count > rnr_retry:
                self._fail(self._wqe_at(psn), WCStatus.RNR_RETRY_EXC_ERR)
                return
            self._go_back(psn)
            self._rnr_until = now + _RNR_TIMER
        else:
            status = WCStatus.REM_ACCESS_ERR if pkt.code == NAK_REM_ACCESS \
                else WCStatus.REM_INV_REQ_ERR
            self._fail(self._wqe_at(psn), status)

    def _on_response(self, pkt: Packet, now: float) -> None:
        if not self._una <= pkt.psn < self._hi:
            return
        # responses imply that every earlier PSN executed; they are accepted in order only
        # (a gap means an earlier response was lost: wait for the retransmission)
        self._ack(pkt.psn - 1, now)
        if pkt.psn != self._una:
            return
        wqe = self._wqe_at(pkt.psn)
        if not wqe.needs_response or wqe.resp_done:
            return
        if pkt.kind == KIND_ATOMIC_RESP:
            self._scatter(wqe.wr.sg_list, 0, int(pkt.a).to_bytes(8, "little"))
            wqe.resp_done = True
        elif pkt.seg == wqe.resp_seg:
            if not self._scatter(wqe.wr.sg_list, pkt.seg * self.device.mtu, pkt.payload):
                self._fail(wqe, WCStatus.LOC_PROT_ERR)
                return
            wqe.resp_seg += 1
            wqe.resp_done = bool(pkt.flags & FLAG_LAST)
        if wqe.resp_done:
            self._ack(pkt.psn, now)

    # ------------------------------------------------------------------ responder
    def _reply(self, kind: int, psn: int, code: int = 0, **fields) -> None:
        self.device._send(Packet(kind, 0, fields.pop("flags", 0), code, self.device.id,
                                 self._dest_dev, self.qp_num, self._dest_qpn, psn, **fields))

    def _on_request(self, pkt: Packet) -> None:
        resp, op = self._resp, Opcode(pkt.opcode)
        if pkt.psn < resp.epsn:  # duplicate: re-ACK, re-read, or answer an atomic from cache
            if op == Opcode.RDMA_READ:
                self._execute_read(pkt)
            elif op in _ATOMICS:
                if pkt.psn in resp.atomic_cache:
                    self._reply(KIND_ATOMIC_RESP, pkt.psn, a=resp.atomic_cache[pkt.psn])
            else:
                self._reply(KIND_ACK, resp.epsn - 1)
            return
        if pkt.psn > resp.epsn:
            if not resp.nak_sent:
                resp.nak_sent = True
                self._reply(KIND_NAK, resp.epsn, NAK_SEQ)
            return
        resp.nak_sent = False
        last = bool(pkt.flags & FLAG_LAST)
        dev = self.device
        if op in (Opcode.RDMA_WRITE, Opcode.RDMA_WRITE_WITH_IMM):
            if pkt.flags & FLAG_FIRST:  # zero-length writes carry no rkey to check (IB spec)
                resp.write = (None, 0) if pkt.total_len == 0 else dev._resolve(
                    dev._mrs_r, pkt.rkey, pkt.raddr, pkt.total_len, Access.REMOTE_WRITE)
            if resp.write is None:
                self._reply(KIND_NAK, pkt.psn, NAK_REM_ACCESS)
                return
            mr, off = resp.write
            if pkt.payload:
                start = off + pkt.seg * dev.mtu
                mr.buf[start:start + len(pkt.payload)] = np.frombuffer(pkt.payload, np.uint8)
            if last and op == Opcode.RDMA_WRITE_WITH_IMM:
                if self.rq_ci == self.rq_pi:
                    self._reply(KIND_NAK, pkt.psn, NAK_RNR)
                    return
                rwqe = self._rq[self.rq_ci % self.cap.max_recv_wr]
                self.rq_ci += 1
                self.recv_cq._push(WC(rwqe.wr.wr_id, WCStatus.SUCCESS,
                                      WCOpcode.RECV_RDMA_WITH_IMM, self.qp_num, pkt.total_len,
                                      pkt.imm, rwqe.index))
        elif op in (Opcode.SEND, Opcode.SEND_WITH_IMM):
            if self.rq_ci == self.rq_pi:
                self._reply(KIND_NAK, pkt.psn, NAK_RNR)
                return
            rwqe = self._rq[self.rq_ci % self.cap.max_recv_wr]
            if pkt.total_len > rwqe.capacity or not self._scatter(
                    rwqe.wr.sg_list, pkt.seg * dev.mtu, pkt.payload):
                self.rq_ci += 1
                status = WCStatus.LOC_LEN_ERR if pkt.total_len > rwqe.capacity \
                    else WCStatus.LOC_PROT_ERR
                self.recv_cq._push(WC(rwqe.wr.wr_id, status, WCOpcode.RECV, self.qp_num, 0, None,
                                      rwqe.index))
                self._reply(KIND_NAK, pkt.psn, NAK_INV_REQ)
                self._enter_error()
                return
            if last:
                self.rq_ci += 1
                imm = pkt.imm if op == Opcode.SEND_WITH_IMM else None
                self.recv_cq._push(WC(rwqe.wr.wr_id, WCStatus.SUCCESS, WCOpcode.RECV,
                                      self.qp_num, pkt.total_len, imm, rwqe.index))
        elif op == Opcode.RDMA_READ:
            if not self._execute_read(pkt):
                return
        else:
            loc = dev._resolve(dev._mrs_r, pkt.rkey, pkt.raddr, 8, Access.REMOTE_ATOMIC)
            if loc is None or pkt.raddr % 8:
                self._reply(KIND_NAK, pkt.psn, NAK_REM_ACCESS if loc is None else NAK_INV_REQ)
                return
            mr, off = loc
            word = mr.buf[off:off + 8].view(np.uint64)
            old = int(word[0])
            if op == Opcode.ATOMIC_FETCH_AND_ADD:
                word[0] = np.uint64((old + pkt.a) & 0xFFFFFFFFFFFFFFFF)
            elif old == pkt.a:
                word[0] = np.uint64(pkt.b)
            resp.atomic_cache[pkt.psn] = old
            if len(resp.atomic_cache) > 64:
                resp.atomic_cache.pop(min(resp.atomic_cache))
            self._reply(KIND_ATOMIC_RESP, pkt.psn, a=old)
        resp.epsn += 1
        if op != Opcode.RDMA_READ and op not in _ATOMICS and (last or pkt.psn % _ACK_EVERY == 0):
            self._reply(KIND_ACK, pkt.psn)

    def _execute_read(self, pkt: Packet) -> bool:
        dev = self.device
        loc = dev._resolve(dev._mrs_r, pkt.rkey, pkt.raddr, pkt.total_len, Access.REMOTE_READ)
        if loc is None:
            self._reply(KIND_NAK, pkt.psn, NAK_REM_ACCESS)
            return False
        mr, off = loc
        n, mtu = pkt.total_len, dev.mtu
        nseg = max(1, -(-n // mtu))
        for seg in range(nseg):
            data = mr.buf[off + seg * mtu:off + min(n, (seg + 1) * mtu)].tobytes()
            self._reply(KIND_READ_RESP, pkt.psn, seg=seg, payload=data,
                        flags=FLAG_LAST if seg == nseg - 1 else 0)
        return True


def bring_up(qp: QueuePair, dest: QueuePair | tuple[str, int], **rts) -> None:
    """Drive ``qp`` RESET -> INIT -> RTR -> RTS towards ``dest`` (a QP or ``(device, qpn)``).

    ``rts`` holds RTS attributes (``timeout``, ``retry_cnt``, ``rnr_retry``); PSNs start at 0.
    """
    dest_dev, dest_qpn = (dest.device.name, dest.qp_num) if isinstance(dest, QueuePair) else dest
    if qp.state != QPState.RESET:
        qp.modify(QPState.RESET)
    qp.modify(QPState.INIT, access=Access.ALL)
    qp.modify(QPState.RTR, dest_dev=dest_dev, dest_qp_num=dest_qpn, rq_psn=0)
    qp.modify(QPState.RTS, sq_psn=0, **rts)
