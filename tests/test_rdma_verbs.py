"""Emulated verbs: RC semantics, the QP state machine, and the errors a real device returns."""

import errno

import numpy as np
import pytest

from causalkit.systems.rdma.verbs import (
    SGE,
    Access,
    Fabric,
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
from causalkit.systems.rdma.wire import KIND_REQ, Packet


def pair(mtu=256, timeout=10, retry_cnt=3, rnr_retry=7, cap=None):
    """Two devices linked by an in-process path, one connected QP each (manual, virtual clock)."""
    f = Fabric(mode="manual")
    a, b = f.add_device("a", mtu=mtu), f.add_device("b", mtu=mtu)
    path = f.connect(a, b)
    pa, pb = a.alloc_pd(), b.alloc_pd()
    ca, cb = a.create_cq(), b.create_cq()
    qa, qb = pa.create_qp(ca, ca, cap), pb.create_qp(cb, cb, cap)
    bring_up(qa, qb, timeout=timeout, retry_cnt=retry_cnt, rnr_retry=rnr_retry)
    bring_up(qb, qa, timeout=timeout, retry_cnt=retry_cnt, rnr_retry=rnr_retry)
    return f, path, (pa, ca, qa), (pb, cb, qb)


def wait_wcs(cq, n, timeout=5.0):
    out = []
    while len(out) < n:
        assert cq.wait(timeout), f"only {len(out)} of {n} completions"
        out += cq.poll(n - len(out))
    return out


def test_packet_codec_round_trip():
    p = Packet(KIND_REQ, 1, 3, 0, 7, 8, 9, 10, 11, 12, 2 ** 40, 13, 14, 15, 2 ** 63, 17, b"xyz")
    assert Packet.decode(p.encode()) == p


@pytest.mark.parametrize("drop", [0.0, 0.3])
def test_multi_packet_write_is_placed_exactly_under_loss(drop):
    f, path, (pa, ca, qa), (pb, cb, qb) = pair()
    path.drop(drop)
    src = np.random.default_rng(0).integers(0, 256, 5000, dtype=np.uint8)
    dst = np.zeros_like(src)
    ma, mb = pa.reg_mr(src), pb.reg_mr(dst)
    qa.post_send(SendWR(1, Opcode.RDMA_WRITE, (ma.sge(),), mb.addr, mb.rkey))
    (wc,) = wait_wcs(ca, 1)
    assert wc.status == WCStatus.SUCCESS and wc.byte_len == 5000
    np.testing.assert_array_equal(dst, src)
    if drop:
        assert path.dropped[0] + path.dropped[1] > 0  # go-back-N actually had to retransmit


def test_send_with_imm_scatters_into_recv_sges_and_read_and_atomics_work():
    f, path, (pa, ca, qa), (pb, cb, qb) = pair()
    path.drop(0.2)
    src = np.arange(600, dtype=np.uint16).view(np.uint8).copy()
    ma = pa.reg_mr(src)
    r1, r2 = np.zeros(700, np.uint8), np.zeros(700, np.uint8)
    m1, m2 = pb.reg_mr(r1), pb.reg_mr(r2)
    qb.post_recv(RecvWR(5, (m1.sge(0, 700), m2.sge(0, 700))))
    qa.post_send(SendWR(1, Opcode.SEND_WITH_IMM, (ma.sge(),), imm_data=99))
    (rwc,) = wait_wcs(cb, 1)
    assert (rwc.wr_id, rwc.opcode, rwc.imm_data, rwc.byte_len) == (5, WCOpcode.RECV, 99, 1200)
    np.testing.assert_array_equal(np.concatenate([r1, r2[:500]]), src)
    wait_wcs(ca, 1)
    # READ back what the responder holds
    back = np.zeros(700, np.uint8)
    mback = pa.reg_mr(back)
    qa.post_send(SendWR(2, Opcode.RDMA_READ, (mback.sge(),), m1.addr, m1.rkey))
    assert wait_wcs(ca, 1)[0].status == WCStatus.SUCCESS
    np.testing.assert_array_equal(back, r1)
    # atomics: applied exactly once each despite packet loss (duplicates answered from cache)
    ctr = np.zeros(1, np.uint64)
    old = np.zeros(1, np.uint64)
    mc, mo = pb.reg_mr(ctr), pa.reg_mr(old)
    for i in range(20):
        qa.post_send(SendWR(10 + i, Opcode.ATOMIC_FETCH_AND_ADD, (mo.sge(),), mc.addr, mc.rkey,
                            compare_add=3))
    wait_wcs(ca, 20)
    assert int(ctr[0]) == 60 and int(old[0]) == 57
    qa.post_send(SendWR(40, Opcode.ATOMIC_CMP_AND_SWP, (mo.sge(),), mc.addr, mc.rkey,
                        compare_add=60, swap=7))
    wait_wcs(ca, 1)
    assert int(ctr[0]) == 7 and int(old[0]) == 60


def test_write_with_imm_consumes_a_recv_and_rnr_is_retried_until_one_is_posted():
    f, path, (pa, ca, qa), (pb, cb, qb) = pair()
    src, dst = np.ones(10, np.uint8), np.zeros(10, np.uint8)
    ma, mb = pa.reg_mr(src), pb.reg_mr(dst)
    qa.post_send(SendWR(1, Opcode.RDMA_WRITE_WITH_IMM, (ma.sge(),), mb.addr, mb.rkey,
                        imm_data=4))
    f.run_until(lambda: False, timeout=0.01)  # no RECV posted: RNR NAKs, no completion
    assert len(ca) == 0 and len(cb) == 0
    qb.post_recv(RecvWR(8))
    (rwc,) = wait_wcs(cb, 1)
    assert rwc.opcode == WCOpcode.RECV_RDMA_WITH_IMM and rwc.imm_data == 4
    assert wait_wcs(ca, 1)[0].status == WCStatus.SUCCESS and dst.sum() == 10


def test_rnr_retry_exhaustion():
    f, path, (pa, ca, qa), (pb, cb, qb) = pair(rnr_retry=2)
    src = np.ones(4, np.uint8)
    qa.post_send(SendWR(1, Opcode.SEND, (pa.reg_mr(src).sge(),)))
    assert wait_wcs(ca, 1)[0].status == WCStatus.RNR_RETRY_EXC_ERR
    assert qa.state == QPState.ERR


def test_retry_exhaustion_flushes_later_wrs_and_post_then_fails():
    f, path, (pa, ca, qa), (pb, cb, qb) = pair(timeout=10, retry_cnt=2)
    src, dst = np.ones(8, np.uint8), np.zeros(8, np.uint8)
    ma, mb = pa.reg_mr(src), pb.reg_mr(dst)
    qa.post_recv(RecvWR(77))
    path.kill()
    t0 = f.now()
    qa.post_send([SendWR(i, Opcode.RDMA_WRITE, (ma.sge(),), mb.addr, mb.rkey, signaled=False)
                  for i in range(3)])
    wcs = wait_wcs(ca, 4)
    statuses = [(w.wr_id, w.status) for w in wcs]
    assert statuses[0] == (0, WCStatus.RETRY_EXC_ERR)  # unsignaled, but errors always complete
    assert (1, WCStatus.WR_FLUSH_ERR) in statuses and (2, WCStatus.WR_FLUSH_ERR) in statuses
    assert (77, WCStatus.WR_FLUSH_ERR) in statuses
    # (retry_cnt + 1) local ACK timeouts of 4.096 us * 2**10, on the virtual clock
    assert f.now() - t0 == pytest.approx(3 * 4.096e-6 * 2 ** 10, rel=1e-6)
    assert qa.state == QPState.ERR
    with pytest.raises(VerbsError) as e:
        qa.post_send(SendWR(9, Opcode.RDMA_WRITE, (ma.sge(),), mb.addr, mb.rkey))
    assert e.value.errno == errno.EINVAL
    with pytest.raises(VerbsError):
        qa.post_recv(RecvWR(1))
    bring_up(qa, qb)  # reset and drive through the states again: usable
    assert qa.state == QPState.RTS


def test_state_machine_rejects_wrong_states_and_transitions():
    f = Fabric(mode="manual")
    a = f.add_device("a")
    pd_, cq = a.alloc_pd(), a.create_cq()
    qp = pd_.create_qp(cq, cq)
    buf = np.zeros(8, np.uint8)
    mr = pd_.reg_mr(buf)
    wr = SendWR(1, Opcode.RDMA_WRITE, (mr.sge(),), mr.addr, mr.rkey)
    with pytest.raises(VerbsError, match="RESET"):
        qp.post_send(wr)
    with pytest.raises(VerbsError):
        qp.post_recv(RecvWR(1))
    with pytest.raises(VerbsError, match="RESET -> RTS"):
        qp.modify(QPState.RTS)
    qp.modify(QPState.INIT)
    qp.post_recv(RecvWR(1))  # allowed from INIT on
    with pytest.raises(VerbsError, match="INIT"):
        qp.post_send(wr)
    with pytest.raises(VerbsError, match="dest_dev"):
        qp.modify(QPState.RTR)
    qp.modify(QPState.RTR, dest_dev="b", dest_qp_num=5)
    with pytest.raises(VerbsError, match="RTR"):
        qp.post_send(wr)
    with pytest.raises(VerbsError, match="retry_cnt"):
        qp.modify(QPState.RTS, retry_cnt=9)


def test_oversized_and_malformed_wrs_fail_at_post():
    cap = QPCap(max_send_wr=4, max_recv_wr=2, max_send_sge=2, max_recv_sge=1)
    f, path, (pa, ca, qa), (pb, cb, qb) = pair(cap=cap)
    buf = np.zeros(64, np.uint8)
    mr = pa.reg_mr(buf)
    s = mr.sge(0, 8)
    with pytest.raises(VerbsError, match="max_send_sge") as e:
        qa.post_send(SendWR(1, Opcode.RDMA_WRITE, (s, s, s), mr.addr, mr.rkey))
    assert e.value.errno == errno.EINVAL
    big = SGE(mr.addr, (1 << 31) + 1, mr.lkey)
    with pytest.raises(VerbsError, match="max_msg_sz"):
        qa.post_send(SendWR(1, Opcode.RDMA_WRITE, (big,), mr.addr, mr.rkey))
    with pytest.raises(VerbsError, match="8-byte"):
        qa.post_send(SendWR(1, Opcode.ATOMIC_FETCH_AND_ADD, (mr.sge(0, 4),), mr.addr, mr.rkey))
    with pytest.raises(VerbsError, match="full") as e:
        qa.post_send([SendWR(i, Opcode.RDMA_WRITE, (s,), mr.addr, mr.rkey) for i in range(5)])
    assert e.value.errno == errno.ENOMEM
    with pytest.raises(VerbsError, match="max_recv_sge"):
        qb.post_recv(RecvWR(1, (s, s)))
    with pytest.raises(VerbsError):
        pa.create_qp(ca, ca, QPCap(max_send_wr=10 ** 6))
    with pytest.raises(TypeError, match="numpy"):
        pa.reg_mr(bytearray(8))


def test_keys_from_another_device_fail_like_a_real_nic():
    f, path, (pa, ca, qa), (pb, cb, qb) = pair()
    local, remote = np.zeros(16, np.uint8), np.zeros(16, np.uint8)
    ma, mb = pa.reg_mr(local), pb.reg_mr(remote)
    mb_on_a = pa.reg_mr(remote)  # the same buffer registered on the *sender's* device
    # rkey of device a used towards device b: remote access error
    qa.post_send(SendWR(1, Opcode.RDMA_WRITE, (ma.sge(),), mb.addr, mb_on_a.rkey))
    assert wait_wcs(ca, 1)[0].status == WCStatus.REM_ACCESS_ERR
    assert qa.state == QPState.ERR
    bring_up(qa, qb)
    bring_up(qb, qa)
    # lkey of device b used on device a: local protection error
    qa.post_send(SendWR(2, Opcode.RDMA_WRITE, (SGE(mb.addr, 16, mb.lkey),), mb.addr, mb.rkey))
    assert wait_wcs(ca, 1)[0].status == WCStatus.LOC_PROT_ERR
    bring_up(qa, qb)
    bring_up(qb, qa)
    # out of the MR's range, and missing remote-write permission
    qa.post_send(SendWR(3, Opcode.RDMA_WRITE, (ma.sge(),), mb.addr + 8, mb.rkey))
    assert wait_wcs(ca, 1)[0].status == WCStatus.REM_ACCESS_ERR
    bring_up(qa, qb)
    bring_up(qb, qa)
    ro = pb.reg_mr(np.zeros(16, np.uint8), Access.REMOTE_READ)
    qa.post_send(SendWR(4, Opcode.RDMA_WRITE, (ma.sge(),), ro.addr, ro.rkey))
    assert wait_wcs(ca, 1)[0].status == WCStatus.REM_ACCESS_ERR


def test_send_larger_than_recv_buffer_errors_on_both_sides():
    f, path, (pa, ca, qa), (pb, cb, qb) = pair()
    src = np.ones(100, np.uint8)
    small = pb.reg_mr(np.zeros(10, np.uint8))
    qb.post_recv(RecvWR(3, (small.sge(),)))
    qa.post_send(SendWR(1, Opcode.SEND, (pa.reg_mr(src).sge(),)))
    assert wait_wcs(cb, 1)[0].status == WCStatus.LOC_LEN_ERR
    assert wait_wcs(ca, 1)[0].status == WCStatus.REM_INV_REQ_ERR


def test_wqe_ring_read_back_and_held_doorbell():
    f, path, (pa, ca, qa), (pb, cb, qb) = pair()
    src, dst = np.arange(4, dtype=np.uint8), np.zeros(4, np.uint8)
    ma, mb = pa.reg_mr(src), pb.reg_mr(dst)
    wrs = [SendWR(i, Opcode.RDMA_WRITE, (ma.sge(i, 1),), mb.addr + i, mb.rkey) for i in range(4)]
    qa.post_send(wrs, ring=False)
    assert [i for i, _ in qa.send_queue()] == [0, 1, 2, 3]
    assert qa.send_queue()[2][1].remote_addr == mb.addr + 2
    f.run_until(lambda: False, timeout=0.05)
    assert dst.sum() == 0  # posted but not rung: the NIC has not seen them
    qa.ring_doorbell(2)
    wait_wcs(ca, 2)
    np.testing.assert_array_equal(dst, [0, 1, 0, 0])
    qa.ring_doorbell()
    wait_wcs(ca, 2)
    np.testing.assert_array_equal(dst, src)
    assert qa.send_queue() == [] and qa.read_send_wqe(1).wr_id == 1


@pytest.mark.parametrize("transport", ["udp", "shm"])
def test_os_backed_paths_carry_rc_traffic(transport):
    from causalkit.systems.rdma.paths import SharedMemoryPath, UdpPath
    with Fabric(mode="threaded") as f:
        a, b = f.add_device("a"), f.add_device("b")
        path = f.connect(a, b, UdpPath() if transport == "udp" else SharedMemoryPath())
        pa, pb = a.alloc_pd(), b.alloc_pd()
        ca, cb = a.create_cq(), b.create_cq()
        qa, qb = pa.create_qp(ca, ca), pb.create_qp(cb, cb)
        bring_up(qa, qb)
        bring_up(qb, qa)
        src = np.random.default_rng(1).integers(0, 256, 100_000, dtype=np.uint8)
        dst = np.zeros_like(src)
        ma, mb = pa.reg_mr(src), pb.reg_mr(dst)
        qa.post_send(SendWR(1, Opcode.RDMA_WRITE, (ma.sge(),), mb.addr, mb.rkey))
        assert wait_wcs(ca, 1, timeout=30)[0].status == WCStatus.SUCCESS
        np.testing.assert_array_equal(dst, src)
        assert path.transport == transport and path.emulated


def test_fault_hook_arguments_are_validated():
    from causalkit.systems.rdma.paths import InProcessPath
    p = InProcessPath()
    with pytest.raises(ValueError, match="p"):
        p.drop(1.5)
    with pytest.raises(ValueError, match="delay"):
        p.delay(-1)
    with pytest.raises(ValueError, match="t0"):
        p.link_down(2, 1)
    with pytest.raises(ValueError, match="mode"):
        Fabric(mode="fast")


def _responder(shm_name, conn):
    """Child process: device "b" on end 1 of the shared-memory path; reports what it received."""
    from causalkit.systems.rdma.paths import SharedMemoryPath
    path = SharedMemoryPath.attach(shm_name)
    with Fabric(mode="threaded") as f:
        b = f.add_device("b")
        f.attach(b, "a", path, 1)
        pb, cb = b.alloc_pd(), b.create_cq()
        qb = pb.create_qp(cb, cb)
        buf = np.zeros(50_000, np.uint8)
        mb = pb.reg_mr(buf)
        conn.send((qb.qp_num, mb.addr, mb.rkey))
        qpn_a = conn.recv()
        bring_up(qb, ("a", qpn_a))
        qb.post_recv(RecvWR(1))
        conn.send("ready")
        ok = cb.wait(30)
        wc = cb.poll(1)[0] if ok else None
        conn.send((ok and wc.status == WCStatus.SUCCESS, wc.imm_data if ok else None,
                   int(buf.astype(np.int64).sum())))
        conn.recv()  # keep the responder alive until the requester saw its ACK


def test_two_processes_over_shared_memory():
    import multiprocessing as mp

    from causalkit.systems.rdma.paths import SharedMemoryPath
    path = SharedMemoryPath()
    ctx = mp.get_context("fork")
    parent, child = ctx.Pipe()
    proc = ctx.Process(target=_responder, args=(path.name, child), daemon=True)
    proc.start()
    try:
        with Fabric(mode="threaded") as f:
            a = f.add_device("a")
            f.attach(a, "b", path, 0)
            pa, ca = a.alloc_pd(), a.create_cq()
            qa = pa.create_qp(ca, ca)
            qpn_b, addr, rkey = parent.recv()
            parent.send(qa.qp_num)
            bring_up(qa, ("b", qpn_b))
            assert parent.poll(30) and parent.recv() == "ready"
            src = np.random.default_rng(2).integers(0, 256, 50_000, dtype=np.uint8)
            ma = pa.reg_mr(src)
            qa.post_send(SendWR(1, Opcode.RDMA_WRITE_WITH_IMM, (ma.sge(),), addr, rkey,
                                imm_data=1234))
            assert parent.poll(30)
            ok, imm, checksum = parent.recv()
            assert ok and imm == 1234 and checksum == int(src.astype(np.int64).sum())
            assert wait_wcs(ca, 1, timeout=30)[0].status == WCStatus.SUCCESS
            parent.send("done")
    finally:
        proc.join(30)
    assert proc.exitcode == 0
