"""Real multi-process runs (gloo, 2 ranks on 127.0.0.1) with injected faults."""

import numpy as np
import pandas as pd
import pytest

from causalkit.cli import main
from causalkit.systems.tracing import TraceStore, TrainingExperiment
from causalkit.systems.tracing.diagnosis import _per_step_phase


@pytest.fixture(scope="module")
def straggler(tmp_path_factory):
    out = tmp_path_factory.mktemp("straggler")
    exp = TrainingExperiment(fault="compute_straggler", world_size=2, steps=40, out_dir=out)
    row, report = exp.trace()
    return out, exp, row, report


def _explain(report) -> str:
    """What the diagnosis saw, for a failure message (timing on a loaded host varies)."""
    return (f"culprits {[(f.kind, f.rank, f.phase) for f in report.culprits]}; notes "
            f"{report.notes}; phase table:\n{report.phase_table.to_string()}")


def test_compute_straggler_is_named(straggler):
    _, exp, row, report = straggler
    assert report.culprits, _explain(report)
    top = report.culprits[0]
    assert (top.kind, top.rank, top.category) == ("compute_straggler", 1, "compute")
    assert top.phase in {"mlp", "forward", "backward"}
    assert row["detected"] and row["precision"] == 1.0 and row["recall"] == 1.0
    assert row["steps_to_detect"] > 0 and row["time_to_detect_s"] > 0
    assert row["dropped"] == 0 and row["tracer_errors"] == 0
    assert not row["simulated"] and not row["emulated"]
    assert row["n_windows"] > 0 and row["compression_ratio"] > 1
    table = report.to_frame()
    assert table.iloc[0]["kind"] == "compute_straggler" and table.iloc[0]["rank"] == 1


def test_phases_carry_the_training_threads_cpu_time(straggler):
    """CPU time is measured beside the wall clock: never more than it (one thread), and the
    straggler's padded mlp shows the extra work in CPU time too, not only on the wall clock."""
    out, exp, _, _ = straggler
    phases = TraceStore(next(out.glob("*/traces"))).phases(steps=(exp.fault_step, exp.steps))
    assert phases["cpu_ns"].notna().all() and (phases["cpu_ns"] >= 0).all()
    assert (phases["cpu_ns"] <= phases["duration_ns"] * 1.01 + 50_000).all()
    mlp = phases[phases["phase"] == "mlp"].groupby("rank")["cpu_ns"].median()
    assert mlp[1] > 1.5 * mlp[0]


def test_masked_straggler_is_compute_not_network(tmp_path):
    # severity 6 (default 3): the arrival lag below is a wall-clock symptom, and on a 2-core host
    # shared with another test worker its median at severity 3 was -0.7 ms in one run (rank 0
    # starved), against +1.2 to +3.5 ms in four runs beside three CPU-bound processes; at
    # severity 6 those four runs gave +8 to +17 ms
    exp = TrainingExperiment(fault="masked_straggler", world_size=2, steps=56, out_dir=tmp_path,
                             severity=6.0)
    row, report = exp.trace()
    assert [(f.kind, f.rank) for f in report.culprits][:1] == [("compute_straggler", 1)]
    assert not [f for f in report.culprits if f.category == "communication"]
    # the symptom itself: the slow rank reaches the allreduce last, so its peer waits there.
    # Its arrival lag is the direct measure; the allreduce durations' difference carries the
    # scheduling noise of both ranks' exits as well and came out near 0 on a loaded host.
    store = TraceStore(next(tmp_path.glob("*/traces")))
    per_step = _per_step_phase(store.phases(steps=(exp.fault_step, exp.steps)))
    arrival = per_step[per_step["phase"] == "allreduce"].pivot(index="step", columns="rank",
                                                               values="start_ns")
    assert np.median(arrival[1] - arrival[0]) > 0


def test_cli_diagnoses_a_store(straggler, capsys, tmp_path):
    out = straggler[0]
    store = next(out.glob("*/traces"))
    png = tmp_path / "diag.png"
    assert main(["systems", "trace", "--diagnose", str(store), "--plot", str(png)]) == 0
    out = capsys.readouterr().out
    assert "compute_straggler" in out and png.stat().st_size > 0, out
    assert main(["systems", "trace", "--diagnose", str(tmp_path / "nope")]) == 2


def test_experiment_argument_checks():
    with pytest.raises(ValueError, match="fault"):
        TrainingExperiment(fault="nic_down")
    with pytest.raises(ValueError, match="world_size=4"):
        TrainingExperiment(fault="link_degradation", world_size=2)
    with pytest.raises(ValueError, match="world_size"):
        TrainingExperiment(world_size=8)
    with pytest.raises(ValueError, match="faulty_rank"):
        TrainingExperiment(fault="compute_straggler", faulty_rank=5)
    with pytest.raises(ValueError, match="fault_step"):
        TrainingExperiment(fault="compute_straggler", steps=30, fault_step=29)


@pytest.mark.slow
@pytest.mark.parametrize("fault,world_size", [("jit_stall", 2), ("pipeline_bubble", 2),
                                              ("link_degradation", 4), (None, 2)])
def test_other_case_studies(fault, world_size):
    frame = TrainingExperiment(fault=fault, world_size=world_size, steps=48).run()
    assert isinstance(frame, pd.DataFrame) and len(frame) == 1
    row = frame.iloc[0]
    if fault is None:
        assert not row["false_alarm"]
    else:
        assert row["detected"], row.to_dict()


def test_run_goes_through_the_engine_and_resumes(tmp_path):
    exp = TrainingExperiment(world_size=2, steps=24, repetitions=1, seed=3)
    first = exp.run(out=tmp_path / "runs.jsonl")
    expected = int(np.random.default_rng([3, 0]).integers(2**31 - 1))
    assert list(first["seed"]) == [expected] and list(first["rep"]) == [0]
    again = exp.run(out=tmp_path / "runs.jsonl")          # resumed: nothing is rerun
    pd.testing.assert_frame_equal(first, again)
