"""The per-rank tracer, store and trace files: real single-process runs, overflow, bad input."""

import sqlite3
import time
import warnings

import numpy as np
import pytest
import torch

from causalkit.exceptions import CausalkitWarning
from causalkit.systems.tracing import (
    KernelSummary,
    TraceFileError,
    Tracer,
    TraceStore,
    compress,
    diagnose,
    quantile,
    read_trace,
)


def _train(tracer, steps=12):
    torch.manual_seed(0)
    net = torch.nn.Sequential(*[torch.nn.Linear(64, 64) for _ in range(6)])
    x = torch.randn(32, 64)
    for _ in range(steps):
        with tracer.step():
            with tracer.phase("forward"):
                loss = net(x).relu().sum()
            with tracer.phase("backward"):
                loss.backward()
            with tracer.phase("optimizer"):
                net.zero_grad()
    return steps


@pytest.fixture(scope="module")
def traced(tmp_path_factory):
    root = tmp_path_factory.mktemp("trace")
    tr = Tracer(root / "store", device="cpu", profile_every=8, profile_steps=4,
                raw_trace_dir=root / "raw",
                stack_interval_s=0.005)
    with tr:
        _train(tr, 16)
    return root, tr


def test_channels_reach_the_store(traced):
    root, tr = traced
    store = TraceStore(root / "store")
    assert store.ranks == [0]
    assert len(store.iterations()) == 16
    assert set(store.phases()["phase"]) == {"forward", "backward", "optimizer"}
    windows = store.windows()
    assert list(windows["step"]) == [0, 8]
    assert (windows["raw_bytes"] > windows["summary_bytes"]).all()
    c = tr.counters
    assert c["errors"] == 0 and not c["dropped"]
    assert c["written"]["phases"] == c["emitted"]["phases"] - 16   # 16 iteration samples
    assert c["written"]["windows"] == 2
    meta = store.meta()[0]
    assert meta["counters"]["written"]["iterations"] == 16


def test_real_window_round_trip(traced):
    """Real profiler windows: p50 and p99 of every kernel survive the round trip within 5%
    (kernels of any size; the quantile sketch keeps the tail of heavy-tailed CPU op times)."""
    root, _ = traced
    frame, meta = read_trace(root / "raw" / "rank0_window0.json.gz")
    assert meta["rank"] == 0 and len(frame) > 0
    summary = KernelSummary.from_bytes(compress(frame).to_bytes())
    n_large = 0
    for (name, stream), sub in frame.groupby(["name", "stream"]):
        d = sub["duration_ns"].to_numpy(float)
        g = summary.group(name, stream=stream)
        assert g.samples == d.size
        np.testing.assert_allclose(quantile(g, [0.5, 0.99]), np.quantile(d, [0.5, 0.99]),
                                   rtol=0.05, err_msg=name)
        n_large += d.size >= 10
    assert n_large >= 5


def test_pause_records_nothing_and_keeps_the_step_count(tmp_path):
    tr = Tracer(tmp_path / "store", device="cpu", profile_every=2, stack_interval_s=0.002)
    with tr:
        _train(tr, 4)                                  # steps 0-3, windows at 0 and 2
        tr.pause()
        _train(tr, 4)                                  # steps 4-7: no records, no window
        time.sleep(0.05)                               # the sampler wakes and skips
        stacks_paused = tr.emitted_["stacks"]
        time.sleep(0.05)
        assert tr.emitted_["stacks"] == stacks_paused
        tr.resume()
        _train(tr, 2)                                  # steps 8-9, window at 8
    store = TraceStore(tmp_path / "store")
    assert list(store.iterations()["step"]) == [0, 1, 2, 3, 8, 9]
    assert set(store.phases()["step"]) == {0, 1, 2, 3, 8, 9}
    assert list(store.windows()["step"]) == [0, 2, 8]
    assert tr.errors_ == 0


def test_overflow_drops_and_counts(tmp_path):
    tr = Tracer(tmp_path / "s", channels=("phases",), queue_size=8, flush_interval_s=0.05,
                device="cpu")
    with tr, tr.step():
        for _ in range(20000):
            with tr.phase("forward"):
                pass
        assert tr._pending <= 8          # bounded: never more than queue_size records waiting
    c = tr.counters
    assert c["dropped"].get("phases", 0) > 0
    assert c["written"].get("phases", 0) + c["written"].get("iterations", 0) \
        + c["dropped"]["phases"] == c["emitted"]["phases"]
    assert TraceStore(tmp_path / "s").meta()[0]["counters"]["dropped"]["phases"] > 0


def test_store_failure_never_breaks_training(tmp_path):
    blocker = tmp_path / "not_a_dir"
    blocker.write_text("x")
    tr = Tracer(blocker, channels=("phases", "stacks"), device="cpu")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with tr:
            assert _train(tr, 5) == 5
    assert tr.errors_ > 0
    assert any(issubclass(w.category, CausalkitWarning) for w in caught)


def test_corrupt_truncated_and_empty_inputs(traced, tmp_path):
    root, _ = traced
    raw = (root / "raw" / "rank0_window1.json.gz").read_bytes()
    cut = tmp_path / "cut.json.gz"
    cut.write_bytes(raw[: len(raw) // 2])
    with pytest.raises(TraceFileError, match="corrupt or truncated"):
        read_trace(cut)
    junk = tmp_path / "junk.json"
    junk.write_text('{"traceEvents": [{"ph": "X", "name": "a"}]}')
    with pytest.raises(TraceFileError, match="malformed"):
        read_trace(junk)
    with pytest.raises(FileNotFoundError):
        read_trace(tmp_path / "missing.json")
    bad = tmp_path / "badstore"
    bad.mkdir()
    (bad / "rank0.sqlite").write_bytes(b"this is not a database" * 100)
    with pytest.raises(TraceFileError, match="rank0.sqlite"):
        diagnose(bad)
    half = tmp_path / "halfstore"
    half.mkdir()
    src = (root / "store" / "rank0.sqlite")
    con = sqlite3.connect(src)
    con.execute("PRAGMA wal_checkpoint(FULL)")
    con.close()
    data = src.read_bytes()
    (half / "rank0.sqlite").write_bytes(data[: len(data) // 3])
    with pytest.raises(TraceFileError):
        diagnose(half)
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(TraceFileError, match="no rank"):
        diagnose(empty)
    with pytest.raises(ValueError, match="not in the trace store"):
        diagnose(root / "store", ranks=[3])
    with pytest.raises(ValueError, match="empty window"):
        diagnose(root / "store", steps=(100, 200))
    with pytest.raises(ValueError, match="lo < hi"):
        diagnose(root / "store", steps=(5, 5))


def test_tracer_argument_checks(tmp_path):
    with pytest.raises(ValueError, match="rank"):
        Tracer(tmp_path, rank=2, world_size=2)
    with pytest.raises(ValueError, match="channels"):
        Tracer(tmp_path, channels=("phases", "gpu"))
    with pytest.raises(ValueError, match="queue_size"):
        Tracer(tmp_path, queue_size=0)
    with pytest.raises(ValueError, match="profile_steps"):
        Tracer(tmp_path, profile_every=2, profile_steps=3)
    with pytest.raises(TypeError, match="groups"):
        Tracer(tmp_path, groups={"dp": 0})


def test_overhead_measurement_pairs_the_arms():
    from causalkit.systems.tracing.overhead import (
        channel_costs,
        measure_overhead,
        paired_ratios,
        summarize_overhead,
    )

    arms = measure_overhead(pairs=6, layers=1, configs=("off", "always_on", "profiler_always"))
    # every configuration has one traced and one untraced arm per pair
    assert len(arms) == 3 * 6 * 2
    assert (arms.groupby(["config", "pair"])["arm"].apply(sorted).map(tuple)
            == ("traced", "untraced")).all()
    # the tracer threads' CPU is charged to traced arms of traced configurations only
    assert (arms.loc[arms["arm"] == "untraced", "background_ms"] == 0).all()
    assert (arms.loc[arms["config"] == "off", "background_ms"] == 0).all()
    assert (arms.loc[(arms["arm"] == "traced") & (arms["config"] != "off"),
                     "background_ms"] > 0).all()
    ratios = paired_ratios(arms, "thread_ms")
    assert list(ratios.columns) == ["off", "always_on", "profiler_always"] and len(ratios) == 6
    table = summarize_overhead(arms, n_resamples=200)
    assert list(table.index) == ["off", "always_on", "profiler_always"]
    for label in ("wall", "thread_cpu", "total_cpu"):
        lo, mid, hi = table.loc["profiler_always", [f"{label}_ci_lo", f"{label}_pct",
                                                     f"{label}_ci_hi"]]
        assert lo <= mid <= hi
    assert table.loc["off", "background_cpu_pct"] == 0
    # an always-on profiler costs a large multiple of the step; the phase/stack channels do not
    assert table.loc["profiler_always", "total_cpu_pct"] > 50
    assert table.loc["profiler_always", "total_cpu_pct"] > table.loc["always_on",
                                                                      "total_cpu_pct"]
    with pytest.raises(ValueError, match="configs"):
        measure_overhead(pairs=1, configs=("on",))
    with pytest.raises(ValueError, match="pairs"):
        measure_overhead(pairs=0)
    with pytest.raises(ValueError, match="device"):
        measure_overhead(pairs=1, device="tpu")
    if not torch.cuda.is_available():
        with pytest.raises(ValueError, match="CUDA is not available"):
            measure_overhead(pairs=1, device="cuda")
    cost = channel_costs(1000)
    assert 0 < cost["inline_us"] <= cost["record_us"] < 200 and 0 < cost["stack_us"] < 500
