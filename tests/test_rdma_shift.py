"""SHIFT wrapper QP: failover, receive-counter trimming, atomics, switch-back."""

import time

import numpy as np
import pytest

from causalkit.systems.rdma.experiment import inject_fault
from causalkit.systems.rdma.shift import RecvState, SendState
from causalkit.systems.rdma.verbs import Opcode, QPCap, QPState, RecvWR, SendWR, WCStatus
from causalkit.systems.rdma.workloads import _connect, build_ring, run_allreduce, run_p2p

FAST = {"timeout": 11, "retry_cnt": 4}  # ~40 ms detection


def allreduce_ok(out, iterations):
    return all(len(v) == iterations and all(np.array_equal(a, b)
                                            for a, b in zip(v, out["reference"], strict=False))
               for v in out["results"].values())


@pytest.mark.parametrize("transport", ["inprocess", "udp", "shm"])
def test_allreduce_survives_nic_death(transport):
    with build_ring(3, shift=True, transport=transport, **FAST) as c:
        out = run_allreduce(c, 3000, 6, timeout=10,
                            on_iteration=lambda i: i == 2 and inject_fault(c, "nic_down", 1))
        assert not out["errors"] and allreduce_ok(out, 6)
        events = [e for qp in out["qps"] for e in qp.events]
        assert any(e["event"] == "failover" for e in events)
        assert all(e["event"] != "error" for e in events)
        assert all(qp.sq_state == SendState.FALLBACK for qp in out["qps"]
                   if qp.events and qp.events[0]["event"] == "failover")


def test_without_shift_the_same_fault_aborts_the_collective():
    with build_ring(3, shift=False, **FAST) as c:
        out = run_allreduce(c, 3000, 6, timeout=3,
                            on_iteration=lambda i: i == 2 and inject_fault(c, "nic_down", 1))
        assert out["errors"]
        assert any("RETRY_EXC_ERR" in str(e) for e in out["errors"].values())


def test_lost_acks_are_trimmed_by_the_receive_counter():
    """ACKs lost, data placed: the replay must skip the notifications the peer already got."""
    with build_ring(2, shift=True, **FAST) as c:
        out = run_p2p(c, 20000, 40, timeout=10,
                      on_message=lambda i: i == 10 and inject_fault(c, "drop_acks", 1))
        assert not out["errors"] and len(out["ok"]) == 40 and all(out["ok"])
        fo = [e for qp in out["qps"] for e in qp.events if e["event"] == "failover"]
        assert fo and sum(e["trimmed"] for e in fo) >= 1


def test_link_flap_fails_over_and_switches_back():
    with build_ring(2, shift=True, probe_interval=0.01, **FAST) as c:
        out = run_p2p(c, 8000, 100, timeout=10,
                      on_message=lambda i: i == 20 and inject_fault(c, "link_flap", 0,
                                                                    flap_s=0.15))
        assert not out["errors"] and all(out["ok"]) and len(out["ok"]) == 100
        qps = out["qps"]
        assert all(any(e["event"] == "failover" for e in qp.events) for qp in qps)
        # the background threads probe the default NIC and switch back once the link is up
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and not all(
                qp.sq_state == SendState.DEFAULT and qp.rq_state == RecvState.DEFAULT
                for qp in qps):
            time.sleep(0.01)
        for qp in qps:
            assert qp.sq_state == SendState.DEFAULT and qp.rq_state == RecvState.DEFAULT
            assert any(e["event"] == "switch_back" and "t_done" in e for e in qp.events)
        # one side probes, the other follows its notification (two probers would race)
        triggers = sorted(e["trigger"] for qp in qps for e in qp.events
                          if e["event"] == "switch_back")
        assert triggers == ["peer", "probe"]
        # new traffic flows on NIC 0 (rail 0), none on the backup rail
        rail0, rail1 = c.paths[(0, 1, 0)], c.paths[(0, 1, 1)]
        before0, before1 = sum(rail0.sent), sum(rail1.sent)
        out2 = run_p2p(c, 8000, 20, timeout=10)
        assert all(out2["ok"]) and len(out2["ok"]) == 20
        assert sum(rail0.sent) - before0 >= 40 and sum(rail1.sent) == before1


def test_atomic_in_flight_surfaces_an_error_never_a_silent_double_add():
    with build_ring(2, shift=True, **FAST) as c:
        a, b = c.hosts
        ctr, old = np.zeros(1, np.uint64), np.zeros(1, np.uint64)
        mc, mo = b.reg_mr(ctr), a.reg_mr(old)
        scq, rcq = a.create_cq(), a.create_cq()
        qa = a.create_qp(scq, rcq, QPCap(max_send_wr=64, max_send_sge=1))
        qb = b.create_qp(b.create_cq(), b.create_cq(), QPCap(max_send_wr=64, max_send_sge=1))
        _connect(c, qa, qb)
        c.paths[(0, 1, 0)].drop_acks_only(1.0)  # the FETCH_ADD executes, its response is lost
        qa.post_send(SendWR(1, Opcode.ATOMIC_FETCH_AND_ADD, (mo.sge(),), mc.addr, mc.rkey,
                            compare_add=5))
        assert scq.wait(10)
        wc = scq.poll(1)[0]
        assert wc.status != WCStatus.SUCCESS and wc.wr_id == 1
        assert int(ctr[0]) == 5  # applied once, not replayed on the backup NIC
        assert qa.state == QPState.ERR and qa.sq_state == SendState.FAILED
        assert any("atomic" in e.get("reason", "") for e in qa.events)


def test_recvs_posted_before_the_fault_move_to_the_backup_and_are_used_once():
    with build_ring(2, shift=True, **FAST) as c:
        a, b = c.hosts
        src = np.arange(64, dtype=np.uint8)
        bufs = [np.zeros(64, np.uint8) for _ in range(6)]
        ms = a.reg_mr(src)
        mbs = [b.reg_mr(x) for x in bufs]
        cap = QPCap(max_send_wr=32, max_recv_wr=16, max_send_sge=1, max_recv_sge=1)
        scq, brcq = a.create_cq(), b.create_cq()
        qa = a.create_qp(scq, a.create_cq(), cap)
        qb = b.create_qp(b.create_cq(), brcq, cap)
        _connect(c, qa, qb)
        qb.post_recv([RecvWR(i, (mbs[i].sge(),)) for i in range(6)])
        qa.post_send(SendWR(0, Opcode.SEND, (ms.sge(),)))
        assert brcq.wait(5) and brcq.poll(1)[0].wr_id == 0
        inject_fault(c, "nic_down", 0)
        qa.post_send([SendWR(i, Opcode.SEND_WITH_IMM, (ms.sge(),), imm_data=i)
                      for i in range(1, 6)])
        got = []
        while len(got) < 5:
            assert brcq.wait(10)
            got += brcq.poll(8)
        assert [w.wr_id for w in got] == [1, 2, 3, 4, 5]  # each RECV once, in order
        assert [w.imm_data for w in got] == [1, 2, 3, 4, 5]
        assert all(np.array_equal(x, src) for x in bufs)
        assert qb.rq_state == RecvState.FALLBACK


def test_shift_qp_validates_its_input():
    with build_ring(2, shift=True) as c:
        a = c.hosts[0]
        qp = a.create_qp(a.create_cq(), a.create_cq(), QPCap())
        with pytest.raises(ValueError, match="wr_id"):
            qp.post_recv(RecvWR(-1))
        with pytest.raises(TypeError, match="SendWR"):
            qp.post_send("not a wr")
        with pytest.raises(ValueError, match="backup"):
            from causalkit.systems.rdma.shift import KVStore, ShiftEndpoint
            ShiftEndpoint(a.nics[0], a.nics[0], KVStore())


def test_fault_during_switch_back_reaches_both_ranks_at_once(monkeypatch):
    """A second fault on the default NIC exactly when a switch-back starts (probe OK, fence and
    notification posted) is outside what SHIFT masks; the QP must surface it (error completion,
    flushed RECVs) so that no rank waits out its timeout for a notification that never comes."""
    from causalkit.systems.rdma.shift import ShiftQP
    from causalkit.systems.rdma.workloads import RingAllReduce

    hit = []
    start_switch_back = ShiftQP._start_switch_back

    def then_kill(self, now):
        start_switch_back(self, now)
        if not hit:  # deterministic interleaving: the NIC dies right after the posts
            hit.append(self)
            inject_fault(c, "nic_down", 1)

    monkeypatch.setattr(ShiftQP, "_start_switch_back", then_kill)
    with build_ring(3, shift=True, probe_interval=0.01, **FAST) as c:
        ring = RingAllReduce(c, 1500, nslots=2)
        t0 = time.monotonic()
        out = ring.run(400, timeout=20, on_iteration=lambda i: (
            i == 0 and inject_fault(c, "link_flap", 1, flap_s=0.1), time.sleep(0.005)))
        elapsed = time.monotonic() - t0
        assert hit, "no switch-back started"
        assert any(e["event"] == "error" and "switch-back" in e["reason"] for e in hit[0].events)
        assert len(out["errors"]) == 3  # every rank stopped: one failed, the others aborted
        assert not any("timed out" in str(e) for e in out["errors"].values())
        assert elapsed < 10  # the failure is seen after the RC detection time, not at 20 s


def test_surfaced_error_flushes_the_posted_recvs():
    with build_ring(2, shift=True, **FAST) as c:
        a, b = c.hosts
        cap = QPCap(max_send_wr=8, max_recv_wr=8, max_send_sge=1, max_recv_sge=1)
        rcq = b.create_cq()
        qa = a.create_qp(a.create_cq(), a.create_cq(), cap)
        qb = b.create_qp(b.create_cq(), rcq, cap)
        _connect(c, qa, qb)
        for h in c.hosts:
            h.endpoint.handshake_timeout = 0.3
        qb.post_recv([RecvWR(i) for i in range(3)])
        c.hosts[1].nics[1].kill()  # no backup path: the failover cannot be masked
        inject_fault(c, "nic_down", 1)
        qb.post_send(SendWR(7, Opcode.RDMA_WRITE))
        assert rcq.wait(10)
        time.sleep(0.05)
        wcs = rcq.poll(8)
        assert [w.wr_id for w in wcs] == [0, 1, 2]
        assert all(w.status == WCStatus.WR_FLUSH_ERR for w in wcs)
        assert qb.sq_state == SendState.FAILED
