"""Diagnosis statistics on known series, and the levels on SIMULATED cluster-scale traces."""

import numpy as np
import pandas as pd
import pytest

from causalkit.systems.tracing import MemoryStore, SyntheticCluster, diagnose, levels


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


def test_robust_excess_is_not_capped_by_a_mid_window_onset():
    """A rank that turns 2x slower after 40% of the window, with occasional 10x spikes (as the
    padded kernels show on a loaded host): onset and spikes hold over half the steps, so the
    MAD around the median equals the shift D and caps z near sqrt(n) / 2.08 = 3; the noise
    from successive differences ignores both."""
    rng = np.random.default_rng(1)
    x = rng.lognormal(0, 0.1, size=(2, 40))
    x[1, 16:] *= 2.0
    x[1, [20, 25, 30, 34, 38]] *= 10.0
    stats = levels.robust_excess(x)
    shift = stats["median"][1] - stats["baseline"][1]
    mad = np.median(np.abs(x[1] - np.median(x[1])))
    assert mad == pytest.approx(shift, rel=0.2)
    z_mad = shift / (np.sqrt(1.25) * 1.2533 * 1.4826 * mad / np.sqrt(40))
    assert z_mad < 3.5 and stats["z"][1] > 10
    assert stats["noise"][1] < 0.5 * mad


def _two_rank_store(opt_ms=(0.5, 0.5), allreduce_ms=(1.0, 1.0), late_ms=0.0, mlp_ms=(1.0, 1.0),
                    steps=30, seed=0, mlp_cpu_ms=None):
    """Two ranks, phases mlp / allreduce / optimizer per step with log-normal noise; rank 1
    enters the allreduce ``late_ms`` after rank 0. With ``mlp_cpu_ms`` the phases carry CPU
    times (the mlp's from ``mlp_cpu_ms``, the others' equal to their durations)."""
    rng = np.random.default_rng(seed)
    iters, phases = [], []
    for step in range(steps):
        t0 = step * 50_000_000
        for rank in (0, 1):
            noise = rng.lognormal(0, 0.05, 3)
            mlp, ar, opt = (1e6 * v * n for v, n in zip(
                (mlp_ms[rank], allreduce_ms[rank], opt_ms[rank]), noise, strict=True))
            start_ar = t0 + int(mlp) + (int(late_ms * 1e6) if rank == 1 else 0)
            phases += [(rank, step, "mlp", "dp0", t0, int(mlp), 0),
                       (rank, step, "allreduce", "dp0", start_ar, int(ar), 4096),
                       (rank, step, "optimizer", "dp0", start_ar + int(ar), int(opt), 0)]
            iters.append((rank, step, t0, int(mlp + ar + opt)))
    phases = pd.DataFrame(phases, columns=["rank", "step", "phase", "grp", "start_ns",
                                           "duration_ns", "nbytes"])
    if mlp_cpu_ms is not None:
        cpu = phases["duration_ns"].astype(float)
        is_mlp = phases["phase"] == "mlp"
        cpu[is_mlp] = 1e6 * np.asarray(mlp_cpu_ms)[phases.loc[is_mlp, "rank"].to_numpy()]
        phases["cpu_ns"] = cpu.astype(np.int64)
    return MemoryStore(pd.DataFrame(iters, columns=["rank", "step", "start_ns", "duration_ns"]),
                       phases)


@pytest.mark.parametrize("mlp_cpu_ms, kind", [((1.0, 1.0), "off_cpu"),
                                              ((1.0, 4.0), "compute_straggler")])
def test_a_phase_slower_only_on_the_wall_clock_is_off_cpu_not_a_straggler(mlp_cpu_ms, kind):
    """Rank 1's mlp takes 4x its peer's wall time. If its CPU time is the peer's, the thread
    was waiting (not scheduled on a busy host): a host symptom, not a straggler; if its CPU
    time grew too, it did more work and is the straggler."""
    store = _two_rank_store(mlp_ms=(1.0, 4.0), mlp_cpu_ms=mlp_cpu_ms)
    report = diagnose(store)
    found = [(f.kind, f.rank, f.phase) for f in report.findings if f.level == "phase"
             and f.kind in ("off_cpu", "compute_straggler")]
    assert found == [(kind, 1, "mlp")]
    row = report.phase_table.set_index(["phase", "rank"]).loc[("mlp", 1)]
    assert row["cpu_rel"] == pytest.approx(mlp_cpu_ms[1] / mlp_cpu_ms[0] - 1)
    assert bool(row["off_cpu"]) == (kind == "off_cpu")
    if kind == "off_cpu":
        assert report.culprits == []
        assert report.findings[[f.kind for f in report.findings].index("off_cpu")].category \
            == "host"
    # without CPU times (device clocks, older stores) the wall clock decides
    wall_only = diagnose(_two_rank_store(mlp_ms=(1.0, 4.0)))
    assert [(f.kind, f.rank) for f in wall_only.culprits] == [("compute_straggler", 1)]


def test_a_short_phase_too_small_to_delay_the_step_is_not_a_straggler():
    # rank 0's optimizer is 40% slower but adds 0.2 ms to a ~12 ms step (< 2%)
    store = _two_rank_store(opt_ms=(0.7, 0.5), mlp_ms=(10.0, 10.0))
    report = diagnose(store)
    row = report.phase_table.set_index(["phase", "rank"]).loc[("optimizer", 0)]
    assert row["rel"] > 0.3 and row["z"] > 2 and not row["flagged"]
    assert report.culprits == []
    strict = diagnose(store, phase_impact=0.0)
    assert [(f.kind, f.rank, f.phase) for f in strict.culprits] == [
        ("compute_straggler", 0, "optimizer")]


def test_long_collective_of_the_straggler_peer_is_a_victim_not_a_network_fault():
    # rank 1 computes 3 ms longer and arrives late by about that much; rank 0's allreduce is
    # longer still (a starved transfer), so its measured wait explains under half of it
    store = _two_rank_store(mlp_ms=(1.0, 4.0), late_ms=0.0, allreduce_ms=(9.0, 1.0))
    report = diagnose(store)
    kinds = [(f.kind, f.rank) for f in report.findings if f.level == "phase"]
    assert ("compute_straggler", 1) in kinds and ("victim", 0) in kinds
    assert not [f for f in report.culprits if f.category == "communication"]


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


def test_compiler_frames_exclude_the_eager_eval_frame_wrapper():
    from causalkit.systems.tracing.diagnosis import _stack_evidence

    eager = "train.py:main;torch/_dynamo/eval_frame.py:_fn;torch/optim/sgd.py:step"
    compiling = ("train.py:main;torch/_dynamo/eval_frame.py:_fn;"
                 "torch/_dynamo/convert_frame.py:__call__;torch/_dynamo/symbolic_convert.py:run")
    stacks = pd.DataFrame({"rank": 0, "timestamp_ns": [10, 20, 30], "thread_id": 1,
                           "frames": [eager, compiling, eager]})
    assert _stack_evidence(stacks, 0, 0, 15) == (0, 1, None)     # eager only: no compile
    hits, total, frame = _stack_evidence(stacks, 0, 0, 40)
    assert (hits, total, frame) == (1, 3, "torch/_dynamo/convert_frame.py:__call__")
