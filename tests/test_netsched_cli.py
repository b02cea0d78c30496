"""Experiment driver, command line and the study script's quick mode."""

import subprocess
import sys
from pathlib import Path

import pandas as pd

from causalkit.cli import main
from causalkit.systems.netsched import ClusterExperiment

ROOT = Path(__file__).resolve().parents[1]


def test_experiment_is_tidy_and_paired():
    exp = ClusterExperiment(leaves=4, spines=8, gpus_per_leaf=8, loads=(0.6, 1.0), trace_jobs=25,
                            reps=2, seed=5)
    df = exp.run()
    assert len(df) == 2 * 2 * len(exp.schedulers)
    assert df["simulated"].all()
    assert not df.duplicated(["load", "rep", "scheduler"]).any()
    # common random numbers: every scheduler saw the same trace per (load, rep)
    assert (df.groupby(["load", "rep"])["n_jobs"].nunique() == 1).all()
    again = exp.run()
    pd.testing.assert_frame_equal(df.drop(columns=["wall_seconds", "solve_seconds"]),
                                  again.drop(columns=["wall_seconds", "solve_seconds"]))


def test_cli_runs_and_writes_a_results_folder(tmp_path, capsys):
    out = tmp_path / "res"
    args = ["systems", "netsched", "--leaves", "4", "--trace-jobs", "15", "--loads", "0.7",
            "--schedulers", "ecmp", "vclos", "--reps", "2", "--out", str(out)]
    assert main(args) == 0
    assert "simulated" in capsys.readouterr().out
    df = pd.read_csv(out / "results.csv")
    assert set(df["scheduler"]) == {"ecmp", "vclos"} and set(df["rep"]) == {0, 1}
    assert (out / "runs.jsonl").exists() and (out / "MANIFEST.json").exists()
    assert main(args) == 0                                   # resumes: same table
    pd.testing.assert_frame_equal(pd.read_csv(out / "results.csv").drop(columns=[
        "wall_seconds", "solve_seconds"]), df.drop(columns=["wall_seconds", "solve_seconds"]))
    assert main(["systems", "vclos", "--quick", "--schedulers", "ecmp", "--out", str(out)]) == 0
    assert (out / "quick" / "results.csv").exists()


def test_cli_reads_a_trace_file(tmp_path, capsys):
    p = tmp_path / "cluster_log.csv"
    p.write_text("job_id,gpu_num,submit_time,duration,state\n"
                 "a,16,2020-06-03 10:00:00,3600,COMPLETED\n"
                 "b,8,2020-06-03 10:05:00,600,COMPLETED\n")
    rc = main(["systems", "netsched", "--leaves", "4", "--trace", f"helios:{p}",
               "--schedulers", "vclos"])
    assert rc == 0
    assert "vclos" in capsys.readouterr().out


def test_study_script_quick(tmp_path):
    proc = subprocess.run([sys.executable, str(ROOT / "simulations" / "vclos.py"), "--quick",
                           "--out", str(tmp_path)], capture_output=True, text=True,
                          timeout=300, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-2000:]
    for name in ("vclos-collision/vclos-collision_summary.csv",
                 "vclos-testbed/vclos-testbed_summary.csv", "vclos-large/vclos-large_summary.csv",
                 "vclos-fragmentation/vclos-fragmentation_summary.csv", "large_jct.png",
                 "MANIFEST.json", "vclos-testbed/vclos-testbed.jsonl"):
        assert (tmp_path / name).stat().st_size > 0
