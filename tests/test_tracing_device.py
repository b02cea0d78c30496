"""The tracer's device seam: clock selection and the CUDA-event code path, run on the CPU with a
stand-in for ``torch.cuda`` whose streams keep their own (simulated) device time."""

import threading
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
from torch.profiler import ProfilerActivity

from causalkit.systems.tracing import Tracer, TraceStore
from causalkit.systems.tracing.device import (
    CudaClock,
    HostClock,
    device_clock,
    profiler_activities,
)
from causalkit.systems.tracing.profiling import profiler_events


class FakeStream:
    def __init__(self, name):
        self.name, self.now_ms = name, 0.0

    def wait_stream(self, other):
        self.now_ms = max(self.now_ms, other.now_ms)


class FakeEvent:
    def __init__(self, cuda, enable_timing=False):
        assert enable_timing
        self.cuda, self.t, self.stream, self.sync_threads = cuda, None, None, []

    def record(self, stream=None):
        self.stream = stream or self.cuda.current_stream()
        self.t = self.stream.now_ms

    def synchronize(self):
        self.sync_threads.append(threading.get_ident())

    def elapsed_time(self, end):
        return end.t - self.t


class FakeCuda:
    """``torch.cuda`` stand-in: ``run(ms)`` is a kernel of ``ms`` on the current stream."""

    def __init__(self, available=True):
        self.available, self.default = available, FakeStream("compute")
        self._current, self.events = self.default, []

    def is_available(self):
        return self.available

    def Event(self, enable_timing=False):  # noqa: N802 - torch.cuda's name
        self.events.append(FakeEvent(self, enable_timing))
        return self.events[-1]

    def Stream(self):  # noqa: N802
        return FakeStream("comm")

    def current_stream(self):
        return self._current

    def stream(self, s):
        cuda = self

        class _Ctx:
            def __enter__(self):
                self.prev, cuda._current = cuda._current, s

            def __exit__(self, *exc):
                cuda._current = self.prev

        return _Ctx()

    def run(self, ms):
        self._current.now_ms += ms


def test_clock_selection():
    assert isinstance(device_clock("auto", cuda=FakeCuda(True)), CudaClock)
    assert isinstance(device_clock("auto", cuda=FakeCuda(False)), HostClock)
    assert isinstance(device_clock("cpu", cuda=FakeCuda(True)), HostClock)
    with pytest.raises(ValueError, match="not available"):
        device_clock("cuda", cuda=FakeCuda(False))
    with pytest.raises(ValueError, match="device must be"):
        device_clock("gpu")
    with pytest.raises(TypeError, match="lacks"):
        device_clock(object())
    assert profiler_activities(CudaClock(FakeCuda())) == [ProfilerActivity.CPU,
                                                          ProfilerActivity.CUDA]
    assert profiler_activities(HostClock()) == [ProfilerActivity.CPU]


def test_default_clock_follows_cuda_availability(tmp_path):
    import torch

    tr = Tracer(tmp_path, channels=("phases",))
    assert tr.device == ("cuda" if torch.cuda.is_available() else "cpu")
    assert isinstance(Tracer(tmp_path, channels=("phases",), device="cpu")._clock, HostClock)


def test_cuda_path_times_phases_with_events_on_their_streams(tmp_path):
    cuda = FakeCuda()
    clock = CudaClock(cuda)
    plan = {"forward": 2.5, "backward": 5.0, "optimizer": 1.0}
    with Tracer(tmp_path, channels=("phases",), device=clock, flush_interval_s=0.01) as tr:
        assert tr.device == "cuda"
        for _ in range(4):
            with tr.step():
                for phase in ("forward", "backward"):
                    with tr.phase(phase):
                        cuda.run(plan[phase])
                tr.collective("allreduce", lambda: cuda.run(4.0))
                with tr.phase("optimizer"):
                    cuda.run(plan["optimizer"])
    store = TraceStore(tmp_path)
    phases = store.phases()
    per_phase = phases.groupby("phase")["duration_ns"].unique()
    for phase, ms in plan.items():
        assert list(per_phase[phase]) == [int(ms * 1e6)]
    assert list(per_phase["allreduce"]) == [4_000_000]
    # the compute stream waits for the collective: a step is the sum of the four phases
    assert (store.iterations()["duration_ns"] == 12_500_000).all()
    # collective events were recorded on the communication stream, the others on compute
    streams = {e.stream.name for e in cuda.events}
    assert streams == {"compute", "comm"}
    assert sum(e.stream is clock.comm_stream for e in cuda.events) == 2 * 4
    # durations were resolved off the training thread
    main = threading.get_ident()
    synced = [t for e in cuda.events for t in e.sync_threads]
    assert synced and main not in synced
    assert store.meta()[0]["device"] == "cuda"


def _kineto_event(name, tid, start, dur, device=None):
    kind = SimpleNamespace(name="CPU" if device is None else "CUDA")
    dev, stream = device if device is not None else (-1, tid)
    return SimpleNamespace(name=lambda: name, start_thread_id=lambda: tid,
                           device_type=lambda: kind, device_index=lambda: dev,
                           device_resource_id=lambda: stream, start_ns=lambda: start,
                           duration_ns=lambda: dur)


def test_kernel_channel_names_cuda_streams():
    events = [_kineto_event("aten::mm", 1, 1000, 50), _kineto_event("aten::mm", 1, 1100, 60),
              _kineto_event("gloo:all_reduce", 2, 1200, 70),
              _kineto_event("sgemm", 1, 1300, 9, device=(0, 7)),
              _kineto_event("ncclKernel", 1, 1400, 99, device=(0, 13))]
    prof = SimpleNamespace(profiler=SimpleNamespace(
        kineto_results=SimpleNamespace(events=lambda: events)))
    frame = profiler_events(prof, rank=2, step=5)
    assert list(frame["stream"]) == ["compute", "compute", "comm", "gpu0:stream7",
                                     "gpu0:stream13"]
    assert list(frame["start_ns"]) == [0, 100, 200, 300, 400]
    pd.testing.assert_series_equal(frame["duration_ns"], pd.Series([50, 60, 70, 9, 99]),
                                   check_names=False, check_dtype=False)
    assert np.all(frame["rank"] == 2)


def _cuda_benchmark():
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "benchmarks" / "tracing_cuda.py"
    spec = importlib.util.spec_from_file_location("tracing_cuda", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_cuda_benchmark_refuses_to_run_without_cuda(tmp_path, capsys):
    import torch

    if torch.cuda.is_available():
        pytest.skip("CUDA is available here")
    assert _cuda_benchmark().main(["--out", str(tmp_path)]) == 1
    assert "CUDA is not available" in capsys.readouterr().err
    assert not any(tmp_path.iterdir())


@pytest.mark.slow
def test_cuda_benchmark_cpu_path(tmp_path):
    import json

    assert _cuda_benchmark().main(["--out", str(tmp_path), "--allow-cpu", "--steps", "24",
                                   "--overhead-pairs", "4"]) == 0
    files = sorted(p.name for p in tmp_path.iterdir())
    assert len(files) <= 7 and {"overhead.csv", "summary.json", "MANIFEST.json"} <= set(files)
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["device"] == "cpu" and summary["process_group"] == "gloo"
    formats = pd.read_csv(tmp_path / "compression_formats.csv")
    assert set(formats["format"]) == {"sketch", "triple"}
