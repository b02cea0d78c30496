"""Diagnosis statistics on known series, and the levels on SIMULATED cluster-scale traces."""

import numpy as np
import pytest

from causalkit.systems.tracing import SyntheticCluster, diagnose, levels


def test_jitter_windows_find_a_spike():
    x = np.full(40, 10.0)
    x[17] = 45.0
    runs = levels.jitter_windows(x, window=8, ratio=2.0)
    assert len(runs) == 1
    lo, hi, r = runs[0]
    assert lo <= 17 < hi and r == pytest.approx(4.5)
    assert levels.jitter_windows(np.full(40, 10.0)) == []


def test_change_point_finds_a_regression():
    rng = np.random.default_rng(0)
    x = np.concatenate([rng.normal(10, 0.5, 25), rng.normal(20, 0.5, 25)])
    t, ratio = levels.change_point(x)
    assert t == 25 and ratio == pytest.approx(2.0, rel=0.05)
    assert levels.change_point(rng.normal(10, 0.5, 50)) is None


@pytest.mark.parametrize("k", [2, 3, 8, 64])
def test_robust_excess_flags_only_the_slow_rank(k):
    rng = np.random.default_rng(k)
    x = rng.lognormal(0, 0.1, size=(k, 40))
    x[k - 1] *= 1.5
    stats = levels.robust_excess(x)
    flagged = (stats["rel"] >= 0.15) & (stats["z"] >= 2)
    assert np.flatnonzero(flagged).tolist() == [k - 1]
    with pytest.raises(ValueError, match="two ranks"):
        levels.robust_excess(x[:1])


def test_fence_and_block_rules():
    s = np.array([1.0, 1.1, 0.9, 1.05, 0.95, 6.0, 1.0, 1.02])
    assert np.flatnonzero(levels.fence_outliers(s)).tolist() == [5]
    p50 = np.array([1.0, 1.1, 0.9, 1.0, 5.0, 5.2, 4.9, 5.1])   # a degraded half
    assert np.flatnonzero(levels.block_outliers(p50)).tolist() == [4, 5, 6, 7]
    assert not levels.fence_outliers(p50 * 0 + 1).any()


@pytest.mark.parametrize("seed", [0, 1])
def test_simulated_compute_straggler_is_masked_and_found(seed):
    """SIMULATED 256 ranks: the straggler's collective is the shortest, and it is named."""
    sim = SyntheticCluster(256, fault="compute_straggler", faulty_rank=77, seed=seed)
    report = diagnose(sim.generate())
    top = report.culprits[0]
    assert (top.kind, top.rank, top.category) == ("compute_straggler", 77, "compute")
    assert top.details["masked"]
    assert {f.rank for f in report.culprits} == {77}
    assert "shorter than every peer" in top.evidence


def test_simulated_link_degradation_names_the_group():
    sim = SyntheticCluster(256, fault="link_degradation", faulty_rank=40, ep_size=8, seed=3)
    report = diagnose(sim.generate())
    named = {f.rank for f in report.culprits if f.kind == "link_degradation"}
    assert named == set(range(40, 48))
    assert not [f for f in report.culprits if f.category == "compute"]


def test_simulated_healthy_job_has_no_culprit():
    rows = SyntheticCluster(128, fault=None, seed=4).run()
    assert rows.loc[0, "n_flagged"] == 0 and bool(rows.loc[0, "simulated"])


def test_synthetic_argument_checks():
    with pytest.raises(ValueError, match="multiple of ep_size"):
        SyntheticCluster(10, ep_size=8)
    with pytest.raises(ValueError, match="fault"):
        SyntheticCluster(16, fault="nic_down")
    with pytest.raises(ValueError, match="faulty_rank"):
        SyntheticCluster(16, fault="compute_straggler", faulty_rank=16)
