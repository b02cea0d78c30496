"""Smoke test of the study script in its seconds-scale ``--quick`` mode."""

import runpy
from pathlib import Path

import pandas as pd

SCRIPT = Path(__file__).resolve().parents[1] / "simulations" / "shift.py"


def test_quick_study_writes_tables_and_figures(tmp_path):
    main = runpy.run_path(str(SCRIPT))["main"]
    assert main(["--quick", "--out", str(tmp_path)]) == 0
    out = tmp_path / "quick"
    for name in ("downtime_runs.csv", "downtime_summary.csv", "overhead.csv", "training.csv",
                 "training_summary.csv", "trilemma_combinations.csv", "throughput.png",
                 "summary.png"):
        assert (out / name).stat().st_size > 0, name
    runs = pd.read_csv(out / "downtime_runs.csv")
    assert runs["emulated"].all()
    masked = runs[runs["shift"] & runs["fault"].isin(["nic_down", "link_flap", "drop_acks"])]
    assert masked["correct"].all()
    assert not runs[~runs["shift"] & (runs["fault"] == "nic_down")]["completed"].any()


def test_training_study_on_the_engine_resumes_and_keeps_the_modes_apart(tmp_path):
    from causalkit.simulation import load_results
    from causalkit.systems.rdma.studies import QUICK, training_runs

    out = tmp_path / "training.jsonl"
    runs, progress = training_runs(reps=2, out=out, quick=True)
    by_mode = runs.set_index(["mode", "rep"])
    assert len(load_results(out)) == 6 and set(progress["mode"]) == set(runs["mode"])
    for rep in (0, 1):
        # SHIFT fails over without losing work; checkpoint/restart recomputes what followed
        # its last checkpoint; both reach the fault-free weights bit for bit
        assert by_mode.loc[("shift", rep), "executed"] == QUICK["train_iters"]
        assert by_mode.loc[("checkpoint_restart", rep), "restarts"] == 1
        expected = QUICK["fault_at_iter"] % QUICK["ckpt_every"]
        assert by_mode.loc[("checkpoint_restart", rep), "recomputed"] == expected
        assert runs["equal_to_no_fault"].all()
    again, _ = training_runs(reps=2, out=out, quick=True)   # read back, not rerun
    pd.testing.assert_frame_equal(again, runs)


def test_summarize_datapath_takes_medians_over_repetitions():
    from causalkit.systems.rdma.overhead import summarize_datapath

    rows = pd.DataFrame({"op": ["poll"] * 6, "shift": [False, True] * 3, "rep": [0, 0, 1, 1, 2, 2],
                         "us": [1.0, 2.0, 3.0, 9.0, 2.0, 3.0]})
    table = summarize_datapath(rows, "inprocess").set_index("shift")
    assert table.loc[False, "us"] == 2.0 and table.loc[True, "us"] == 3.0
    assert table.loc[True, "ratio_vs_plain"] == 1.5 and table["emulated"].all()
