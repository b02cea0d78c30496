"""The vClos allocation program: HiGHS MILP and enumeration equal brute force."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from causalkit.systems.netsched.allocation import solve_vclos


def _instance(seed, L, S, G):
    rng = np.random.default_rng(seed)
    link_free = rng.random((L, S)) > rng.uniform(0, 0.6)
    free = rng.integers(0, G + 1, L)
    return link_free, free


def _valid(sol, link_free, free, m, s):
    leaves, spines, cost = sol
    assert len(set(leaves)) == m and len(set(spines)) == s
    assert np.all(free[leaves] >= s)
    assert link_free[np.ix_(leaves, spines)].all()
    assert cost == free[leaves].sum()


@settings(max_examples=80, deadline=None)
@given(st.integers(0, 100_000), st.integers(2, 6), st.integers(2, 5), st.integers(1, 4),
       st.integers(1, 4))
def test_milp_and_enumeration_equal_brute_force(seed, L, S, m, s):
    link_free, free = _instance(seed, L, S, G=4)
    ref = solve_vclos(link_free, free, m, s, solver="brute")
    for solver in ("milp", "enumerate"):
        sol = solve_vclos(link_free, free, m, s, solver=solver)
        if ref is None:
            assert sol is None
        else:
            assert sol is not None
            _valid(sol, link_free, free, m, s)
            assert sol[2] == ref[2]


def test_prefers_fuller_leaves():
    link_free = np.ones((4, 2), bool)
    free = np.array([4, 2, 3, 2])
    leaves, spines, cost = solve_vclos(link_free, free, m=2, s=2)
    assert sorted(leaves) == [1, 3] and cost == 4


def test_reserved_link_blocks_a_pair():
    link_free = np.ones((2, 2), bool)
    link_free[0, 1] = False
    free = np.array([2, 2])
    assert solve_vclos(link_free, free, m=2, s=2) is None
    leaves, spines, _ = solve_vclos(link_free, free, m=2, s=1, solver="milp")
    assert list(spines) == [0]


def test_bad_solver_and_brute_limit():
    with pytest.raises(ValueError, match="solver"):
        solve_vclos(np.ones((2, 2), bool), [2, 2], 1, 1, solver="gurobi")
    with pytest.raises(ValueError, match="tiny"):
        solve_vclos(np.ones((64, 32), bool), np.full(64, 16), 16, 16, solver="brute")


def test_agreement_on_a_fixed_batch_with_many_feasible_cases():
    feasible = 0
    for seed in range(150):
        link_free, free = _instance(seed, L=6, S=4, G=4)
        m, s = 1 + seed % 3, 1 + (seed // 3) % 3
        ref = solve_vclos(link_free, free, m, s, solver="brute")
        sol = solve_vclos(link_free, free, m, s, solver="milp")
        assert (ref is None) == (sol is None)
        if ref is not None:
            feasible += 1
            _valid(sol, link_free, free, m, s)
            assert sol[2] == ref[2]
    assert feasible >= 40
