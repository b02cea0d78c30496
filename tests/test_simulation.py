"""The study runner: seeding, incremental writes, resume after a kill, Dask backend, summaries."""

import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from causalkit.simulation import load_results, run_study, summarize

sys.path.insert(0, str(Path(__file__).parent))
from study_fixture import ESTIMATORS, design  # noqa: E402


def _reference(reps=40):
    return run_study(design, ESTIMATORS, reps, seed=7, progress=False)


def test_results_do_not_depend_on_workers():
    one = _reference()
    two = run_study(design, ESTIMATORS, 40, seed=7, n_jobs=2, progress=False)
    pd.testing.assert_frame_equal(one.drop(columns="seconds"), two.drop(columns="seconds"))
    assert set(one["estimator"]) == {"dim", "mean"}
    assert (one.loc[one.estimator == "mean", "n_units"] == 60).all()


def _blas_threads(data):
    from threadpoolctl import threadpool_info
    return {"estimate": 0.0, "threads": max(pool["num_threads"] for pool in threadpool_info())}


@pytest.mark.parametrize("n_jobs", [1, 2])
def test_replications_run_with_one_blas_thread_and_the_limit_is_restored(n_jobs):
    from threadpoolctl import threadpool_info
    before = threadpool_info()
    results = run_study(design, {"threads": _blas_threads}, 6, n_jobs=n_jobs, progress=False)
    assert (results["threads"] == 1).all()
    assert threadpool_info() == before


def test_kill_and_resume_loses_and_duplicates_nothing(tmp_path):
    out = tmp_path / "study.csv"
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parent)}
    proc = subprocess.Popen([sys.executable, str(Path(__file__).parent / "study_fixture.py"),
                             str(out), "200"], env=env)
    deadline = time.time() + 60
    while time.time() < deadline:
        if out.exists() and out.read_text().count("\n") > 20:
            break
        time.sleep(0.05)
    proc.kill()
    proc.wait()
    partial = load_results(out)
    assert 0 < partial["rep"].nunique() < 200
    resumed = run_study(design, ESTIMATORS, 200, seed=7, out=out, progress=False)
    counts = resumed.groupby(["rep", "estimator"]).size()
    assert counts.eq(1).all() and len(counts) == 400
    reference = run_study(design, ESTIMATORS, 200, seed=7, progress=False)
    cols = ["rep", "estimator", "estimate", "std_error", "ci_lower", "ci_upper"]
    pd.testing.assert_frame_equal(resumed[cols], reference[cols], check_dtype=False)
    pd.testing.assert_frame_equal(load_results(out)[cols], reference[cols], check_dtype=False)


def test_torn_last_line_and_partial_replication_are_discarded(tmp_path):
    out = tmp_path / "study.csv"
    run_study(design, ESTIMATORS, 5, seed=7, out=out, progress=False)
    lines = out.read_text().splitlines(keepends=True)
    out.write_text("".join(lines[:-1]) + lines[-1][:10])  # rep 4: one full row + a torn one
    assert sorted(load_results(out)["rep"].unique()) == [0, 1, 2, 3]
    full = run_study(design, ESTIMATORS, 5, seed=7, out=out, progress=False)
    assert full.groupby("rep").size().eq(2).all() and full["rep"].nunique() == 5


def test_resume_refuses_a_different_study(tmp_path):
    out = tmp_path / "study.csv"
    run_study(design, ESTIMATORS, 2, seed=7, out=out, progress=False)
    with pytest.raises(ValueError, match="different study"):
        run_study(design, ESTIMATORS, 2, seed=8, out=out, progress=False)


def test_failing_estimator_is_recorded_not_fatal():
    def broken(_data):
        raise ValueError("singular design")

    res = run_study(design, {"ok": ESTIMATORS["mean"], "broken": broken}, 3, progress=False)
    assert (res.loc[res.estimator == "broken", "error"].str.contains("singular")).all()
    assert summarize(res).loc["broken", "n_errors"] == 3


def test_summary_matches_manual_computation():
    res = _reference()
    summ = summarize(res)
    dim = res[res.estimator == "dim"]
    err = dim["estimate"] - 0.5
    assert summ.loc["dim", "bias"] == pytest.approx(err.mean())
    assert summ.loc["dim", "rmse"] == pytest.approx(np.sqrt(np.mean(err ** 2)))
    covered = ((dim.ci_lower <= 0.5) & (dim.ci_upper >= 0.5)).mean()
    assert summ.loc["dim", "coverage"] == pytest.approx(covered)
    assert summ.loc["dim", "mean_ci_length"] == pytest.approx((dim.ci_upper - dim.ci_lower).mean())
    assert np.isnan(summ.loc["mean", "coverage"])


def test_dask_backend_on_a_local_cluster_matches_loky():
    distributed = pytest.importorskip("distributed")
    with (distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                   dashboard_address=None) as cluster,
          distributed.Client(cluster) as client):
        res = run_study(design, ESTIMATORS, 12, seed=7, backend="dask", scheduler=client,
                        progress=False)
    ref = _reference(12)
    pd.testing.assert_frame_equal(res.drop(columns="seconds"), ref.drop(columns="seconds"))


@pytest.mark.parametrize("kwargs, message", [
    ({"design": None}, "design"),
    ({"estimators": {}}, "estimators"),
    ({"reps": 0}, "reps"),
    ({"backend": "ray"}, "backend"),
    ({"backend": "dask"}, "scheduler"),
])
def test_run_study_rejects_bad_input(kwargs, message):
    args = {"design": design, "estimators": ESTIMATORS, "reps": 2}
    args.update(kwargs)
    with pytest.raises((TypeError, ValueError), match=message):
        run_study(**args, progress=False)
