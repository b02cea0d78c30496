"""Queue-stability verdict: time averages, the trend test, and the simulator at loads below and
above capacity."""

import numpy as np
import pandas as pd
import pytest

from causalkit.systems.netsched import LeafSpine, queue_trend, simulate_cluster, synthetic_trace
from causalkit.systems.netsched.stability import post_warmup, time_average
from causalkit.systems.netsched.studies import large_summary

SMALL = LeafSpine(4, 8, 8)
MIX = {1: 0.3, 2: 0.2, 4: 0.3, 8: 0.2}       # jobs of at most one leaf: no network effects


def test_time_average_matches_fine_sampling():
    rng = np.random.default_rng(1)
    times = np.sort(np.r_[0.0, rng.uniform(0, 10, 30)])
    values = rng.integers(0, 6, times.size).astype(float)
    edges = np.array([0.5, 2.0, 7.5, 12.0])
    grid = np.linspace(0, 12, 1_200_001)
    signal = values[np.searchsorted(times, grid, side="right") - 1]
    ref = [signal[(grid >= a) & (grid < b)].mean()
           for a, b in zip(edges[:-1], edges[1:], strict=True)]
    np.testing.assert_allclose(time_average(times, values, edges), ref, atol=2e-4)


def _timeline(t, q):
    return pd.DataFrame({"time": t, "queued": q})


def test_trend_of_a_linearly_growing_queue_and_of_a_flat_one():
    t = np.arange(0.0, 100 * 3600, 60.0)
    jobs = pd.DataFrame({"arrival": t, "jwt": np.ones_like(t)})
    grow = queue_trend(_timeline(t, np.floor(0.5 * t / 3600)), jobs)   # 0.5 jobs per hour
    assert not grow["stable"]
    assert grow["queue_slope_ci_lower"] <= 0.5 <= grow["queue_slope_ci_upper"] + 1e-9
    assert grow["queue_slope_per_h"] == pytest.approx(0.5, rel=0.02)
    rng = np.random.default_rng(0)
    flat = queue_trend(_timeline(t, rng.integers(0, 4, t.size)), jobs)
    assert flat["stable"] and abs(flat["queue_slope_per_h"]) < 0.01
    assert flat["jwt_last_over_first"] == pytest.approx(1.0)


def test_a_small_significant_wiggle_is_not_called_unstable():
    t = np.arange(0.0, 100 * 3600, 60.0)
    jobs = pd.DataFrame({"arrival": t, "jwt": np.zeros_like(t)})
    tiny = queue_trend(_timeline(t, (t > 90 * 3600).astype(float) * 0.5), jobs)
    assert tiny["queue_slope_ci_lower"] > 0                 # significant, but under one job
    assert tiny["queue_rise"] < 1 and tiny["stable"]


def _offered(jobs, cluster):
    # arrival rate x mean work / capacity, from the trace itself
    lam = (len(jobs) - 1) / jobs["arrival"].max()
    return lam * (jobs["n_gpus"] * jobs["duration"]).mean() / cluster.n_gpus


def test_simulator_below_capacity_is_stable_and_above_is_not():
    low = synthetic_trace(400, SMALL, 0.3, size_mix=MIX, random_state=2)
    high = synthetic_trace(400, SMALL, 1.4, size_mix=MIX, random_state=2)
    assert _offered(low, SMALL) < 0.5 and _offered(high, SMALL) > 1.1
    for name in ("ideal", "vclos", "bestfit"):
        assert simulate_cluster(SMALL, low, name).stability()["stable"]
        verdict = simulate_cluster(SMALL, high, name).stability()
        assert not verdict["stable"] and verdict["queue_slope_ci_lower"] > 0
        assert verdict["queue_last"] > verdict["queue_first"]
    assert simulate_cluster(SMALL, low, "vclos").to_dict()["stable"] is True


def test_post_warmup_keeps_jobs_after_the_warmup_share_of_the_horizon():
    jobs = pd.DataFrame({"arrival": np.arange(101.0)})
    assert post_warmup(jobs, 0.25)["arrival"].min() == 25.0 and len(post_warmup(jobs, 0.0)) == 101


def test_bad_arguments():
    t = np.arange(10.0)
    jobs = pd.DataFrame({"arrival": t, "jwt": t})
    with pytest.raises(ValueError, match="warmup"):
        queue_trend(_timeline(t, t), jobs, warmup=1.0)
    with pytest.raises(ValueError, match="batches"):
        queue_trend(_timeline(t, t), jobs, batches=2)
    with pytest.raises(ValueError, match="level"):
        queue_trend(_timeline(t, t), jobs, level=95)
    with pytest.raises(ValueError, match="no arrivals after the warm-up"):
        queue_trend(_timeline(t, t), jobs.assign(arrival=0.0))


def test_summary_reports_changes_only_where_both_policies_are_stable():
    rows = []
    for load, unstable in ((0.3, ()), (0.9, ("bestfit",))):
        for rep in range(3):
            for name, jct in (("bestfit", 2.0), ("vclos", 1.0)):
                rows.append({"load": load, "rep": rep, "estimator": name,
                             "estimate": jct * (1 + rep), "avg_jwt": jct, "truth": 1.0,
                             "stable": float(name not in unstable), "ideal_jwt": 0.0,
                             "ideal_stable": 1.0, "queue_slope_per_h": 0.0,
                             "queue_slope_ci_lower": 0.0, "jwt_last_over_first": 1.0,
                             "offered_load": load, "avg_slowdown": 1.0, "utilization": load,
                             "fragmentation": 0.0, "network_blocked": 0.0, "jain": 1.0,
                             "contended_frac": 0.0, "wall_seconds": 0.0})
    s = large_summary(pd.DataFrame(rows), 32, 10).set_index(["load", "scheduler"])
    assert s.loc[(0.3, "vclos"), "jct_vs_bestfit"] == pytest.approx(-0.5)
    assert np.isnan(s.loc[(0.9, "vclos"), "jct_vs_bestfit"])
    assert s.loc[(0.9, "bestfit"), "status"] == "unstable"
    assert s.loc[(0.9, "vclos"), "status"] == "stable"
