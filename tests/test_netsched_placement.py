"""Best-fit placement against brute force; vClos placement with ECMP routing; the ECMP knobs."""

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from causalkit.systems.netsched import (
    ECMP,
    LeafSpine,
    best_fit_leaves,
    job_flows,
    simulate_cluster,
    synthetic_trace,
)
from causalkit.systems.netsched.schedulers import ClusterState, make_scheduler
from causalkit.systems.netsched.sim import steady_rates

TWIN = LeafSpine(leaves=4, spines=8, gpus_per_leaf=8)


def _brute_best_fit(free, n):
    """(leaves used, free GPUs on them) minimised over every leaf subset that holds n GPUs."""
    return min((len(S), int(free[list(S)].sum()))
               for k in range(1, len(free) + 1)
               for S in itertools.combinations(range(len(free)), k) if free[list(S)].sum() >= n)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.integers(0, 8), min_size=1, max_size=7), st.data())
def test_best_fit_leaves_the_least_free_capacity(free, data):
    free = np.array(free)
    if free.sum() == 0:
        return
    n = data.draw(st.integers(1, int(free.sum())))
    take = best_fit_leaves(free, n)
    assert take.sum() == n and np.all((take >= 0) & (take <= free))
    used = np.flatnonzero(take)
    assert (len(used), int(free[used].sum())) == _brute_best_fit(free, n)
    assert np.count_nonzero((take > 0) & (take < free)) <= 1          # one partial leaf


def test_best_fit_prefers_two_half_leaves_over_splitting_a_full_one():
    # 10 GPUs: leaves with 5 + 5 free are used up exactly; first fit / emptiest-first would
    # take 8 + 2 and leave a 6-GPU hole on a touched leaf
    c = LeafSpine(4, 8, 8)
    state = ClusterState(c)
    state.gpu_owner[np.r_[16:19, 24:27]] = 99              # leaves 2 and 3 keep 5 free each
    p = make_scheduler("bestfit").place(state, 0, 10)
    assert sorted(np.unique(c.leaf_of(p.gpus)).tolist()) == [2, 3]
    assert best_fit_leaves([0, 0, 0], 1).sum() == 0          # nothing free: nothing taken


def test_vclos_ecmp_places_like_vclos_and_routes_like_ecmp():
    jobs = synthetic_trace(60, TWIN, 0.9, random_state=4, size_mix={2: 1, 4: 1, 8: 1, 16: 1})
    vc = make_scheduler("vclos")
    ve = make_scheduler("vclos-ecmp", seed=3)
    assert isinstance(ve.routing, ECMP)
    s1, s2 = ClusterState(TWIN), ClusterState(TWIN)
    for j, n in enumerate(jobs["n_gpus"]):
        a, b = vc.place(s1, j, int(n)), ve.place(s2, j, int(n))
        if a is None:
            assert b is None
            break
        np.testing.assert_array_equal(a.gpus, b.gpus)
        assert a.links == b.links and b.ports is None
        s1.commit(a)
        s2.commit(b)
    # a lone 16-GPU job: vClos placement at line rate under source routing, ECMP-limited here
    alone = steady_rates(TWIN, [{"n_gpus": 16}], "vclos-ecmp", seed=0)["rate_frac"].iloc[0]
    ecmp = steady_rates(TWIN, [{"n_gpus": 16}], "ecmp", seed=0)["rate_frac"].iloc[0]
    assert alone == pytest.approx(ecmp)                   # same GPUs (leaves 0-1), same hash
    with pytest.raises(ValueError, match="ECMP options"):
        make_scheduler("vclos", qps=2)


@pytest.mark.parametrize("qps", [1, 2, 4, 8])
def test_queue_pairs_split_a_connection_and_the_rate_follows_the_busiest_link(qps):
    # a 16-GPU ring on two leaves: 8 channels each way, qps hashed flows per channel of 1/qps
    # of its bytes; the job's rate is C * qps / (most sub-flows on one uplink or downlink)
    c = LeafSpine(2, 8, 8)
    for seed in range(4):
        sched = make_scheduler("ecmp", seed, qps=qps)
        p = sched.place(ClusterState(c), 0, 16)
        src, dst, chan, w = sched.routing.split(c, *job_flows(c, p.gpus, "ring"))
        assert len(src) == 16 * qps and w.sum() == pytest.approx(16)
        spine = sched.routing.spines(c.spines, src, dst, chan, 0)
        worst = max(np.bincount(spine[c.leaf_of(src) == a], minlength=8).max() for a in (0, 1))
        out = steady_rates(c, [{"n_gpus": 16}], "ecmp", seed=seed, qps=qps)
        assert out["rate_frac"].iloc[0] == pytest.approx(qps / worst)


def test_adaptive_routing_runs_a_balanced_job_at_line_rate():
    for n in (16, 32):
        out = steady_rates(TWIN, [{"n_gpus": n}], "bestfit", adaptive=True)
        assert out["rate_frac"].iloc[0] == pytest.approx(1.0)
    res = simulate_cluster(TWIN, [{"arrival": 0, "n_gpus": 32, "duration": 10.0}], "ecmp",
                           adaptive=True)
    assert res.jobs["slowdown"].iloc[0] == pytest.approx(1.0)
    with pytest.raises(ValueError, match="qps"):
        ECMP(qps=0)
    with pytest.raises(TypeError, match="adaptive"):
        ECMP(adaptive="yes")
