"""Explicit-state model checker for cross-NIC RDMA failover: the trilemma.

The model (after the SHIFT paper's Rocq development, arXiv 2512.11094): one sender, one receiver,
two NICs each (a default and a backup path), at most three WRs. RC delivers in order on a live
path, so what matters at a NIC death is which prefix of the posted WRs the receiver executed
(requests lost otherwise) and which prefix of those the sender saw acknowledged (ACKs lost
otherwise). Nondeterminism: interleaving of posting, execution, ACK delivery, the receiver
application's progress, and one NIC death at any point. After the death the sender's RC QP times
out and a failover *policy* decides which outstanding WRs to send again on the backup path (which
stays up).

Receiver application: it consumes a notification (WRITE_WITH_IMM or SEND completion), reads the
data the notification covers, then reuses those buffers; in the flag-in-data protocol (NCCL LL) it
instead consumes a WRITE as soon as its bytes appear in memory.

Properties of a failover design, and how the model encodes them:

- **EO** (exactly-once execution): every WR's effect happens exactly once, in order. When EO is not
  required, only application-level safety is checked: notifications exactly once and in order,
  no stale read, no overwrite of a consumed buffer, no double-applied atomic, nothing lost (an
  error may be surfaced instead of masking the fault).
- **RNO** (receiver-NIC opacity): the policy may use the sender's view (which WRs completed) and
  the receiver *software's* receive counter, not the receiver NIC's progress. Without RNO it may
  read how many WRs the receiver NIC executed.
- **ZC** (zero-copy): the receiver NIC writes straight into application memory. Without ZC, a
  staging buffer plus sequence numbers let receiver software drop duplicates.

For every trace and every combination (EO, RNO, ZC) the checker verifies named policies (naive
replay, SHIFT, the oracle that needs RNO off) and the **whole family** of deterministic policies
allowed by the combination: any function from the observable view at the failover to the subset
of outstanding WRs to resend. A combination is achievable on a trace iff some policy of the
family satisfies the required invariants in every reachable state; counterexamples are shortest
(breadth-first search).
"""

from __future__ import annotations

import itertools
import time
from collections import deque
from dataclasses import dataclass

import pandas as pd

__all__ = ["Op", "TRACES", "check_trilemma", "check_policy", "TrilemmaReport"]

REUSED = -1
_PRUNED = "failover decided by another view (explored separately)"


@dataclass(frozen=True)
class Op:
    """A WR of the model: ``kind`` in write, wimm (write with immediate), send, fadd, flagwrite;
    ``slot`` is the target buffer; ``covers`` the WRs whose data a notification releases."""

    kind: str
    slot: int = 0
    covers: tuple = ()

    @property
    def notifies(self) -> bool:
        return self.kind in ("wimm", "send")

    def label(self, i: int) -> str:
        return {"write": f"WRITE#{i}(slot{self.slot})", "wimm": f"WRITE_IMM#{i}(slot{self.slot})",
                "send": f"SEND#{i}", "fadd": f"FETCH_ADD#{i}",
                "flagwrite": f"LL_WRITE#{i}(slot{self.slot})"}[self.kind]


#: Built-in traces (at most three WRs each).
TRACES = {
    # NCCL Simple: data WRITE, then the WRITE_WITH_IMM that releases it, then the next chunk
    "nccl_simple": (Op("write", 0), Op("wimm", 1, covers=(0, 1)), Op("wimm", 2, covers=(2,))),
    # two-sided messages only: a duplicate consumes an extra RECV ("queue sliding")
    "send_recv": (Op("send"), Op("send"), Op("send")),
    # NVSHMEM-like: data, an atomic signal, a notification
    "atomic_signal": (Op("write", 0), Op("fadd", 1), Op("wimm", 2, covers=(0, 2))),
    # NCCL LL: flag inside the data, consumed as soon as it lands
    "nccl_ll": (Op("flagwrite", 0), Op("flagwrite", 1)),
}

_SAFETY_APP = ("double_atomic", "duplicate_notification", "reordered_notification", "stale_read",
               "overwrite_after_consume")


@dataclass(frozen=True)
class _S:
    posted: int = 0      # WRs posted by the application
    pd: int = 0          # WRs posted on the default path
    exec_d: int = 0      # executed by the receiver NIC on the default path (a prefix)
    ack_d: int = 0       # acknowledged to the sender on the default path (a prefix of exec_d)
    dead: bool = False
    fo: int = 0          # 0 before failover, 1 failed over, 2 error surfaced
    replay: tuple = ()   # WR indices sent on the backup path, in order
    exec_b: int = 0
    ack_b: int = 0
    mem: tuple = ()      # slot values (WR i writes i + 1); REUSED after consumption
    rbuf: tuple = ()     # receive buffers filled by SENDs, in RECV order
    notif: tuple = ()    # (WR index, receive buffer or -1) per receive completion, in order
    consumed: int = 0    # notifications (or LL writes) consumed by the application
    execs: tuple = ()    # execution count per WR (capped at 2)
    flags: frozenset = frozenset()


class _Model:
    def __init__(self, trace, eo: bool, rno: bool, zc: bool):
        self.trace, self.eo, self.rno, self.zc = tuple(trace), eo, rno, zc
        self.n = len(self.trace)
        n_slots = 1 + max([op.slot for op in self.trace] + [0])
        self.init = _S(mem=(0,) * n_slots, execs=(0,) * self.n)
        self.ll = any(op.kind == "flagwrite" for op in self.trace)
        self.notifying = [i for i, op in enumerate(self.trace) if op.notifies]

    # ------------------------------------------------------------------ semantics
    def execute(self, s: _S, i: int) -> _S:
        op = self.trace[i]
        if not self.zc and s.execs[i] >= 1:
            return s  # staging + sequence number: the duplicate is discarded
        execs = list(s.execs)
        execs[i] = min(2, execs[i] + 1)
        mem, rbuf, notif, flags = list(s.mem), list(s.rbuf), s.notif, set(s.flags)
        if op.kind in ("write", "wimm", "flagwrite"):
            if mem[op.slot] == REUSED:
                flags.add("overwrite_after_consume")
            mem[op.slot] = i + 1
        if op.kind == "fadd":
            mem[op.slot] += 1
        if op.kind == "wimm":
            notif = notif + ((i, -1),)
        if op.kind == "send":
            rbuf.append(i + 1)
            notif = notif + ((i, len(rbuf) - 1),)
        return _S(s.posted, s.pd, s.exec_d, s.ack_d, s.dead, s.fo, s.replay, s.exec_b, s.ack_b,
                  tuple(mem), tuple(rbuf), notif, s.consumed, tuple(execs), frozenset(flags))

    def consume(self, s: _S):
        """The receiver application's next step, or None."""
        flags, mem, rbuf = set(s.flags), list(s.mem), list(s.rbuf)
        if self.ll:
            if s.consumed >= self.n:
                return None
            op = self.trace[s.consumed]
            if mem[op.slot] != s.consumed + 1:
                return None
            mem[op.slot] = REUSED
        else:
            if s.consumed >= len(s.notif):
                return None
            i, buf = s.notif[s.consumed]
            if s.consumed >= len(self.notifying) or i != self.notifying[s.consumed]:
                flags.add("reordered_notification")
            op = self.trace[i]
            if op.kind == "send":
                expect = s.consumed  # the application expects message k in receive buffer k
                if buf != expect or rbuf[buf] != self.notifying[s.consumed] + 1:
                    flags.add("stale_read")
                rbuf[buf] = REUSED
            for j in op.covers:
                slot = self.trace[j].slot
                if mem[slot] != j + 1:
                    flags.add("stale_read")
                mem[slot] = REUSED
        return _S(s.posted, s.pd, s.exec_d, s.ack_d, s.dead, s.fo, s.replay, s.exec_b, s.ack_b,
                  tuple(mem), tuple(rbuf), s.notif, s.consumed + 1, s.execs, frozenset(flags))

    def violations(self, s: _S, terminal: bool) -> set:
        v = set(s.flags)
        if any(c > 1 for c in s.execs):
            if self.eo:
                v.add("duplicate_execution")
            if any(c > 1 and op.kind == "fadd" for c, op in zip(s.execs, self.trace, strict=True)):
                v.add("double_atomic")
        ids = [i for i, _ in s.notif]
        if len(set(ids)) < len(ids):
            v.add("duplicate_notification")
        if ids != sorted(ids):
            v.add("reordered_notification")
        if terminal:
            if s.fo == 2:
                if self.eo:
                    v.add("error_surfaced")
            elif any(c == 0 for c in s.execs):
                v.add("lost_operation")
        return v if self.eo else v & set(_SAFETY_APP + ("lost_operation",))

    def view(self, s: _S):
        """What a policy may observe at the failover."""
        if self.rno:
            seen = len([i for i, _ in s.notif])  # the receiver software's receive counter
            return ("sender", s.ack_d, s.pd, seen)
        return ("receiver-nic", s.ack_d, s.pd, s.exec_d)

    # ------------------------------------------------------------------ transitions
    def successors(self, s: _S, decide):
        """Yield (label, next state). ``decide(model, s)`` returns the resend list or "error";
        None means "do not explore this failover" (yields the ``_PRUNED`` marker)."""
        if s.fo == 2:
            return
        if s.posted < self.n:
            i = s.posted
            if s.fo == 0:
                yield f"post {self.trace[i].label(i)} on NIC0", _replace(s, posted=i + 1,
                                                                         pd=i + 1)
            else:
                yield f"post {self.trace[i].label(i)} on NIC1", _replace(
                    s, posted=i + 1, replay=s.replay + (i,))
        if not s.dead:
            if s.exec_d < s.pd:
                i = s.exec_d
                yield f"receiver NIC0 executes {self.trace[i].label(i)}", _replace(
                    self.execute(s, i), exec_d=i + 1)
            if s.ack_d < s.exec_d:
                i = s.ack_d
                yield f"sender gets ACK of {self.trace[i].label(i)}", _replace(s, ack_d=i + 1)
            lost = [self.trace[i].label(i) for i in range(s.exec_d, s.pd)]
            unacked = [self.trace[i].label(i) for i in range(s.ack_d, s.exec_d)]
            yield (f"NIC0 dies (requests lost: {lost or 'none'}; ACKs lost: {unacked or 'none'})",
                   _replace(s, dead=True))
        if s.dead and s.fo == 0 and s.ack_d < s.pd:
            choice = decide(self, s)
            if choice is None:
                yield _PRUNED, None
            else:
                if choice == "error":
                    yield "timeout -> failover refused, error surfaced", _replace(s, fo=2)
                else:
                    names = [self.trace[i].label(i) for i in choice]
                    yield f"timeout -> failover, resend {names or 'nothing'} on NIC1", _replace(
                        s, fo=1, replay=tuple(choice))
        if s.fo == 1:
            if s.exec_b < len(s.replay):
                i = s.replay[s.exec_b]
                yield f"receiver NIC1 executes {self.trace[i].label(i)}", _replace(
                    self.execute(s, i), exec_b=s.exec_b + 1)
            if s.ack_b < s.exec_b:
                yield "sender gets ACK on NIC1", _replace(s, ack_b=s.ack_b + 1)
        nxt = self.consume(s)
        if nxt is not None:
            yield "receiver application consumes the next message", nxt


def _replace(s: _S, **kw) -> _S:
    d = {k: getattr(s, k) for k in _S.__dataclass_fields__}
    d.update(kw)
    return _S(**d)


# ---------------------------------------------------------------------- policies
def _naive(m: _Model, s: _S):
    return list(range(s.ack_d, s.pd))


def _shift(m: _Model, s: _S):
    out = list(range(s.ack_d, s.pd))
    if any(m.trace[i].kind == "fadd" for i in out):
        return "error"
    received = len(s.notif)  # receive counter from the handshake
    done = sum(1 for i in range(s.ack_d) if m.trace[i].notifies)
    extra = received - done
    while extra > 0 and out:
        if m.trace[out.pop(0)].notifies:
            extra -= 1
    return out


def _oracle(m: _Model, s: _S):
    return list(range(s.exec_d, s.pd))


POLICIES = {"naive_replay": _naive, "shift": _shift, "oracle_nic_state": _oracle}


def _bfs(model: _Model, starts, decide, max_states: int):
    """Breadth-first search; returns (violation set, trace labels, states visited)."""
    parent = {s: (None, None) for s in starts}
    queue = deque(starts)
    surfaced = 0
    while queue:
        s = queue.popleft()
        succ = list(model.successors(s, decide))
        pruned = any(label is _PRUNED for label, _ in succ)
        succ = [(label, t) for label, t in succ if label is not _PRUNED]
        surfaced += s.fo == 2
        bad = model.violations(s, terminal=not succ and not pruned)
        if bad:
            labels = []
            cur = s
            while parent[cur][0] is not None:
                prev, label = parent[cur]
                labels.append(label)
                cur = prev
            return bad, labels[::-1], len(parent), surfaced
        for label, t in succ:
            if t not in parent:
                parent[t] = (s, label)
                if len(parent) > max_states:
                    raise RuntimeError(f"state space exceeds max_states={max_states}")
                queue.append(t)
    return set(), [], len(parent), surfaced


def check_policy(trace, policy, *, eo: bool, rno: bool, zc: bool, max_states: int = 10 ** 6):
    """Check one policy (a name of ``causalkit.systems.rdma.trilemma.POLICIES`` or a function) on
    one trace and combination.

    Returns a dict: ``holds``, ``violations``, ``counterexample`` (list of step labels, empty when
    it holds), ``states``, ``errors_surfaced`` (states visited in which an error was surfaced).
    """
    model = _Model(TRACES.get(trace, trace) if isinstance(trace, str) else trace, eo, rno, zc)
    fn = POLICIES[policy] if isinstance(policy, str) else policy
    bad, labels, states, surfaced = _bfs(model, [model.init], fn, max_states)
    return {"holds": not bad, "violations": sorted(bad), "counterexample": labels,
            "states": states, "errors_surfaced": surfaced}


def _family(model: _Model, max_states: int):
    """Check every deterministic policy of the view family via per-view decomposition.

    Each run fails over at most once, at a state whose view is ``v``; a policy is correct iff its
    choice at every reachable ``v`` is correct for all failover states with that view. Returns
    (exists, n_policies, n_correct, states, witness) where witness is a (view, per-choice
    counterexamples) for a view with no correct choice.
    """
    pre = _bfs_collect(model, max_states)
    by_view: dict = {}
    for s in pre["failover_states"]:
        by_view.setdefault(model.view(s), []).append(s)
    states, n_pol, n_ok, witness = pre["states"], 1, 1, None
    for v in sorted(by_view, key=str):
        starts = by_view[v]
        ack_d, pdv = v[1], v[2]
        outstanding = list(range(ack_d, pdv))
        # a failover policy must mask the fault: surfacing an error is not one of its choices
        choices = [list(c) for r in range(len(outstanding) + 1)
                   for c in itertools.combinations(outstanding, r)]
        n_pol *= len(choices)
        good, cex = 0, {}
        for ch in choices:
            view_starts = set(starts)

            def decide(m, s, ch=ch, vs=view_starts):
                return ch if s in vs else None

            bad, labels, n, _ = _bfs(model, list(starts), decide, max_states)
            states += n
            if bad:
                cex[str(ch)] = (sorted(bad), labels)
            else:
                good += 1
        n_ok *= good
        if good == 0 and witness is None:
            witness = (v, cex)
    return n_ok > 0, n_pol, n_ok, states, witness


def _bfs_collect(model: _Model, max_states: int):
    """All reachable states before any failover; the ones where the failover decision is due."""
    seen = {model.init}
    queue = deque([model.init])
    fo = []
    while queue:
        s = queue.popleft()
        if s.dead and s.fo == 0 and s.ack_d < s.pd:
            fo.append(s)
        for label, t in model.successors(s, lambda m, x: None):
            if label is not _PRUNED and t not in seen:
                seen.add(t)
                if len(seen) > max_states:
                    raise RuntimeError(f"state space exceeds max_states={max_states}")
                queue.append(t)
    return {"failover_states": fo, "states": len(seen)}


class TrilemmaReport:
    """Result of :func:`check_trilemma`.

    Attributes
    ----------
    policies : pandas.DataFrame
        One row per (trace, combination, policy): holds, violations, counterexample, states.
    combinations : pandas.DataFrame
        One row per (trace, combination): whether *some* policy of the allowed family achieves it,
        family size, number of correct policies, states, and a witness when none does.
    states : int
        Total states explored. ``seconds``: wall time.
    """

    def __init__(self, policies, combinations, states, seconds):
        self.policies, self.combinations, self.states, self.seconds = (policies, combinations,
                                                                       states, seconds)

    def achievable(self) -> pd.DataFrame:
        """Combination x trace table: can some policy of the allowed family achieve it?"""
        t = self.combinations.pivot_table(index=["eo", "rno", "zc"], columns="trace",
                                          values="achievable", aggfunc="all")
        return t.sort_index(ascending=False)

    def summary(self) -> str:
        """Readable summary: the combination table, then the named policies under RNO+ZC."""
        lines = [f"trilemma model check: {self.states} states explored in {self.seconds:.2f} s",
                 "achievable by some failover policy (rows: kept properties EO/RNO/ZC):"]
        tab = self.achievable()
        lines.append("  " + " ".join(f"{c:>14s}" for c in ["kept"] + list(tab.columns)))
        for idx, row in tab.iterrows():
            kept = "+".join(k for k, on in zip(("EO", "RNO", "ZC"), idx, strict=True) if on) or "-"
            lines.append("  " + " ".join(f"{v:>14s}" for v in
                                         [kept] + ["yes" if x else "NO" for x in row]))
        pol = self.policies[(~self.policies["eo"]) & self.policies["rno"] & self.policies["zc"]]
        lines.append("named policies with RNO+ZC kept, application-level invariants:")
        for _, r in pol.iterrows():
            verdict = "holds" if r["holds"] else "VIOLATED: " + ", ".join(r["violations"])
            if r["holds"] and r["errors_surfaced"]:
                verdict += " (an error is surfaced when an atomic is in flight)"
            lines.append(f"  [{r['trace']}] {r['policy']}: {verdict}")
            for step in r["counterexample"]:
                lines.append(f"      - {step}")
        return "\n".join(lines)


def check_trilemma(traces=None, *, max_states: int = 10 ** 6) -> TrilemmaReport:
    """Model-check every combination of (EO, RNO, ZC) on ``traces`` (default
    ``causalkit.systems.rdma.TRACES``).

    Parameters
    ----------
    traces : dict name -> tuple of :class:`Op`, optional
    max_states : int
        Abort (RuntimeError) if one search exceeds this many states.
    """
    traces = TRACES if traces is None else traces
    if not traces:
        raise ValueError("traces must not be empty")
    t0 = time.perf_counter()
    rows, combos, total = [], [], 0
    for name, trace in traces.items():
        if not 1 <= len(trace) <= 3:
            raise ValueError(f"trace {name!r} must have 1 to 3 WRs; got {len(trace)}")
        for eo, rno, zc in itertools.product([True, False], repeat=3):
            for pname, fn in POLICIES.items():
                if pname == "oracle_nic_state" and rno:
                    continue  # reads the receiver NIC's state: not allowed under RNO
                res = check_policy(trace, fn, eo=eo, rno=rno, zc=zc, max_states=max_states)
                total += res["states"]
                rows.append({"trace": name, "eo": eo, "rno": rno, "zc": zc, "policy": pname,
                             **res})
            model = _Model(trace, eo, rno, zc)
            exists, n_pol, n_ok, states, witness = _family(model, max_states)
            total += states
            combos.append({"trace": name, "eo": eo, "rno": rno, "zc": zc, "achievable": exists,
                           "family_size": n_pol, "correct_policies": n_ok, "states": states,
                           "witness": _witness_text(witness)})
    return TrilemmaReport(pd.DataFrame(rows), pd.DataFrame(combos), total,
                          time.perf_counter() - t0)


def _witness_text(witness) -> str:
    if witness is None:
        return ""
    view, cex = witness
    parts = [f"view {view}: every choice fails"]
    for choice, (bad, labels) in cex.items():
        parts.append(f"  resend {choice}: {','.join(bad)} via " + " ; ".join(labels))
    return "\n".join(parts)
