"""SHIFT: cross-NIC failover for RC queue pairs, over the emulated verbs (:mod:`.verbs`).

Every application QP (:class:`ShiftQP`, same API as :class:`~.verbs.QueuePair`) is paired with a
**backup QP on another NIC**, on both hosts. The fast path posts to the default QP unchanged and
keeps no copy of the WRs: the default QP's work-queue ring is read back on failure.

Failover (send-queue states S1 Default -> S2 Fallback), on an error completion or a failed post:

1. *safety check*: if an atomic is among the outstanding WQEs, give up and surface the error
   (re-executing FETCH_AND_ADD / CMP_AND_SWP is not idempotent);
2. *drain* the default CQ: successful completions are handed to the application, everything after
   the last success is outstanding;
3. *receiver-progress correction*: both sides exchange their **receive counters** (application
   RECVs consumed) with a WRITE_WITH_IMM handshake on the backup QPs (HELLO, answered by ACK; two
   HELLOs crossing count as each other's ACK). Outstanding sends are trimmed up to the last
   two-sided WR the peer already received, so SEND / WRITE_WITH_IMM notifications stay exactly-once
   and in order and a delivered notification's data is never rewritten;
4. outstanding RECVs are reposted on the backup QP *before* the peer is told to send (no RNR);
   the remaining send WQEs are copied to the backup QP with keys remapped through the
   out-of-band :class:`KVStore` (default lkey/rkey -> backup lkey/rkey);
5. the default QP is reset through the recorded control-verb sequence and probed.

Switch-back (S2 -> S3 WaitSignaled -> S4 WaitDrained -> S1): one side of the connection probes
the default path, the one whose (default NIC, QP number) is smaller; the other follows when the
prober's switch-back notification arrives. (Two independent probers race: one side's probe can
succeed while the other's, sent before the link came back, exhausts its retries; that side then
resets its default QP to PSN 0 and the first side's next packet, at PSN 1, is refused as out of
sequence.) When the zero-length WRITE probe on the default QP succeeds, a signaled fence WR is
posted on the backup QP (SHIFT's own, so an idle application cannot stall the switch); a
WRITE_WITH_IMM notification is posted on the default QP and later application WRs queue behind it
**without a doorbell**; when the fence completes the doorbell is rung up to the notification, and
when the notification completes, for the rest. The peer, on that notification, moves its
outstanding RECVs back to the default QP and switches its own sends back the same way (fence,
notification). Once both directions are back, each side resets its backup QP (re-arm: fresh
PSNs, a control RECV at the head of its receive queue) so that the next failover's handshake
finds it clean.

Not masked (a second fault inside the recovery window, which the protocol of the paper does not
cover): a fault on the default path while a switch-back is under way (the notification's fate is
then ambiguous: the peer may already have moved its RECVs back), the backup failing, or the default
path failing again before the backup has been re-armed (its control RECV is used up and its RECV
queue may hold stale entries, so a second handshake there could be lost or, worse, consume an
application RECV). In every such case the QP surfaces the error: an error completion on the send
CQ, ``WR_FLUSH_ERR`` for every outstanding send **and receive**, both inner QPs to ERR, so that
both the sending and the receiving application notice at once instead of waiting.
:attr:`ShiftQP.settled` says whether a QP is outside that window.

Semantics given up (the trilemma, see :mod:`.trilemma`): data WRITEs after the last delivered
notification may be executed twice (at-least-once); this is safe for protocols that read data only
after the notification covering it (NCCL Simple), not for flag-in-data protocols (NCCL LL/LL128).

Reference: "SHIFT: Exploring the Boundary of RDMA Network Fault Tolerance" (arXiv 2512.11094), §3-4.
Emulated: the NICs are :mod:`.verbs` software devices.
"""

from __future__ import annotations

import enum
import errno
import threading
import time
from collections import deque
from dataclasses import replace

from causalkit.systems.rdma.verbs import (
    SGE,
    WC,
    Access,
    Device,
    Opcode,
    QPCap,
    QPState,
    RecvWR,
    SendWR,
    VerbsError,
    WCOpcode,
    WCStatus,
    bring_up,
)

__all__ = ["KVStore", "ShiftEndpoint", "ShiftQP", "ShiftCQ", "ShiftMR", "SendState", "RecvState"]

_TWO_SIDED = (Opcode.SEND, Opcode.SEND_WITH_IMM, Opcode.RDMA_WRITE_WITH_IMM)
_ATOMICS = (Opcode.ATOMIC_CMP_AND_SWP, Opcode.ATOMIC_FETCH_AND_ADD)
# Internal work requests carry negative wr_ids; application wr_ids must be >= 0.
_WR_HANDSHAKE, _WR_PROBE, _WR_NOTIFY, _WR_FENCE, _WR_CTRL_RECV = -1, -2, -3, -4, -5
_HELLO, _ACK, _SWITCH = 1 << 31, 1 << 30, 3 << 30
_TAG_MASK, _CTR_MASK = 3 << 30, (1 << 30) - 1


class SendState(enum.Enum):
    """Send-queue state of a :class:`ShiftQP` (S1-S4 of the protocol, plus two transients)."""

    DEFAULT = "S1"
    AWAIT_ACK = "S2-handshake"
    FALLBACK = "S2"
    WAIT_SIGNALED = "S3"
    WAIT_DRAINED = "S4"
    FAILED = "error"


class RecvState(enum.Enum):
    """Receive-queue state (R1 default, R2 fallback)."""

    DEFAULT = "R1"
    FALLBACK = "R2"


class KVStore:
    """Thread-safe key-value store standing in for the out-of-band store (Redis in the paper)."""

    def __init__(self):
        self._d: dict = {}
        self._lock = threading.Lock()

    def put(self, key, value) -> None:
        with self._lock:
            self._d[key] = value

    def get(self, key, default=None):
        with self._lock:
            return self._d.get(key, default)


class ShiftMR:
    """A memory region registered on both NICs; the application sees the default NIC's keys."""

    def __init__(self, default, backup):
        self.default, self.backup = default, backup
        self.addr, self.length = default.addr, default.length
        self.lkey, self.rkey, self.buf = default.lkey, default.rkey, default.buf

    def sge(self, offset: int = 0, length: int | None = None) -> SGE:
        """An SGE under the default lkey (see :meth:`.verbs.MemoryRegion.sge`)."""
        return self.default.sge(offset, length)


class ShiftCQ:
    """Completion queue seen by the application; fed by the ShiftQPs attached to it."""

    def __init__(self, endpoint: ShiftEndpoint, cqe: int):
        self.endpoint, self.cqe = endpoint, cqe
        self._q: deque[WC] = deque()

    def poll(self, num_entries: int = 1) -> list[WC]:
        """Pump the attached ShiftQPs, then return up to ``num_entries`` completions."""
        with self.endpoint.fabric.lock:
            self.endpoint.pump()
            n = min(num_entries, len(self._q))
            return [self._q.popleft() for _ in range(n)]

    def __len__(self):
        return len(self._q)

    def wait(self, timeout: float = 1.0) -> bool:
        """Block until a completion is available or ``timeout`` seconds pass."""
        fabric = self.endpoint.fabric
        deadline = time.monotonic() + timeout
        with fabric._wake:
            while True:
                self.endpoint.pump()
                if self._q:
                    return True
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                fabric._wake.wait(min(left, 1e-3))


class ShiftEndpoint:
    """One host's SHIFT library instance: a default and a backup NIC, shadow resources, and the
    background thread (handshakes, probes, switch-back).

    Parameters
    ----------
    default, backup : Device
        Two emulated NICs of this host, in the same threaded
        ``causalkit.systems.rdma.verbs.Fabric``.
    kv : KVStore
        Out-of-band store shared with the peers.
    probe_interval : float
        Seconds between probes of a failed default QP.
    handshake_timeout : float
        Seconds to wait for the peer's handshake before surfacing the error.
    """

    def __init__(self, default: Device, backup: Device, kv: KVStore, *,
                 probe_interval: float = 0.02, handshake_timeout: float = 5.0):
        if default.fabric is not backup.fabric:
            raise ValueError("default and backup devices must belong to the same Fabric")
        if default is backup:
            raise ValueError("the backup NIC must differ from the default NIC")
        self.default, self.backup, self.kv = default, backup, kv
        self.fabric = default.fabric
        self.probe_interval, self.handshake_timeout = probe_interval, handshake_timeout
        self.poll_interval = 1e-3
        self.pd_default, self.pd_backup = default.alloc_pd(), backup.alloc_pd()
        self._lkeys: dict[int, int] = {}
        self.qps: list[ShiftQP] = []
        self._thread = None
        self._stop = threading.Event()

    def reg_mr(self, buffer, access: Access = Access.ALL) -> ShiftMR:
        """Register ``buffer`` on both NICs and publish ``default rkey -> backup rkey``."""
        d = self.pd_default.reg_mr(buffer, access)
        b = self.pd_backup.reg_mr(buffer, access)
        self._lkeys[d.lkey] = b.lkey
        self.kv.put(("mr", self.default.name, d.rkey), b.rkey)
        return ShiftMR(d, b)

    def create_cq(self, cqe: int = 1024) -> ShiftCQ:
        """A completion queue for :class:`ShiftQP` objects."""
        return ShiftCQ(self, cqe)

    def create_qp(self, send_cq: ShiftCQ, recv_cq: ShiftCQ,
                  cap: QPCap | None = None) -> ShiftQP:
        """Create a default QP and its backup QP (in RESET)."""
        qp = ShiftQP(self, send_cq, recv_cq, QPCap() if cap is None else cap)
        self.qps.append(qp)
        return qp

    def pump(self) -> None:
        """Process pending completions and timers of every QP (called by polls and the thread)."""
        with self.fabric.lock:
            now = time.monotonic()
            for qp in self.qps:
                qp._pump(now)

    def start(self) -> ShiftEndpoint:
        """Start the background thread."""
        if self._thread is None:
            self._stop.clear()
            self._thread = threading.Thread(target=self._loop, name="shift-bg", daemon=True)
            self._thread.start()
        return self

    def stop(self) -> None:
        """Stop the background thread."""
        if self._thread is not None:
            self._stop.set()
            self._thread.join()
            self._thread = None

    def _loop(self) -> None:
        # a timed loop, not a wake-up per engine step: the application's polls pump the fast
        # path themselves; this thread only has to make progress when the application does not
        # poll (handshakes, probes, switch-back)
        while not self._stop.wait(self.poll_interval):
            self.pump()


class ShiftQP:
    """A QP with the ``causalkit.systems.rdma.verbs.QueuePair`` API that survives the loss of its
    NIC.

    Attributes
    ----------
    sq_state : SendState
    rq_state : RecvState
    events : list of dict
        One entry per failover / switch-back with timestamps (``time.monotonic`` seconds),
        numbers of replayed and trimmed WRs, the role in a failover (initiator or responder)
        and what started a switch-back (``"probe"``: this side's probe; ``"peer"``: the peer's
        switch-back notification).
    """

    def __init__(self, ep: ShiftEndpoint, send_cq: ShiftCQ, recv_cq: ShiftCQ, cap: QPCap):
        self.ep, self.send_cq, self.recv_cq, self.cap = ep, send_cq, recv_cq, cap
        self._cq = {"d": ep.default.create_cq(4 * cap.max_send_wr + 4 * cap.max_recv_wr),
                    "b": ep.backup.create_cq(4 * cap.max_send_wr + 4 * cap.max_recv_wr)}
        inner = replace(cap, max_recv_wr=cap.max_recv_wr + 2, max_send_wr=cap.max_send_wr + 4)
        self._qp = {"d": ep.pd_default.create_qp(self._cq["d"], self._cq["d"], inner),
                    "b": ep.pd_backup.create_qp(self._cq["b"], self._cq["b"], inner)}
        self.qp_num = self._qp["d"].qp_num
        ep.kv.put(("qp", ep.default.name, self.qp_num), (ep.backup.name, self._qp["b"].qp_num))
        self.sq_state, self.rq_state = SendState.DEFAULT, RecvState.DEFAULT
        self.events: list[dict] = []
        self._attrs: dict = {}
        self._backup_ready = False
        self._backup_fresh = False           # re-armed and not yet used by a failover
        self._sq_done = {"d": 0, "b": 0}     # per QP: send WQEs below this index are completed
        self._rq_done = {"d": 0, "b": 0}     # per QP: recv WQEs below this index are consumed
        self._internal_rq = {"d": set(), "b": set()}
        self._recv_origin: dict[tuple[str, int], RecvWR] = {}
        self.sends_done = 0                  # two-sided WRs known delivered (cumulative)
        self.recvs_done = 0                  # application RECVs consumed (cumulative)
        self._held: list[SendWR] = []
        self._pending_replay: list[SendWR] = []
        self._handshake_deadline = None
        self._next_probe = None
        self._probe_inflight = False
        self._notify_index = None
        self._fail_wc: WC | None = None
        self._event: dict | None = None

    # ------------------------------------------------------------------ control verbs
    @property
    def state(self) -> QPState:
        """RTS while traffic flows on either NIC, ERR once an error was surfaced."""
        if self.sq_state == SendState.FAILED:
            return QPState.ERR
        if self.sq_state == SendState.DEFAULT:
            return self._qp["d"].state
        return QPState.RTS

    @property
    def settled(self) -> bool:
        """Whether no recovery step is pending, i.e. a new fault would meet a QP SHIFT protects:
        either S1/R1 with a freshly armed backup QP, or S2/R2 on the backup with no probe of the
        default QP in flight. False during a handshake, a probe, a switch-back, before the backup
        is re-armed, and after an error was surfaced."""
        with self.ep.fabric.lock:
            if self.sq_state == SendState.DEFAULT:
                return self.rq_state == RecvState.DEFAULT and self._backup_fresh and \
                    not self._cq["d"]._q and not self._cq["b"]._q
            return self.sq_state == SendState.FALLBACK and \
                self.rq_state == RecvState.FALLBACK and not self._probe_inflight

    def modify(self, state: QPState, **attrs) -> None:
        """Apply to the default QP, record it, and shadow it on the backup QP (best effort:
        the backup is brought up as soon as the peer's backup QP is known in the KV store)."""
        state = QPState(state)
        with self.ep.fabric.lock:
            self._qp["d"].modify(state, **attrs)
            if state in (QPState.RESET, QPState.ERR):
                self._qp["b"].modify(state)
                self._attrs, self._backup_ready = {}, False
                return
            self._attrs[state] = dict(attrs)
            self._sync_backup()

    def _sync_backup(self) -> None:
        if self._backup_ready or QPState.RTS not in self._attrs:
            return
        rtr = self._attrs[QPState.RTR]
        peer = self.ep.kv.get(("qp", rtr["dest_dev"], rtr["dest_qp_num"]))
        if peer is None:
            return
        bring_up(self._qp["b"], peer, **self._rts_attrs())
        self._post_ctrl_recv("b")
        self._backup_ready = self._backup_fresh = True

    def _rts_attrs(self) -> dict:
        rts = self._attrs.get(QPState.RTS, {})
        return {k: v for k, v in rts.items() if k in ("timeout", "retry_cnt", "rnr_retry")}

    def _post_ctrl_recv(self, which: str) -> None:
        qp = self._qp[which]
        self._internal_rq[which].add(qp.rq_pi)
        qp.post_recv(RecvWR(_WR_CTRL_RECV))

    # ------------------------------------------------------------------ data verbs
    def post_send(self, wrs, ring: bool = True) -> None:
        """Post send WRs on the NIC currently in use (see the module docstring)."""
        wrs = [wrs] if isinstance(wrs, SendWR) else list(wrs)
        for wr in wrs:
            if not isinstance(wr, SendWR):
                raise TypeError(f"post_send takes SendWR objects; got {type(wr).__name__}")
            if wr.wr_id < 0:
                raise ValueError(f"wr_id must be >= 0 (negative ids are reserved); got {wr.wr_id}")
        with self.ep.fabric.lock:
            st = self.sq_state
            if st == SendState.FAILED:
                raise VerbsError(errno.EINVAL, "post_send on a QP in ERR (failover failed)")
            if st == SendState.DEFAULT:
                qp = self._qp["d"]
                if qp.state == QPState.ERR:
                    self._begin_failover(time.monotonic(), None)
                    return self.post_send(wrs, ring)
                qp.post_send(wrs, ring)
            elif st == SendState.AWAIT_ACK:
                self._held.extend(wrs)
            elif st == SendState.WAIT_DRAINED:
                self._qp["d"].post_send(wrs, ring=False)
            else:  # FALLBACK, WAIT_SIGNALED
                self._qp["b"].post_send([self._remap(wr) for wr in wrs])

    def ring_doorbell(self, upto: int | None = None) -> None:
        """Ring the default QP's doorbell (meaningful in S1, where ``ring=False`` is honoured)."""
        with self.ep.fabric.lock:
            if self.sq_state == SendState.DEFAULT:
                self._qp["d"].ring_doorbell(upto)

    def post_recv(self, wrs) -> None:
        """Post receive WRs on the NIC currently receiving."""
        wrs = [wrs] if isinstance(wrs, RecvWR) else list(wrs)
        for wr in wrs:
            if not isinstance(wr, RecvWR):
                raise TypeError(f"post_recv takes RecvWR objects; got {type(wr).__name__}")
            if wr.wr_id < 0:
                raise ValueError(f"wr_id must be >= 0 (negative ids are reserved); got {wr.wr_id}")
        with self.ep.fabric.lock:
            if self.sq_state == SendState.FAILED:
                raise VerbsError(errno.EINVAL, "post_recv on a QP in ERR (failover failed)")
            if self.rq_state == RecvState.DEFAULT:
                self._qp["d"].post_recv(wrs)
            else:
                self._post_recv_backup(wrs)

    def _post_recv_backup(self, wrs) -> None:
        qp = self._qp["b"]
        for wr in wrs:
            self._recv_origin[("b", qp.rq_pi)] = wr
            qp.post_recv(RecvWR(wr.wr_id, tuple(self._remap_sge(s) for s in wr.sg_list)))

    def send_queue(self):
        """Outstanding send WQEs of the QP in use (read back from its ring)."""
        return self._qp["b" if self.sq_state in (SendState.FALLBACK, SendState.WAIT_SIGNALED)
                        else "d"].send_queue()

    def recv_queue(self):
        """Posted receive WQEs of the QP in use."""
        return self._qp["d" if self.rq_state == RecvState.DEFAULT else "b"].recv_queue()

    # ------------------------------------------------------------------ key remapping
    def _remap_sge(self, sge: SGE) -> SGE:
        return SGE(sge.addr, sge.length, self.ep._lkeys.get(sge.lkey, sge.lkey))

    def _remap(self, wr: SendWR) -> SendWR:
        rkey = wr.rkey
        if wr.opcode != Opcode.SEND and wr.opcode != Opcode.SEND_WITH_IMM:
            dest = self._attrs[QPState.RTR]["dest_dev"]
            rkey = self.ep.kv.get(("mr", dest, wr.rkey), wr.rkey)
        return replace(wr, sg_list=tuple(self._remap_sge(s) for s in wr.sg_list), rkey=rkey)

    # ------------------------------------------------------------------ completion processing
    def _deliver(self, wc: WC, which: str) -> None:
        wc = replace(wc, qp_num=self.qp_num)
        if wc.opcode in (WCOpcode.RECV, WCOpcode.RECV_RDMA_WITH_IMM):
            self.recvs_done += 1
            self._rq_done[which] = wc.wqe_index + 1
            self.recv_cq._q.append(wc)
        else:
            self._count_sends(which, wc.wqe_index + 1)
            self.send_cq._q.append(wc)
        ev = self._event
        if ev is not None and which == "b" and ev["event"] == "failover" and \
                "t_first_success" not in ev:
            ev["t_first_success"] = time.monotonic()

    def _count_sends(self, which: str, upto: int) -> None:
        qp = self._qp[which]
        for i in range(self._sq_done[which], upto):
            wr = qp.read_send_wqe(i)
            if wr is not None and wr.wr_id >= 0 and wr.opcode in _TWO_SIDED:
                self.sends_done += 1
        self._sq_done[which] = max(self._sq_done[which], upto)

    def _pump(self, now: float) -> None:
        if self.sq_state == SendState.DEFAULT and self._backup_ready and \
                not self._cq["d"]._q and not self._cq["b"]._q:
            return  # fast path: nothing to do
        if self.sq_state == SendState.FAILED:
            return
        if not self._backup_ready:
            self._sync_backup()
        for which in ("b", "d"):  # backup first: its completions precede a switch-back
            for wc in self._cq[which].poll(1 << 16):
                self._on_wc(wc, which, now)
                if self.sq_state == SendState.FAILED:
                    return
        if self.sq_state == SendState.AWAIT_ACK and now > self._handshake_deadline:
            self._surface(self._fail_wc, "handshake timeout")
        elif self.sq_state == SendState.FALLBACK and self._probes and \
                self._next_probe is not None and now >= self._next_probe and \
                not self._probe_inflight:
            self._probe(now)

    def _on_wc(self, wc: WC, which: str, now: float) -> None:
        if wc.wr_id >= 0:
            if wc.status == WCStatus.SUCCESS:
                self._deliver(wc, which)
            elif wc.status != WCStatus.WR_FLUSH_ERR and which == "d" and \
                    self.sq_state == SendState.DEFAULT:
                self._begin_failover(now, wc)
            elif wc.status != WCStatus.WR_FLUSH_ERR and self.sq_state != SendState.DEFAULT and \
                    (which == "b" or self.sq_state == SendState.WAIT_DRAINED):
                self._surface(wc, "error on the QP in use")
            return
        if wc.wr_id == _WR_CTRL_RECV:
            if wc.status != WCStatus.SUCCESS:
                return
            self._rq_done[which] = wc.wqe_index + 1
            tag = wc.imm_data & _TAG_MASK
            if tag == _SWITCH:
                self._peer_switched_back(now)
            elif tag == _HELLO and self.sq_state == SendState.DEFAULT:
                self._begin_failover(now, None, peer_recvs=wc.imm_data & _CTR_MASK)
            elif tag in (_HELLO, _ACK) and self.sq_state == SendState.AWAIT_ACK:
                self._replay(wc.imm_data & _CTR_MASK, now)
        elif wc.wr_id == _WR_PROBE:
            self._probe_inflight = False
            if wc.status == WCStatus.SUCCESS:
                self._start_switch_back(now)
            else:
                self._reset_default(now)
        elif wc.wr_id == _WR_FENCE:
            if wc.status == WCStatus.SUCCESS:
                self._qp["d"].ring_doorbell(self._notify_index + 1)
            else:
                self._surface(wc, "backup QP failed during switch-back")
        elif wc.wr_id == _WR_NOTIFY and self.sq_state == SendState.WAIT_DRAINED:
            if wc.status == WCStatus.SUCCESS:
                self._qp["d"].ring_doorbell()
                self.sq_state = SendState.DEFAULT
                self._event["t_done"] = now
                self._event = None
                self._maybe_rearm_backup()
            else:
                self._surface(wc, "fault on the default path during switch-back (not masked)")

    # ------------------------------------------------------------------ failover
    def _outstanding_sends(self) -> list[SendWR]:
        qp = self._qp["d"]
        wrs = [qp.read_send_wqe(i) for i in range(self._sq_done["d"], qp.sq_pi)]
        return [wr for wr in wrs if wr is not None and wr.wr_id >= 0]

    def _begin_failover(self, now: float, wc: WC | None, peer_recvs: int | None = None) -> None:
        """Start S1 -> S2. ``wc`` is the error completion (None: failed post or peer's HELLO)."""
        d = self._qp["d"]
        if d.state != QPState.ERR:
            d.modify(QPState.ERR)
        for late in self._cq["d"].poll(1 << 16):  # drain: successes go to the application
            if late.wr_id >= 0 and late.status == WCStatus.SUCCESS:
                self._deliver(late, "d")
            elif late.wr_id == _WR_CTRL_RECV and late.status == WCStatus.SUCCESS:
                self._rq_done["d"] = late.wqe_index + 1
        self._fail_wc = wc or WC(0, WCStatus.RETRY_EXC_ERR, WCOpcode.SEND, self.qp_num)
        outstanding = self._outstanding_sends()
        if any(wr.opcode in _ATOMICS for wr in outstanding):
            self._surface(self._fail_wc, "atomic in flight: replay would not be idempotent")
            return
        if not self._backup_ready:
            self._surface(self._fail_wc, "backup QP not ready")
            return
        if not self._backup_fresh:
            self._surface(self._fail_wc, "default path failed again before the backup QP was "
                                         "re-armed (not masked)")
            return
        self._backup_fresh = False
        self._event = {"event": "failover", "qp": self.qp_num, "t_error": now,
                       "role": "initiator" if peer_recvs is None else "responder"}
        self.events.append(self._event)
        recvs = self._outstanding_recvs()  # in S1 the application receives on the default QP
        # reset the default QP now (its ring has been read): both peers then reset before either
        # probes, so their PSNs agree when the default path comes back
        self._reset_default(now)
        # outstanding RECVs move to the backup QP before the peer may send there
        self._post_recv_backup(recvs)
        self.rq_state = RecvState.FALLBACK
        tag = _HELLO if peer_recvs is None else _ACK
        self._qp["b"].post_send(SendWR(_WR_HANDSHAKE, Opcode.RDMA_WRITE_WITH_IMM,
                                       imm_data=tag | (self.recvs_done & _CTR_MASK),
                                       signaled=False))
        self.sq_state = SendState.AWAIT_ACK
        self._handshake_deadline = now + self.ep.handshake_timeout
        self._pending_replay = outstanding
        if peer_recvs is not None:
            self._replay(peer_recvs, now)

    def _replay(self, peer_recvs: int, now: float) -> None:
        """Trim by the peer's receive counter, copy the rest to the backup QP, post held WRs."""
        extra = peer_recvs - self.sends_done
        wrs, trimmed = self._pending_replay, 0
        while extra > 0 and wrs:
            wr = wrs.pop(0)
            trimmed += 1
            if wr.opcode in _TWO_SIDED:
                extra -= 1
                self.sends_done += 1
            if wr.signaled or self._qp["d"].sq_sig_all:
                self.send_cq._q.append(WC(wr.wr_id, WCStatus.SUCCESS, _WC_OPCODE[wr.opcode],
                                          self.qp_num, sum(s.length for s in wr.sg_list)))
        replay = [self._remap(wr) for wr in wrs] + [self._remap(wr) for wr in self._held]
        self._held, self._pending_replay = [], []
        self._event.update(replayed=len(wrs), trimmed=trimmed, t_replay=now)
        if replay:
            self._qp["b"].post_send(replay)
        else:
            self._event.setdefault("t_first_success", now)
        self.sq_state = SendState.FALLBACK

    def _surface(self, wc: WC, reason: str) -> None:
        """Give up: hand the error (and flushes of everything outstanding) to the application."""
        if self.sq_state == SendState.DEFAULT:
            outstanding = self._outstanding_sends()
        elif self.sq_state == SendState.AWAIT_ACK:
            outstanding = self._pending_replay
        else:
            outstanding = [wr for _, wr in self._qp["b"].send_queue() if wr.wr_id >= 0]
        if outstanding and outstanding[0].wr_id == wc.wr_id:
            outstanding = outstanding[1:]
        recvs = self._outstanding_recvs()
        self.sq_state = SendState.FAILED
        self.events.append({"event": "error", "qp": self.qp_num, "t_error": time.monotonic(),
                            "reason": reason})
        self.send_cq._q.append(replace(wc, qp_num=self.qp_num))
        for wr in outstanding + self._held:
            self.send_cq._q.append(WC(wr.wr_id, WCStatus.WR_FLUSH_ERR, _WC_OPCODE[wr.opcode],
                                      self.qp_num))
        for wr in recvs:
            self.recv_cq._q.append(WC(wr.wr_id, WCStatus.WR_FLUSH_ERR, WCOpcode.RECV,
                                      self.qp_num))
        self._held = []
        for q in self._qp.values():
            if q.state != QPState.ERR:
                q.modify(QPState.ERR)
        self.ep.fabric.kick()

    def _outstanding_recvs(self) -> list[RecvWR]:
        """Application RECVs posted and not yet consumed, on the receive queue in use."""
        which = "d" if self.rq_state == RecvState.DEFAULT else "b"
        qp = self._qp[which]
        wrs = [qp.read_recv_wqe(i) for i in range(self._rq_done[which], qp.rq_pi)
               if i not in self._internal_rq[which]]
        return [wr for wr in wrs if wr is not None]

    # ------------------------------------------------------------------ recovery
    def _reset_default(self, now: float) -> None:
        d, rtr = self._qp["d"], self._attrs[QPState.RTR]
        bring_up(d, (rtr["dest_dev"], rtr["dest_qp_num"]), **self._rts_attrs())
        self._internal_rq["d"] = set()
        self._rq_done["d"] = self._sq_done["d"] = 0
        self._post_ctrl_recv("d")
        self._next_probe = now + self.ep.probe_interval

    def _probe(self, now: float) -> None:
        self._qp["d"].post_send(SendWR(_WR_PROBE, Opcode.RDMA_WRITE))
        self._probe_inflight = True
        self._next_probe = None

    def _start_switch_back(self, now: float) -> None:
        self._event = {"event": "switch_back", "qp": self.qp_num, "t_start": now,
                       "trigger": "probe" if self._probes else "peer"}
        self.events.append(self._event)
        self.sq_state = SendState.WAIT_SIGNALED
        self._qp["b"].post_send(SendWR(_WR_FENCE, Opcode.RDMA_WRITE))
        d = self._qp["d"]
        self._notify_index = d.sq_pi
        d.post_send(SendWR(_WR_NOTIFY, Opcode.RDMA_WRITE_WITH_IMM, imm_data=_SWITCH), ring=False)
        self.sq_state = SendState.WAIT_DRAINED

    @property
    def _probes(self) -> bool:
        """Whether this side probes the default path (the smaller (NIC, QP number) of the pair)."""
        rtr = self._attrs[QPState.RTR]
        return (self.ep.default.name, self.qp_num) < (rtr["dest_dev"], rtr["dest_qp_num"])

    def _peer_switched_back(self, now: float) -> None:
        b = self._qp["b"]
        recvs = [self._recv_origin.pop(("b", i), None) for i in range(self._rq_done["b"], b.rq_pi)
                 if i not in self._internal_rq["b"]]
        self._qp["d"].post_recv([r for r in recvs if r is not None])
        self.rq_state = RecvState.DEFAULT
        if self.sq_state == SendState.FALLBACK:  # the follower: the path carried the notification
            self._start_switch_back(now)
        self._maybe_rearm_backup()

    def _maybe_rearm_backup(self) -> None:
        """Once both directions are back on the default NIC, reset the backup QP for next time."""
        if self.sq_state == SendState.DEFAULT and self.rq_state == RecvState.DEFAULT:
            self._recv_origin.clear()
            self._internal_rq["b"] = set()
            self._rq_done["b"] = self._sq_done["b"] = 0
            self._backup_ready = False
            self._qp["b"].modify(QPState.RESET)
            self._sync_backup()


_WC_OPCODE = {Opcode.RDMA_WRITE: WCOpcode.RDMA_WRITE, Opcode.RDMA_WRITE_WITH_IMM:
              WCOpcode.RDMA_WRITE, Opcode.SEND: WCOpcode.SEND, Opcode.SEND_WITH_IMM: WCOpcode.SEND,
              Opcode.RDMA_READ: WCOpcode.RDMA_READ, Opcode.ATOMIC_CMP_AND_SWP: WCOpcode.COMP_SWAP,
              Opcode.ATOMIC_FETCH_AND_ADD: WCOpcode.FETCH_ADD}
