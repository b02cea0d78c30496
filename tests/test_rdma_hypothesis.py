"""Hypothesis state machine: random fault schedules against the real threaded implementation.

Every schedule uses only faults SHIFT claims to mask (anything on NIC 0 / rail 0 while rail 1
stays up); after every step each rank's all-reduce result must be bit-equal to the fault-free
result (integer-valued inputs, so that is the exact sum of the inputs).

What SHIFT does not mask, and the machine therefore does not generate: a fault that lands inside
a recovery window (a handshake, a probe that got through, a switch-back, or before the backup QP
is re-armed; see :mod:`causalkit.systems.rdma.shift`). Each fault is injected, under the fabric
lock, only at an instant when every QP is :attr:`~causalkit.systems.rdma.shift.ShiftQP.settled`
(or probing a default link that is down at that instant); a fault whose moment never comes within
``SETTLE_S`` is skipped and recorded as such. Loss is kept at p <= 0.12: under persistent loss p
the default path keeps failing over and switching back, and a switch-back notification lost
``retry_cnt + 1`` times in a row is such a fault inside the window (here < 2e-4 per switch-back).
"""

import threading
import time

import numpy as np
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from causalkit.systems.rdma.experiment import inject_fault
from causalkit.systems.rdma.workloads import RingAllReduce, build_ring

N_HOSTS, N_ELEMS = 3, 1500
MASKED = ["nic_down", "link_flap", "drop", "drop_acks", "delay"]
SETTLE_S = 3.0


class ShiftRing(RuleBasedStateMachine):
    """A persistent 3-host SHIFT ring; rules inject faults (now or mid-collective) and run it."""

    @initialize()
    def start(self):
        # ~100 ms detection: large enough that load on a shared machine does not make the
        # backup path time out, small enough for a fast test
        self.cluster = build_ring(N_HOSTS, shift=True, timeout=12, retry_cnt=5,
                                  probe_interval=0.01)
        self.ring = RingAllReduce(self.cluster, N_ELEMS, nslots=2)
        self.faults = []

    def teardown(self):
        if hasattr(self, "cluster"):
            self.cluster.close()

    def _settled(self) -> bool:
        """Every QP outside a recovery window (call with the fabric lock held)."""
        for h in self.cluster.hosts:
            h.endpoint.pump()
        for r, (tx, rx) in enumerate(self.ring.chans):
            link_up = self.cluster.paths[(r, (r + 1) % N_HOSTS, 0)].is_up()
            for qp in (tx.qp, rx.qp):
                # a probe on a link that is down now cannot have got through yet
                if not (qp.settled or (qp._probe_inflight and not link_up)):
                    return False
        return True

    def _inject(self, fault, host, param):
        deadline = time.monotonic() + SETTLE_S
        while True:
            with self.cluster.fabric.lock:
                if self._settled():
                    inject_fault(self.cluster, fault, host, flap_s=0.05 + param * 0.2,
                                 drop_p=0.02 + 0.1 * param, delay_s=0.001 + 0.004 * param)
                    self.faults.append((fault, host))
                    return
            if time.monotonic() > deadline:
                self.faults.append(("skipped", fault, host))
                return
            time.sleep(1e-3)

    def _allreduce(self, iterations, on_iteration=None):
        out = self.ring.run(iterations, on_iteration=on_iteration, timeout=20)
        assert not out["errors"], (self.faults, out["errors"])
        for r, results in out["results"].items():
            assert len(results) == iterations
            for got, want in zip(results, out["reference"], strict=True):
                assert np.array_equal(got, want), (r, self.faults)

    @rule(fault=st.sampled_from(MASKED), host=st.integers(0, N_HOSTS - 1),
          param=st.floats(0, 1))
    def fault_between_collectives(self, fault, host, param):
        self._inject(fault, host, param)

    @rule(fault=st.sampled_from(MASKED), host=st.integers(0, N_HOSTS - 1),
          param=st.floats(0, 1), delay=st.floats(0, 0.02), at=st.integers(0, 1))
    def fault_during_collective(self, fault, host, param, delay, at):
        def hook(i):
            if i == at:
                threading.Timer(delay, self._inject, (fault, host, param)).start()
        self._allreduce(2, on_iteration=hook)

    @rule(iterations=st.integers(1, 2))
    def allreduce(self, iterations):
        self._allreduce(iterations)

    @invariant()
    def no_error_surfaced(self):
        if hasattr(self, "ring"):
            for qp in self.ring.qps:
                assert all(e["event"] != "error" for e in qp.events), qp.events


ShiftRing.TestCase.settings = settings(max_examples=25, stateful_step_count=5, deadline=None,
                                       database=None,
                                       suppress_health_check=[HealthCheck.too_slow])
TestShiftRing = ShiftRing.TestCase
