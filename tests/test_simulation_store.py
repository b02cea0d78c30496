"""Fault tests of the engine's results store: truncation at every byte of the last record, a full
disk, two writers at once, design fingerprints, planted symlinks, workers of a killed study."""

import errno
import json
import os
import signal
import subprocess
import sys
import time
import warnings
from functools import partial
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from causalkit import _store
from causalkit.simulation import (
    FingerprintMismatch,
    StoreLocked,
    load_results,
    run_experiment,
    run_study,
)

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE))
from study_fixture import ESTIMATORS, design  # noqa: E402

COLS = ["rep", "estimator", "estimate", "std_error", "ci_lower", "ci_upper", "error"]


def noisy_failure(data):
    """Fails with a message holding quotes, commas, a newline and non-ASCII text."""
    raise ValueError(f'singular, "quoted"\nsecond line: µ={data["y"][0]:.3f}')


FAILING = {"mean": ESTIMATORS["mean"], "fails": noisy_failure}
# 20 ms per replication: the store writes several batches (one per 50 ms) before a disk fills
SLOW_FAILING = {"dim": ESTIMATORS["dim"], "fails": noisy_failure}


def _fixture_process(out, reps, n_jobs=1, hold=None):
    env = {**os.environ, "PYTHONPATH": str(HERE)}
    if hold is not None:
        env["STUDY_FIXTURE_HOLD"] = str(hold)
    return subprocess.Popen([sys.executable, str(HERE / "study_fixture.py"), str(out), str(reps),
                             str(n_jobs)], env=env, stderr=subprocess.PIPE, text=True)


def _wait_for_records(out, n, timeout=60):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if out.exists() and out.read_bytes().count(b"\n") >= n:
            return
        time.sleep(0.02)
    raise AssertionError(f"{out} did not reach {n} records")


def _without_timings(data: bytes) -> list:
    records = [json.loads(line) for line in data.splitlines()]
    for record in records:
        for row in record["rows"]:
            row.pop("seconds")
    return records


def test_truncation_at_every_byte_of_the_last_record_loses_only_that_record(tmp_path):
    out = tmp_path / "study.jsonl"
    reference = run_study(design, FAILING, 5, seed=3, out=out, progress=False)
    assert reference["error"].str.contains('"quoted"\nsecond line: µ=').sum() == 5
    data = out.read_bytes()
    last_start = data.rstrip(b"\n").rfind(b"\n") + 1
    for offset in range(last_start, len(data) + 1):
        out.write_bytes(data[:offset])
        complete = 5 if offset == len(data) else 4
        assert load_results(out)["rep"].nunique() == complete, offset
        resumed = run_study(design, FAILING, 5, seed=3, out=out, progress=False)
        pd.testing.assert_frame_equal(resumed[COLS], reference[COLS])
        assert _without_timings(out.read_bytes()) == _without_timings(data), offset


def test_kill_at_random_moments_then_resume_is_exact(tmp_path):
    out = tmp_path / "study.jsonl"
    reference = run_study(design, ESTIMATORS, 120, seed=7, progress=False)
    rng = np.random.default_rng(0)
    for _ in range(3):
        proc = _fixture_process(out, 120)
        _wait_for_records(out, 1)
        time.sleep(rng.uniform(0, 0.3))
        proc.kill()
        proc.wait()
    stored = load_results(out)
    resumed = run_study(design, ESTIMATORS, 120, seed=7, out=out, progress=False)
    assert resumed.groupby(["rep", "estimator"]).size().eq(1).all() and len(resumed) == 240
    pd.testing.assert_frame_equal(resumed[COLS], reference[COLS])
    kept = stored.merge(reference, on=["rep", "estimator"], suffixes=("", "_ref"))
    assert len(kept) == len(stored) and np.allclose(kept["estimate"], kept["estimate_ref"])


def _fill_writes(monkeypatch, allowed_bytes):
    """Make ``os.write`` in the store behave like a disk with ``allowed_bytes`` of free space."""
    real_write = os.write
    left = {"bytes": allowed_bytes}

    def write(fd, data):
        if left["bytes"] <= 0:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        n = real_write(fd, bytes(data[:left["bytes"]]))
        left["bytes"] -= n
        return n

    monkeypatch.setattr(_store.os, "write", write)


def test_disk_full_simulated_keeps_every_complete_record(tmp_path, monkeypatch):
    """Simulated ENOSPC (a fake os.write that stops after N bytes, mid-record)."""
    out = tmp_path / "study.jsonl"
    reference = run_study(design, SLOW_FAILING, 30, seed=1, progress=False)
    _fill_writes(monkeypatch, 2500)
    with pytest.raises(OSError, match="free space and rerun to resume") as info:
        run_study(design, SLOW_FAILING, 30, seed=1, out=out, progress=False)
    assert info.value.errno == errno.ENOSPC
    monkeypatch.undo()
    assert out.read_bytes().endswith(b"\n")  # the partial batch was cut at once
    stored = load_results(out)
    assert 0 < stored["rep"].nunique() < 30
    resumed = run_study(design, SLOW_FAILING, 30, seed=1, out=out, progress=False)
    pd.testing.assert_frame_equal(resumed[COLS], reference[COLS])


@pytest.fixture
def small_tmpfs(tmp_path):
    """A 12 KiB tmpfs (needs root and mount permission; skipped otherwise)."""
    mount = tmp_path / "small"
    mount.mkdir()
    made = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=12k", "tmpfs", str(mount)],
                          capture_output=True)
    if made.returncode != 0:
        pytest.skip("cannot mount a small tmpfs here (needs root)")
    yield mount
    subprocess.run(["umount", str(mount)], check=True)


def test_disk_full_on_a_real_small_filesystem_then_resume_after_freeing_space(small_tmpfs):
    out = small_tmpfs / "study.jsonl"
    reference = run_study(design, SLOW_FAILING, 100, seed=1, progress=False)
    with pytest.raises(OSError, match="No space left on device"):
        run_study(design, SLOW_FAILING, 100, seed=1, out=out, progress=False)
    stored = load_results(out)
    assert 0 < stored["rep"].nunique() < 100
    with pytest.raises(OSError):  # still full: a resume fails the same clear way
        run_study(design, SLOW_FAILING, 100, seed=1, out=out, progress=False)
    subprocess.run(["mount", "-o", "remount,size=1m", str(small_tmpfs)], check=True)
    resumed = run_study(design, SLOW_FAILING, 100, seed=1, out=out, progress=False)
    pd.testing.assert_frame_equal(resumed[COLS], reference[COLS])


def test_a_second_writer_fails_fast_and_nothing_is_duplicated(tmp_path):
    out, hold = tmp_path / "study.jsonl", tmp_path / "hold"
    hold.touch()  # the first writer stays busy until the second has given up
    first = _fixture_process(out, 150, hold=hold)
    _wait_for_records(out, 2)
    start = time.time()
    second = _fixture_process(out, 150)
    _, err = second.communicate(timeout=60)
    hold.unlink()
    assert second.returncode != 0 and time.time() - start < 30
    assert "StoreLocked" in err and "being written by another process" in err
    first.communicate(timeout=120)
    assert first.returncode == 0
    lines = out.read_bytes().splitlines()
    keys = [json.loads(line)["key"] for line in lines]
    assert sorted(keys) == list(range(150))


def test_lock_is_held_for_the_whole_run_in_one_process_too(tmp_path):
    out = tmp_path / "study.jsonl"
    run_study(design, ESTIMATORS, 2, seed=7, out=out, progress=False)
    meta = json.loads((tmp_path / "study.jsonl.meta.json").read_text())
    with (_store.ResultStore(out, meta["fingerprint"], meta["design"]),
          pytest.raises(StoreLocked, match="another process")):
        run_study(design, ESTIMATORS, 3, seed=7, out=out, progress=False)
    assert run_study(design, ESTIMATORS, 3, seed=7, out=out, progress=False)["rep"].nunique() == 3


def _shifted_design(rng, effect):
    data = design(rng)
    return {**data, "truth": effect}


def test_a_changed_design_is_refused_and_overwrite_starts_afresh(tmp_path):
    out = tmp_path / "study.jsonl"
    run_study(partial(_shifted_design, effect=0.5), ESTIMATORS, 3, seed=7, out=out,
              progress=False)
    with pytest.raises(FingerprintMismatch, match=r"differs in design.*--overwrite"):
        run_study(partial(_shifted_design, effect=2.0), ESTIMATORS, 3, seed=7, out=out,
                  progress=False)
    with pytest.raises(FingerprintMismatch, match="differs in params"):
        run_study(partial(_shifted_design, effect=0.5), ESTIMATORS, 3, seed=7, out=out,
                  params={"quick": True}, progress=False)
    with pytest.raises(FingerprintMismatch, match="differs in seed"):
        run_study(partial(_shifted_design, effect=0.5), ESTIMATORS, 3, seed=8, out=out,
                  progress=False)
    fresh = run_study(partial(_shifted_design, effect=2.0), ESTIMATORS, 3, seed=7, out=out,
                      overwrite=True, progress=False)
    assert (fresh["truth"] == 2.0).all() and (load_results(out)["truth"] == 2.0).all()


def test_closure_values_are_part_of_the_fingerprint(tmp_path):
    out = tmp_path / "study.jsonl"

    def make(effect):
        return lambda rng: {**design(rng), "truth": effect}

    run_study(make(0.5), ESTIMATORS, 2, seed=7, out=out, progress=False)
    run_study(make(0.5), ESTIMATORS, 3, seed=7, out=out, progress=False)  # same: resumes
    with pytest.raises(FingerprintMismatch):
        run_study(make(2.0), ESTIMATORS, 3, seed=7, out=out, progress=False)


def test_planted_symlinks_are_never_followed_for_rewrites(tmp_path):
    out = tmp_path / "study.jsonl"
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me")
    for name in ("study.jsonl.tmp", "study.jsonl.meta.json.tmp"):
        (tmp_path / name).symlink_to(victim)
    run_study(design, ESTIMATORS, 3, seed=7, out=out, progress=False)
    out.write_bytes(out.read_bytes()[:-5])  # force a repair on the next open
    run_study(design, ESTIMATORS, 3, seed=7, out=out, progress=False)
    assert victim.read_text() == "keep me"
    assert not list(tmp_path.glob(".study*.tmp"))


def test_an_older_csv_results_file_is_read_but_not_appended_to(tmp_path):
    out = tmp_path / "old.csv"
    out.write_text('rep,estimator,estimate,std_error,ci_lower,ci_upper,truth,covered,seconds,'
                   'error,details\n0,mean,0.1,,,,0.5,,0.001,,"{""n_units"": 60.0, '
                   '""n_warnings"": 0.0}"\n')
    (tmp_path / "old.csv.meta.json").write_text('{"seed": 7, "estimators": ["mean"], '
                                                '"alpha": 0.05}')
    old = load_results(out)
    assert old.loc[0, "estimate"] == 0.1 and old.loc[0, "n_units"] == 60
    with pytest.raises(FingerprintMismatch, match="older format"):
        run_study(design, {"mean": ESTIMATORS["mean"]}, 2, seed=7, out=out, progress=False)


def _children(pid):
    found = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        found += [int(c) for c in (task / "children").read_text().split()]
    return found


def _alive(pid):
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return False
    return state != "Z"


@pytest.mark.skipif(not Path("/proc/self/task").exists(), reason="needs Linux /proc")
def test_workers_exit_when_the_study_process_is_killed(tmp_path):
    out = tmp_path / "study.jsonl"
    proc = _fixture_process(out, 400, n_jobs=2)
    _wait_for_records(out, 4)
    workers = [c for c in _children(proc.pid)
               if "popen_loky" in Path(f"/proc/{c}/cmdline").read_text()]
    assert workers
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    deadline = time.time() + 60  # a worker still starting up on a loaded machine exits late
    while time.time() < deadline and any(_alive(w) for w in workers):
        time.sleep(0.1)
    assert not any(_alive(w) for w in workers)


def _run_once(rng, rep, size, scale=1.0):
    return {"value": float(scale * rng.normal(size=size).mean()), "size_seen": size}


def test_run_experiment_seeds_by_repetition_and_resumes(tmp_path):
    out = tmp_path / "exp.jsonl"
    configs = [{"size": 10}, {"size": 100}]
    full = run_experiment(_run_once, configs, 4, seed=5, progress=False)
    assert list(full.columns) == ["size", "value", "size_seen", "rep"]
    assert len(full) == 8 and (full["size"] == full["size_seen"]).all()
    expected = np.random.default_rng([5, 3]).normal(size=10).mean()
    assert full.query("size == 10 and rep == 3")["value"].item() == expected
    run_experiment(_run_once, configs, 2, seed=5, out=out, progress=False)
    resumed = run_experiment(_run_once, configs, 4, seed=5, out=out, n_jobs=2, progress=False)
    pd.testing.assert_frame_equal(resumed, full)
    pd.testing.assert_frame_equal(load_results(out).sort_values(["size", "rep"],
                                                                ignore_index=True), full)
    with pytest.raises(FingerprintMismatch, match="configs"):
        run_experiment(_run_once, [{"size": 10, "scale": 2.0}], 4, seed=5, out=out,
                       progress=False)


def test_run_experiment_runs_repetitions_in_rounds_and_returns_config_order(tmp_path):
    started = []

    def run_once(rng, rep, *, size):
        started.append((size, rep))
        return {"value": float(rng.normal(size=size).mean())}

    out = tmp_path / "rounds.jsonl"
    run_experiment(run_once, [{"size": 2}, {"size": 3}], 2, out=out, progress=False)
    assert started == [(2, 0), (3, 0), (2, 1), (3, 1)]
    started.clear()
    frame = run_experiment(run_once, [{"size": 2}, {"size": 3}], 3, out=out, progress=False)
    assert started == [(2, 2), (3, 2)]         # only the missing round runs
    assert list(zip(frame["size"], frame["rep"], strict=True)) == [
        (2, 0), (2, 1), (2, 2), (3, 0), (3, 1), (3, 2)]


@pytest.mark.parametrize("kwargs, message", [
    ({"run_once": None}, "run_once"),
    ({"configs": {"size": 1}}, "configs"),
    ({"configs": []}, "configs"),
    ({"reps": 0}, "reps"),
    ({"sync_seconds": -1}, "sync_seconds"),
])
def test_run_experiment_rejects_bad_input(kwargs, message):
    args = {"run_once": _run_once, "configs": [{"size": 3}], "reps": 2}
    args.update(kwargs)
    with pytest.raises((TypeError, ValueError), match=message):
        run_experiment(**args, progress=False)


class _Driver:
    def __init__(self, size):
        self.size = size

    def run_once(self, rng, rep):
        return {"value": float(rng.normal(size=self.size).sum())}


def test_driver_fingerprint_covers_configuration_not_fitted_state(tmp_path):
    out = tmp_path / "driver.jsonl"
    driver = _Driver(3)
    run_experiment(driver.run_once, [{}], 2, out=out, progress=False)
    driver.results_, driver._cache = pd.DataFrame({"x": [1]}), object()
    assert len(run_experiment(driver.run_once, [{}], 3, out=out, progress=False)) == 3
    driver.size = 4
    with pytest.raises(FingerprintMismatch, match="run_once"):
        run_experiment(driver.run_once, [{}], 3, out=out, progress=False)


def test_an_all_nan_diagnostic_keeps_its_column(tmp_path):
    def no_share(data):
        return {"estimate": float(np.mean(data["y"])), "share": float("nan")}

    res = run_study(design, {"m": no_share}, 3, seed=1, out=tmp_path / "s.jsonl",
                    progress=False)
    assert res["share"].isna().all() and res["std_error"].isna().all()
    assert load_results(tmp_path / "s.jsonl")["share"].isna().all()


def _warning_design(rng):
    warnings.warn("from the design, not counted", UserWarning, stacklevel=1)
    return {"truth": 0.0, "x": rng.normal(), "y": rng.normal(size=10)}


def _warns_twice(data):
    for _ in range(2):      # the same warning from the same line: both count, every time
        warnings.warn("repeated", RuntimeWarning, stacklevel=1)
    return data["x"]


@pytest.mark.parametrize("n_jobs", [1, 2])
def test_warnings_are_counted_per_replication_and_filters_restored(n_jobs, tmp_path):
    from causalkit.exceptions import CausalkitWarning

    before = list(warnings.filters)
    with pytest.warns(CausalkitWarning, match="w: 6 in 3 replication") as record:
        warnings.simplefilter("always")
        res = run_study(_warning_design, {"w": _warns_twice, "quiet": ESTIMATORS["mean"]}, 3,
                        out=tmp_path / "w.jsonl", n_jobs=n_jobs, progress=False)
    counts = res.set_index(["estimator", "rep"])["n_warnings"]
    assert (counts.loc["w"] == 2).all() and (counts.loc["quiet"] == 0).all()
    shown = [str(w.message) for w in record]
    assert not any("repeated" in m for m in shown)        # counted, not shown
    if n_jobs == 1:     # in-process: the design's own warnings are shown as usual
        assert shown.count("from the design, not counted") == 3
    assert warnings.filters == before
