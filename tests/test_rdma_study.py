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
