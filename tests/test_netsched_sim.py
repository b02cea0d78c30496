"""Simulator: line rate, collisions, FIFO timing and the isolation invariants."""

import itertools

import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st

from causalkit.systems.netsched import (
    LeafSpine,
    OCSVClos,
    VClos,
    job_flows,
    max_min_rates,
    simulate_cluster,
    synthetic_trace,
)
from causalkit.systems.netsched.schedulers import ClusterState, make_scheduler
from causalkit.systems.netsched.sim import job_load, steady_rates

TWIN = LeafSpine(leaves=4, spines=8, gpus_per_leaf=8)


@pytest.mark.parametrize("pattern", ["ring", "alltoall", "halving_doubling"])
def test_vclos_job_alone_reaches_line_rate(pattern):
    out = steady_rates(TWIN, [{"n_gpus": 32, "pattern": pattern}], "vclos")
    assert out["placed"].all()
    assert out["rate_frac"].iloc[0] == pytest.approx(1.0, rel=1e-12)
    res = simulate_cluster(TWIN, [{"arrival": 0, "n_gpus": 16, "duration": 100.0,
                           "comm_fraction": 0.7, "pattern": pattern}], "vclos")
    assert res.jobs["jct"].iloc[0] == pytest.approx(100.0)
    assert res.jobs["slowdown"].iloc[0] == pytest.approx(1.0)


def test_ecmp_collision_slows_a_job_by_its_most_loaded_link():
    # one 16-GPU ring job on two leaves: 8 flows per direction hashed onto 8 spines; the job's
    # rate is C / (max flows sharing an uplink or downlink)
    c = LeafSpine(2, 8, 8)
    for seed in range(5):
        sched = make_scheduler("ecmp", seed)
        p = sched.place(ClusterState(c), 0, 16)
        src, dst, chan, _ = job_flows(c, p.gpus, "ring")
        spine = sched.routing.spines(c.spines, src, dst, chan, 0)
        leaf = c.leaf_of(src)
        worst = max(np.bincount(spine[leaf == a], minlength=8).max() for a in (0, 1))
        out = steady_rates(c, [{"n_gpus": 16}], "ecmp", seed=seed)
        assert out["rate_frac"].iloc[0] == pytest.approx(1.0 / worst)


def test_fifo_queueing_delay_closed_form():
    jobs = [{"arrival": 0.0, "n_gpus": 32, "duration": 50.0},
            {"arrival": 10.0, "n_gpus": 32, "duration": 20.0},
            {"arrival": 15.0, "n_gpus": 4, "duration": 5.0}]
    res = simulate_cluster(TWIN, jobs, "vclos")
    j = res.jobs.set_index("job_id")
    np.testing.assert_allclose(j["start"], [0.0, 50.0, 70.0])
    np.testing.assert_allclose(j["jwt"], [0.0, 40.0, 55.0])
    np.testing.assert_allclose(j["jct"], [50.0, 60.0, 60.0])
    back = simulate_cluster(TWIN, jobs, "vclos", backfill=True).jobs.set_index("job_id")
    assert back.loc[2, "start"] == 50.0 + 20.0   # the 4-GPU job still waits: the cluster is full


def test_backfill_lets_small_jobs_pass_a_blocked_head():
    jobs = [{"arrival": 0.0, "n_gpus": 16, "duration": 50.0},
            {"arrival": 1.0, "n_gpus": 32, "duration": 10.0},
            {"arrival": 2.0, "n_gpus": 8, "duration": 5.0}]
    strict = simulate_cluster(TWIN, jobs, "vclos").jobs.set_index("job_id")
    back = simulate_cluster(TWIN, jobs, "vclos", backfill=True).jobs.set_index("job_id")
    assert strict.loc[2, "start"] == 60.0 and back.loc[2, "start"] == 2.0


def _overlapping(res):
    j = res.jobs.set_index("job_id")
    for a, b in itertools.combinations(j.index, 2):
        if j.loc[a, "start"] < j.loc[b, "finish"] and j.loc[b, "start"] < j.loc[a, "finish"]:
            yield a, b


@settings(max_examples=12, deadline=None)
@given(st.integers(0, 10_000), st.sampled_from([0.6, 1.2]))
def test_vclos_isolation_invariants(seed, load):
    c = LeafSpine(6, 4, 4)
    jobs = synthetic_trace(40, c, load, random_state=seed,
                           size_mix={1: 1, 2: 1, 4: 1, 6: 1, 8: 1, 12: 1})
    res = simulate_cluster(c, jobs, "vclos")
    assert np.all(res.link_peak <= c.capacity * (1 + 1e-9))
    assert np.allclose(res.jobs["slowdown"], 1.0)          # no job ever loses line rate
    for a, b in _overlapping(res):
        pa, pb = res.placements[a], res.placements[b]
        assert not set(pa.links) & set(pb.links), "leaf-spine link reserved by two jobs"
        assert not set(pa.gpus.tolist()) & set(pb.gpus.tolist())
    # every link a job's flows use lies inside its reservation
    sched = make_scheduler("vclos")
    jobs_by_id = res.jobs.set_index("job_id")
    for jid, p in res.placements.items():
        links, _, _ = job_load(c, p, jobs_by_id.loc[jid, "pattern"], sched.routing)
        fabric = links[links >= 2 * c.n_gpus] - 2 * c.n_gpus
        leaf_port = fabric % (c.leaves * c.spines)
        used = {(int(x // c.spines), int(x % c.spines)) for x in leaf_port}
        assert used <= set(p.links)


@settings(max_examples=12, deadline=None)
@given(st.integers(0, 10_000))
def test_ocs_port_conservation(seed):
    c = LeafSpine(6, 4, 4, ocs=True)
    jobs = synthetic_trace(40, c, 1.0, random_state=seed,
                           size_mix={2: 1, 4: 1, 8: 1, 12: 1, 16: 1})
    res = simulate_cluster(c, jobs, "ocs-vclos")
    assert np.all(res.link_peak <= c.capacity * (1 + 1e-9))
    assert np.allclose(res.jobs["slowdown"], 1.0 + 0.05 / res.jobs["duration"]
                       * (res.jobs["n_leaves"] > 1))
    for p in res.placements.values():
        n_leaves = len(np.unique(c.leaf_of(p.gpus)))
        # one circuit per (GPU of a multi-leaf job): both ends use exactly one port each
        assert len(p.circuits) == (0 if n_leaves == 1 else (len(p.gpus) // 2 if n_leaves == 2
                                                             else len(p.gpus)))
        for _leaf, port, kind, _peer, peer_port in p.circuits:
            assert 0 <= port < c.spines
            assert 0 <= peer_port < (c.leaves if kind == "spine" else c.spines)
    for a, b in _overlapping(res):
        ends = [{(x[0], x[1]) for x in res.placements[j].circuits}
                | {(x[2], x[3], x[4]) for x in res.placements[j].circuits} for j in (a, b)]
        assert not ends[0] & ends[1], "OCS port used by two circuits"


def test_link_load_within_capacity_for_every_policy():
    c = LeafSpine(8, 8, 8)
    jobs = synthetic_trace(150, c, 0.9, random_state=3)
    for name in ("ecmp", "bestfit", "vclos", "ocs-vclos", "ideal"):
        res = simulate_cluster(c.with_ocs(name == "ocs-vclos"), jobs, name)
        assert np.all(res.link_peak <= c.capacity * (1 + 1e-9))
        assert res.jobs["finish"].notna().all()
        assert (res.jobs["slowdown"] >= 1 - 1e-9).all()
        assert 0 < res.utilization <= 1 and 0 <= res.fragmentation <= 1
        assert 0 <= res.network_blocked <= res.fragmentation + 1e-12
        if name in ("ecmp", "bestfit", "ideal"):
            assert res.network_blocked == 0
        assert 0 < res.jain <= 1


def test_vclos_beats_ecmp_under_heavy_load_and_ideal_bounds_it():
    c = LeafSpine(16, 8, 8)
    jobs = synthetic_trace(300, c, 0.9, random_state=11)
    jct = {n: simulate_cluster(c.with_ocs(n == "ocs-vclos"), jobs, n).jobs["jct"].mean()
           for n in ("ecmp", "vclos", "ocs-vclos", "ideal")}
    assert jct["vclos"] < jct["ecmp"]
    assert jct["ideal"] <= jct["vclos"] * (1 + 1e-9)


def test_result_summary_and_plot(tmp_path):
    res = simulate_cluster(TWIN, synthetic_trace(20, TWIN, 0.7, random_state=0), "ecmp")
    s = res.to_dict()
    assert s["simulated"] is True and s["n_jobs"] == 20
    fig = res.plot()
    fig.savefig(tmp_path / "r.png")
    assert (tmp_path / "r.png").stat().st_size > 0
    assert isinstance(res.timeline, pd.DataFrame)


def test_ocs_places_a_job_that_network_segmentation_blocks_for_vclos():
    # leaf 0 lost its link to spine 0 and leaf 1 its link to spine 1 (reserved by other jobs):
    # no spine reaches both free GPUs, but an OCS can still build a circuit between them
    c = LeafSpine(2, 2, 2)
    state = ClusterState(c)
    state.gpu_owner[[0, 2]] = [7, 8]
    state.link_owner[0, 0], state.link_owner[1, 1] = 7, 8
    assert VClos().place(state, 9, 2) is None
    co = c.with_ocs()
    ostate = ClusterState(co)
    ostate.gpu_owner[[0, 2]] = [7, 8]
    ostate.leaf_port_owner[0, 0], ostate.leaf_port_owner[1, 1] = 7, 8
    ostate.spine_port_owner[0, 0], ostate.spine_port_owner[1, 1] = 7, 8
    p = OCSVClos().place(ostate, 9, 2)
    assert p is not None and sorted(p.gpus.tolist()) == [1, 3]
    assert p.circuits == [(0, 1, "leaf", 1, 0)]
    ostate.commit(p)
    links, w, _ = job_load(co, p, "ring", OCSVClos().routing)
    W = sp.csc_matrix((w, links, [0, links.size]), shape=(co.n_links, 1))
    assert max_min_rates(W, co.capacity)[0][0] == pytest.approx(c.link_gbps)
