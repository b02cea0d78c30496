"""LiveR at large state: the downtime decomposition (parts tile the downtime), the cost fit
(recovers known coefficients; agrees with statsmodels), the state-size knob, the study's
summaries, and (slow) a quick real run of both modes at two state sizes."""

import numpy as np
import pandas as pd
import pytest

from causalkit.systems.elastic import transfer_study
from causalkit.systems.elastic.costfit import fit_costs
from causalkit.systems.elastic.layout import ModelSpec, layout_for, spec_for_state
from causalkit.systems.elastic.timeline import PARTS, downtime_parts, phase_table

#: Tolerance of "the parts sum to the downtime": the phases are differences of the same
#: timestamps, so only floating-point rounding separates them (timestamps ~1e2 s).
TOL_S = 1e-9


def _steps(gen, steps, start, dur, layout):
    return [{"ev": "step", "wid": 0, "gen": gen, "step": s, "t0": start + i * dur,
             "t": start + (i + 1) * dur, "loss": 1.0, "layout": layout, "preparing": False}
            for i, s in enumerate(steps)]


def _live_log(t):
    """A live resize at step 3 with known phase boundaries ``t`` (dict of times)."""
    ev = _steps(0, range(3), 0.0, 1.0, "2x1x1")  # last step before the cut ends at 3.0
    ev += [{"ev": "notice", "wid": -1, "gen": 1, "mode": "live", "old_layout": "2x1x1",
            "new_layout": "3x1x1", "t": 1.5},
           {"ev": "prepare_end", "wid": 0, "gen": 1, "t": 2.5},
           {"ev": "transfer_start", "wid": 0, "gen": 1, "step": 3, "t": t["cut"]},
           {"ev": "transfer_start", "wid": 1, "gen": 1, "step": 3, "t": t["cut"] + 0.01},
           {"ev": "transfer_end", "wid": 0, "gen": 1, "t": t["transfer"] - 0.2,
            "place_s": 9.0, "peak_staging_bytes": 10},
           {"ev": "transfer_end", "wid": 1, "gen": 1, "t": t["transfer"], "place_s":
            t["place"], "peak_staging_bytes": 10},
           {"ev": "verify_end", "wid": 1, "gen": 1, "t": t["verify"]},
           {"ev": "decision", "wid": -1, "gen": 1, "decision": "commit", "t": t["commit"]}]
    # first step in the new world starts at t["switch"] and lasts 1.5 s; steady steps 1.0 s
    ev += [{"ev": "step", "wid": 0, "gen": 1, "step": 3, "t0": t["switch"],
            "t": t["switch"] + 1.5, "loss": 1.0, "layout": "3x1x1", "preparing": False}]
    ev += _steps(1, range(4, 8), t["switch"] + 1.5, 1.0, "3x1x1")
    return pd.DataFrame(ev)


def _restart_log(t):
    ev = _steps(0, range(3), 0.0, 1.0, "2x1x1")
    ev += [{"ev": "notice", "wid": -1, "gen": 1, "mode": "restart", "old_layout": "2x1x1",
            "new_layout": "3x1x1", "t": 2.2},
           {"ev": "save_start", "wid": 0, "gen": 1, "step": 3, "t": 3.0},
           {"ev": "save_end", "wid": 0, "gen": 1, "t": t["save"]},
           {"ev": "teardown_end", "wid": -1, "gen": 1, "t": t["teardown"]},
           {"ev": "imported", "wid": 0, "gen": 1, "t": t["import"]},
           {"ev": "world_built", "wid": 0, "gen": 1, "t": t["world"]},
           {"ev": "loaded", "wid": 0, "gen": 1, "t": t["load"] - 0.1, "place_s": 5.0},
           {"ev": "loaded", "wid": 1, "gen": 1, "t": t["load"], "place_s": t["place"]}]
    ev += [{"ev": "step", "wid": 0, "gen": 1, "step": 3, "t0": t["resume"],
            "t": t["resume"] + 1.25, "loss": 1.0, "layout": "3x1x1", "preparing": False}]
    ev += _steps(1, range(4, 8), t["resume"] + 1.25, 1.0, "3x1x1")
    return pd.DataFrame(ev)


def test_live_parts_equal_the_known_phases_and_tile_the_downtime():
    t = {"cut": 3.1, "transfer": 5.1, "place": 0.5, "verify": 5.4, "commit": 5.5,
         "switch": 5.8}
    row = downtime_parts(phase_table(_live_log(t))).iloc[0]
    assert row["process_start"] == 0.0
    assert row["reshape"] == pytest.approx(0.5)  # the worker that finished last, not worker 0
    assert row["state_move"] == pytest.approx((5.1 - 3.1) + (5.4 - 5.1) - 0.5)
    assert row["coordination"] == pytest.approx((3.1 - 3.0) + (5.5 - 5.4))
    assert row["resume"] == pytest.approx((5.8 - 5.5) + 0.5)  # switch + warm-up excess
    assert row["downtime_s"] == pytest.approx(5.8 - 3.0 + 0.5)
    assert abs(row["parts_sum_s"] - row["downtime_s"]) < TOL_S


def test_restart_parts_equal_the_known_phases_and_tile_the_downtime():
    t = {"save": 4.0, "teardown": 4.5, "import": 15.0, "world": 15.5, "load": 17.5,
         "place": 0.75, "resume": 17.75}
    row = downtime_parts(phase_table(_restart_log(t))).iloc[0]
    assert row["process_start"] == pytest.approx(15.0 - 4.5)
    assert row["state_move"] == pytest.approx((4.0 - 3.0) + (17.5 - 15.5) - 0.75)
    assert row["reshape"] == pytest.approx(0.75)
    assert row["coordination"] == pytest.approx((4.5 - 4.0) + (15.5 - 15.0))
    assert row["resume"] == pytest.approx((17.75 - 17.5) + 0.25)
    assert abs(row["parts_sum_s"] - row["downtime_s"]) < TOL_S


def test_every_phase_belongs_to_exactly_one_part_per_mode():
    from causalkit.systems.elastic.timeline import LIVE_PHASES, RESTART_PHASES

    for mode, phases in (("live", LIVE_PHASES), ("restart", RESTART_PHASES)):
        used = [c for cols in PARTS[mode].values() for c in cols if not c.startswith("-")]
        assert sorted(used) == sorted([*phases, "reshape", "warmup_excess_s"])
        assert list(PARTS[mode]) == list(PARTS["live"])


def test_downtime_parts_rejects_tables_without_phases():
    with pytest.raises(ValueError, match="phases"):
        downtime_parts(pd.DataFrame({"x": [1.0]}))


def test_cost_fit_recovers_known_coefficients_without_noise():
    rng = np.random.default_rng(1)
    table = pd.DataFrame({"state_gb": np.repeat([0.064, 0.256, 1.024], 4),
                          "processes": np.tile([2, 3, 3, 2], 3)})
    table["downtime_s"] = 0.7 + 3.5 * table.state_gb + 0.25 * table.processes
    fit = fit_costs(table.sample(frac=1, random_state=rng.integers(100)), "downtime_s",
                    ["state_gb", "processes"])
    np.testing.assert_allclose(fit.coef.to_numpy(), [0.7, 3.5, 0.25], atol=1e-10)
    assert fit.predict({"state_gb": 480.0, "processes": 32})[0] == pytest.approx(
        0.7 + 3.5 * 480 + 0.25 * 32)


def test_cost_fit_recovers_coefficients_within_their_standard_errors():
    rng = np.random.default_rng(2)
    truth = np.array([2.0, 10.0])
    hits = 0
    for _ in range(200):
        x = np.repeat([0.1, 0.4, 1.0], 6)
        table = pd.DataFrame({"state_gb": x,
                              "downtime_s": truth[0] + truth[1] * x + rng.normal(0, 0.5, x.size)})
        fit = fit_costs(table, "downtime_s", ["state_gb"])
        hits += np.all(np.abs(fit.coef.to_numpy() - truth) < 2.12 * fit.se.to_numpy())
    # each interval is a 95 % t interval (16 df: t = 2.12); both together cover >= 90 %
    assert hits / 200 > 0.88


def test_cost_fit_matches_statsmodels():
    sm = pytest.importorskip("statsmodels.api")
    rng = np.random.default_rng(3)
    table = pd.DataFrame({"state_gb": rng.uniform(0, 1, 30), "processes": rng.integers(2, 5, 30)})
    table["downtime_s"] = 1 + 2 * table.state_gb + 0.3 * table.processes + rng.normal(0, 0.2, 30)
    fit = fit_costs(table, "downtime_s", ["state_gb", "processes"])
    X = sm.add_constant(table[["state_gb", "processes"]].astype(float))
    ref = sm.OLS(table.downtime_s, X).fit()
    np.testing.assert_allclose(fit.coef.to_numpy(), ref.params.to_numpy(), rtol=1e-10)
    np.testing.assert_allclose(fit.se.to_numpy(), ref.bse.to_numpy(), rtol=1e-8)
    assert fit.r2 == pytest.approx(ref.rsquared)
    mean, se = fit.predict({"state_gb": 5.0, "processes": 32})
    pred = ref.get_prediction(np.array([[1.0, 5.0, 32.0]])).summary_frame()
    assert mean == pytest.approx(float(pred["mean"].iloc[0]))
    assert se == pytest.approx(float(pred["mean_se"].iloc[0]))


def test_cost_fit_rejects_bad_input():
    table = pd.DataFrame({"state_gb": [1.0, 1.0, 1.0, 1.0], "downtime_s": [1.0, 2.0, 3.0, 4.0]})
    with pytest.raises(ValueError, match="collinear"):
        fit_costs(table, "downtime_s", ["state_gb"])
    with pytest.raises(ValueError, match="no columns"):
        fit_costs(table, "downtime_s", ["processes"])
    with pytest.raises(ValueError, match="more than 2 rows"):
        fit_costs(table.head(2), "downtime_s", ["state_gb"])
    with pytest.raises(TypeError, match="table"):
        fit_costs(table.to_dict(), "downtime_s", ["state_gb"])


@pytest.mark.parametrize("mib", [4, 64, 1024])
def test_spec_for_state_hits_the_requested_size(mib):
    fields = transfer_study.SPEC
    spec = spec_for_state(mib * 2**20, **fields)
    one_unit = ModelSpec(ffn=24, **fields).state_bytes - ModelSpec(ffn=12, **fields).state_bytes
    assert abs(spec.state_bytes - mib * 2**20) <= one_unit / 2
    assert spec.state_bytes == 3 * spec.n_params * 4
    for n in (2, 3, 4):  # the schedule's world sizes stay valid
        spec.validate(layout_for(n, spec))
    with pytest.raises(ValueError, match="state_bytes"):
        spec_for_state(0)


def test_summaries_match_direct_computation():
    rng = np.random.default_rng(4)
    rows = []
    for mb in (64, 1024):
        for mode, scale in (("live", 1.0), ("restart", 20.0)):
            for rep in range(3):
                for gen in (1, 2):
                    parts = dict(zip(PARTS["live"], rng.exponential(scale, 5), strict=True))
                    rows.append({"state_mb": mb, "state_bytes": mb << 20, "mode": mode,
                                 "rep": rep, "gen": gen, **parts,
                                 "parts_sum_s": sum(parts.values()),
                                 "downtime_s": sum(parts.values())})
    events = pd.DataFrame(rows)
    runs = events.groupby(["state_mb", "mode", "rep"]).downtime_s.mean()
    table = transfer_study.part_summary(events).set_index(["state_mb", "mode", "quantity"])
    for (mb, mode), sub in runs.groupby(level=[0, 1]):
        got = table.loc[(mb, mode, "downtime_s")]
        assert got["mean_s"] == pytest.approx(sub.mean())
        assert got["sd_s"] == pytest.approx(sub.std(ddof=1))
        assert got["ci_low_s"] < got["mean_s"] < got["ci_high_s"] and got["runs"] == 3
    ratio = transfer_study.ratio_summary(events).set_index("state_mb")
    for mb in (64, 1024):
        expected = runs.loc[(mb, "restart")].mean() / runs.loc[(mb, "live")].mean()
        assert ratio.loc[mb, "ratio_restart_over_live"] == pytest.approx(expected)
        assert ratio.loc[mb, "ratio_ci_low"] < expected < ratio.loc[mb, "ratio_ci_high"]


def test_paper_prediction_rows_are_labelled_and_follow_the_fit():
    x = np.repeat([0.064, 0.256, 1.024], 4)
    events = pd.DataFrame({"mode": np.repeat(["live", "restart"], x.size),
                           "state_gb": np.tile(x, 2), "processes": np.tile([2, 3], x.size)})
    events["downtime_s"] = np.where(events["mode"] == "live", 0.2 + 4 * events.state_gb,
                                    12 + 6 * events.state_gb)
    coef, pred = transfer_study.predict_paper(events)
    assert set(coef.model) == set(transfer_study.MODELS)
    is_calibrated = pred.basis.str.startswith("calibrated")
    assert (pred.simulated == is_calibrated).all()
    calibrated = pred[is_calibrated]
    gpt30 = calibrated.set_index("setting").loc["GPT-30B_32gpu"]
    # the calibrated scenario returns its own inputs (5.8 s live, 150 s restart)
    assert gpt30.live_downtime_s == pytest.approx(5.8)
    assert gpt30.restart_downtime_s == pytest.approx(150.0)
    per_gpu = pred[pred.basis == "predicted (per_gpu)"].set_index("setting").loc["GPT-30B_32gpu"]
    assert per_gpu.live_downtime_s == pytest.approx(0.2 + 4 * 480 / 32)
    assert per_gpu.restart_downtime_s == pytest.approx(12 + 6 * 480 / 32)


@pytest.mark.slow
def test_quick_real_runs_decompose_their_downtime(tmp_path):
    events = transfer_study.transfer_runs(out=tmp_path / "t.jsonl", quick=True, state_mb=(2, 8))
    assert set(events["mode"]) == {"live", "restart"} and set(events.state_mb) == {2, 8}
    assert (events.parts_sum_s - events.downtime_s).abs().max() < 1e-6
    live, restart = events[events["mode"] == "live"], events[events["mode"] == "restart"]
    assert (live.process_start == 0).all() and (restart.process_start > 0).all()
    assert (events.reshape >= 0).all() and (events.state_move > 0).all()
    assert set(events.processes) == {2, 3}


def test_gpu_scenarios_are_labelled_calibrated_and_cpu_check_fitted():
    from pathlib import Path

    from causalkit.systems.elastic.studies import simulate_scaling

    events = pd.read_csv(Path(__file__).resolve().parents[1] / "simulations" / "results"
                         / "liver" / "events.csv")
    sim = simulate_scaling(events)
    gpu = sim.scenario != "cpu_check"
    assert sim.loc[gpu, "basis"].str.startswith("calibrated").all()
    assert (sim.loc[~gpu, "basis"] == "fitted to measured phases").all()
