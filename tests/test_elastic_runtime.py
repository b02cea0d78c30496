"""Real multi-process runs (gloo on 127.0.0.1): live resizes, a fault, the restart baseline.

Timing-robust by construction: resizes are requested at step counts, the cut happens whenever
the shadow world is ready, and every assertion is about state and losses, never about speed.
"""

import numpy as np
import pytest

from causalkit.systems.elastic import ElasticTrainer, ModelSpec
from causalkit.systems.elastic import ParallelLayout as L
from causalkit.systems.elastic.schedule import train_single_process
from causalkit.systems.elastic.timeline import loss_curve, phase_table

pytestmark = pytest.mark.timeout(300)

SPEC64 = ModelSpec(layers=3, dtype="float64")
SPEC32 = ModelSpec(layers=3, dtype="float32")


def _run(layout, spec, tmp_path, name, requests=(), tail=3, steps=None, **kw):
    """Train, issue ``requests`` (callables on the trainer) two steps apart, then stop ``tail``
    steps after the last one. Resizes are requested by step count and complete whenever they
    are ready, so the run is correct however slow the machine is."""
    big = 10**6 if steps is None else steps
    with ElasticTrainer(layout, spec, steps=big, run_dir=tmp_path / name, timeout_s=60,
                        **kw) as tr:
        records = []
        for fn in requests:
            tr.wait_step(tr.progress() + 2)
            records.append(fn(tr))
        if steps is None:
            tr.wait_step(tr.progress() + 1)
            tr.stop(tr.progress() + tail)
        tr.wait()
        events_df = tr.timeline()
        checks = ({g: (tr.state_checksums(g, "before"), tr.state_checksums(g, "after"))
                   for g in range(1, len(records) + 1) if records[g - 1]["outcome"] == "commit"}
                  if kw.get("dump_state") else {})
    return records, events_df, checks


def test_live_2_3_2_resizes_keep_training_and_state_bit_exact(tmp_path):
    records, ev, checks = _run(
        L(2, 1, 1), SPEC64, tmp_path, "live",
        [lambda t: t.resize(L(1, 3, 1)), lambda t: t.resize(L(1, 1, 2))], dump_state=True)
    assert [r["outcome"] for r in records] == ["commit", "commit"]
    # TP 2 -> PP 3 -> DP 2: every logical tensor (params, exp_avg, exp_avg_sq) bit-identical
    for g, (before, after) in checks.items():
        assert len(before) == 3 * len(SPEC64.tensors)
        assert before == after, f"state changed in transfer {g}"
    curve = loss_curve(ev)
    steps = len(curve)
    assert curve.step.tolist() == list(range(steps)), "every step trained exactly once"
    assert curve.layout.iloc[0] == "2x1x1" and curve.layout.iloc[-1] == "1x1x2"
    phases = phase_table(ev)
    assert (phases[["cut", "transfer", "verify", "commit", "switch"]] >= 0).all().all()
    assert (phases.peak_staging_bytes <= 64 << 10).all()

    # Same trajectory as uninterrupted runs, up to the TP/DP summation-order caveat:
    # float64 keeps the difference at rounding level (< 1e-10 relative).
    _, ev_ref, _ = _run(L(1, 1, 2), SPEC64, tmp_path, "ref", steps=steps)
    ref_new_layout = loss_curve(ev_ref).loss.to_numpy()
    ref_single = np.array(train_single_process(SPEC64, steps))
    live = curve.loss.to_numpy()
    cut = int(phases.cut_step.iloc[-1])
    np.testing.assert_allclose(live[cut:], ref_new_layout[cut:], rtol=1e-10, atol=0)
    np.testing.assert_allclose(live, ref_single, rtol=1e-10, atol=0)


def test_joiner_killed_mid_transfer_aborts_and_nothing_is_lost(tmp_path):
    spec = SPEC32
    fault = {"kill_worker": 2, "after_batches": 1}
    records, ev, _ = _run(
        L(1, 2, 1), spec, tmp_path, "fault",
        [lambda t: t.resize(L(1, 3, 1), fault=fault), lambda t: t.resize(L(1, 3, 1))],
        staging_bytes=4096)
    assert records[0]["outcome"] == "abort" and "worker 2" in records[0]["reason"]
    assert records[0]["plan_batches"] > 1, "the kill really happens mid-transfer"
    assert records[1]["outcome"] == "commit"
    assert (ev.ev == "fault_kill").sum() == 1
    curve = loss_curve(ev)
    steps = len(curve)
    assert curve.step.tolist() == list(range(steps))
    assert curve.layout.iloc[-1] == "1x3x1"
    # PP-only layouts perform identical arithmetic: the trajectory through an aborted resize
    # and a committed one must equal the single-rank run bit for bit (float32).
    ref = np.array(train_single_process(spec, steps))
    assert curve.loss.to_numpy().tobytes() == ref.tobytes()
    phases = phase_table(ev)
    assert phases.outcome.tolist() == ["abort", "commit"]


def test_checkpoint_restart_baseline_reshards_with_dcp(tmp_path):
    records, ev, _ = _run(L(2, 1, 1), SPEC64, tmp_path, "restart",
                          [lambda t: t.restart(L(1, 3, 1))])
    assert records[0]["mode"] == "restart"
    assert any((tmp_path / "restart" / "ckpt-g1").glob("rank*/.metadata"))
    phases = phase_table(ev)
    row = phases.iloc[0]
    for col in ("save", "teardown", "start_import", "rendezvous", "load"):
        assert row[col] > 0
    assert row.downtime_s >= row.start_import
    curve = loss_curve(ev)
    steps = len(curve)
    assert curve.step.tolist() == list(range(steps)) and curve.layout.iloc[-1] == "1x3x1"
    ref = np.array(train_single_process(SPEC64, steps))
    np.testing.assert_allclose(curve.loss.to_numpy(), ref, rtol=1e-10, atol=0)


def test_bad_input_is_rejected_before_anything_starts(tmp_path):
    with pytest.raises(ValueError, match="does not divide heads"):
        ElasticTrainer(L(5, 1, 1), ModelSpec())
    with pytest.raises(ValueError, match="exceeds layers"):
        ElasticTrainer(L(1, 9, 1), ModelSpec())
    with pytest.raises(TypeError, match="ParallelLayout"):
        ElasticTrainer((2, 1, 1), ModelSpec())
    tr = ElasticTrainer(L(1, 1, 1), ModelSpec(layers=2), steps=500, run_dir=tmp_path / "bad")
    with pytest.raises(RuntimeError, match="start"):
        tr.resize(L(1, 2, 1))
    with tr:
        tr.wait_step(1)
        with pytest.raises(ValueError, match="new_layout .*exceeds layers"):
            tr.resize(L(1, 3, 1))
        assert tr.gen == 0 and len(tr.procs) == 1, "nothing was started for the bad request"


@pytest.mark.slow
def test_study_size_schedule_live_beats_restart():
    from causalkit.systems.elastic import ElasticExperiment

    live = ElasticExperiment([2, 3, 4, 2], steps=24, mode="live").run()
    restart = ElasticExperiment([2, 3, 4, 2], steps=24, mode="restart").run()
    assert (live.outcome == "commit").all() and len(live) == len(restart) == 3
    assert live.downtime_s.max() < restart.downtime_s.min()
    assert live.goodput.iloc[0] > restart.goodput.iloc[0]
