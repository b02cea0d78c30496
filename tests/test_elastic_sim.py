"""The SimPy model (simulated, GPU-scale extrapolation): closed forms and calibration."""

import numpy as np
import pandas as pd
import pytest

from causalkit.systems.elastic.simmodel import (
    gpu_params,
    params_from_phases,
    simulate_resizes,
    spot_trace,
)


def test_downtime_and_goodput_follow_the_phase_sums():
    p = gpu_params(step_s=10.0)
    trace = [(1000.0 * k, n) for k, n in enumerate([16, 32, 24, 32], start=1)]
    horizon = 10_000.0
    for mode, phases in (("live", p.live_phases), ("restart", p.restart_phases)):
        table, summary = simulate_resizes(p, trace, horizon, mode, n0=32)
        assert summary["events"] == 4 and table.simulated.all()
        n_old = [32, 16, 32, 24]
        for row, (_, n), o in zip(table.itertuples(), trace, n_old, strict=True):
            assert row.downtime_s == pytest.approx(sum(phases(o, n).values()))
        # closed form: training time = horizon - downtime, up to one partial step
        lost = table.downtime_s.sum()
        closed = 1 - lost / horizon
        assert closed - p.step_s / horizon - 1e-12 < summary["goodput"] <= closed + 1e-12
        # a request waits at most for the background preparation plus one step
        wait = p.prepare_s if mode == "live" else 0.0
        assert (table.delay_s <= wait + p.step_s + 1e-9).all()


def test_requests_are_served_one_at_a_time():
    p = gpu_params(step_s=1.0)
    table, _ = simulate_resizes(p, [(100.0, 16), (100.0, 32)], 2000.0, "restart", n0=32)
    first, second = table.iloc[0], table.iloc[1]
    assert second.t_cut >= first.t_cut + first.downtime_s


def test_gpu_parameters_reproduce_the_calibration_points():
    p = gpu_params(30e9)
    live = sum(p.live_phases(32, 32).values())
    restart = sum(p.restart_phases(32, 32).values())
    assert live == pytest.approx(5.8) and restart == pytest.approx(150.0)
    big = gpu_params(70e9)
    assert sum(big.restart_phases(1024, 1024).values()) > 10 * sum(
        big.live_phases(1024, 1024).values())


def test_fitted_parameters_replay_the_measured_phases():
    live = pd.DataFrame({"cut": [0.01, 0.03], "transfer": [0.2, 0.2], "verify": [0.01, 0.01],
                         "commit": [0.005, 0.005], "switch": [0.002, 0.002],
                         "warmup_excess_s": [0.1, 0.1], "prepare_s": [2.0, 2.0],
                         "old_n": [2, 2], "new_n": [3, 3]})
    restart = pd.DataFrame({"save": [0.3, 0.3], "teardown": [0.1, 0.1],
                            "start_import": [5.0, 5.0], "rendezvous": [0.05, 0.05],
                            "load": [1.0, 1.0], "resume": [0.0, 0.0],
                            "warmup_excess_s": [0.2, 0.2], "new_n": [3, 3]})
    p = params_from_phases(live, restart, step_s=0.05, state_bytes=1e6, moved_bytes=5e5)
    assert sum(p.live_phases(2, 3).values()) == pytest.approx(0.02 + 0.2 + 0.01 + 0.005 +
                                                              0.002 + 0.1)
    r = p.restart_phases(2, 3)
    assert r["load"] == pytest.approx(1.0) and r["start_import"] == 5.0


def test_spot_trace_is_reproducible_and_changes_size():
    a = spot_trace(47, 86_400, [16, 24, 32], seed=3)
    assert a == spot_trace(47, 86_400, [16, 24, 32], seed=3) and len(a) == 47
    sizes = [n for _, n in a]
    assert all(x != y for x, y in zip(sizes, sizes[1:], strict=False))
    assert np.all(np.diff([t for t, _ in a]) >= 0)
    with pytest.raises(ValueError, match="mode"):
        simulate_resizes(gpu_params(), a, 100.0, "warm", n0=32)
