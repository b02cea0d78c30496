"""The torch.profiler (Chrome/Kineto) importer: a real CPU export end to end, and a hand-made
export with CUDA kernels on two streams and a distributed rank."""

import gzip
import json

import numpy as np
import pytest

from causalkit.systems.tracing import TraceFileError, compress, diagnose, quantile, read_trace
from causalkit.systems.tracing.capture import profile_training
from causalkit.systems.tracing.compression import _GROUP, _HEADER
from causalkit.systems.tracing.kineto import kineto_store
from causalkit.systems.tracing.tracefile import read_kineto
from causalkit.systems.tracing.triples import (
    TRIPLE_BYTES,
    format_errors,
    triple_bytes,
    triple_quantile,
)


# ---------------------------------------------------------------- a real CPU export
@pytest.fixture(scope="module")
def export(tmp_path_factory):
    return profile_training(tmp_path_factory.mktemp("kineto") / "trace.json", steps=6)


def test_real_export_reads_with_its_string_pids(export):
    doc = json.loads(export.read_text())
    assert any(isinstance(e.get("pid"), str) for e in doc["traceEvents"])   # "Spans", "Traces"
    frame, meta = read_trace(export)
    assert meta["format"] == "kineto" and meta["rank"] == 0
    assert (frame["rank"] == 0).all()
    # every cpu_op of the file is read, with its duration in integer nanoseconds
    ops = [e for e in doc["traceEvents"] if e.get("ph") == "X" and e.get("cat") == "cpu_op"]
    got = frame[frame["category"] == "cpu_op"]
    assert len(got) == len(ops)
    assert sorted(got["duration_ns"]) == sorted(int(round(e["dur"] * 1e3)) for e in ops)
    assert set(got["stream"]) == {"compute"}
    assert sorted(frame["step"].unique()) == [1, 2, 3, 4, 5, 6]    # step 0 was the warm-up


def test_real_export_compresses_and_diagnoses(export):
    trace = read_kineto(export)
    spans = [e for e in json.loads(export.read_text())["traceEvents"]
             if str(e.get("name", "")).startswith("ProfilerStep#")]
    assert sorted(trace.iterations["duration_ns"]) == sorted(int(round(e["dur"] * 1e3))
                                                              for e in spans)
    assert set(trace.phases["phase"]) == {"forward", "backward", "optimizer"}
    window = trace.events[trace.events["step"] == 3]
    summary = compress(window)
    for name, sub in window.groupby("name"):
        raw = sub["duration_ns"].to_numpy(dtype=float)
        got = quantile(summary.group(name, rank=0, stream="compute"), [0.5])[0]
        assert got == pytest.approx(np.quantile(raw, 0.5), rel=1e-3)
    report = diagnose(kineto_store([trace]), warmup_steps=1)
    assert report.iterations.shape == (5, 1)
    assert not report.culprits


def test_paper_triples_on_a_real_window(export):
    trace = read_kineto(export)
    window = trace.events[trace.events["step"] == 2]
    summary = compress(window)
    blob = triple_bytes(summary)
    expected = _HEADER.size + 4 + sum(_GROUP.size + len(g.kernel.encode()) + len(g.stream)
                                      + TRIPLE_BYTES * len(g.clusters) for g in summary.groups)
    assert len(blob) == expected and TRIPLE_BYTES == 24
    errors = format_errors(window, summary, min_samples=5)
    assert len(errors) > 0
    # the sketch stores the kernel's p50, so its error is the uint16 knot rounding only; the
    # triple of a one-cluster kernel stores that same p50, and its mixture's median is exp(mu)
    assert errors["p50_err_sketch"].max() < 1e-4
    one = errors[errors["clusters"] == 1]
    assert len(one) and (one["p50_err_triple"] < 1e-4).all()


# ---------------------------------------------------------------- a hand-made CUDA export
def _event(cat, name, pid, tid, ts, dur, **args):
    return {"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": tid, "ts": ts, "dur": dur,
            "args": args}


KERNELS = {  # correlation -> (name, stream, ts_us, dur_us)
    11: ("ampere_sgemm_128x64_nn", 7, 1100.250, 12.345),
    12: ("ampere_sgemm_128x64_nn", 7, 1113.000, 12.346),
    13: ("ncclDevKernel_AllReduce_Sum_f32_RING_LL", 13, 1120.500, 250.001),
    14: ("ampere_sgemm_128x64_nn", 7, 1380.000, 12.999),     # runs after the step span ended
}


def _kineto_doc(rank=3):
    ev = [{"ph": "M", "name": "process_name", "pid": 4242, "tid": 0, "args": {"name": "python"}},
          _event("user_annotation", "ProfilerStep#5", 4242, 4242, 1000.0, 300.0),
          _event("user_annotation", "forward", 4242, 4242, 1001.0, 50.0),
          _event("user_annotation", "collective:allreduce", 4242, 4242, 1060.0, 200.0),
          _event("cpu_op", "aten::mm", 4242, 4242, 1002.0, 5.5),
          _event("cpu_op", "aten::mm", 4242, 4242, 1010.0, 5.25),
          _event("cpu_op", "aten::add_", 4242, 4242, 1020.0, 1.125),
          _event("cpu_op", "aten::copy_", 4242, 4300, 1030.0, 2.0),   # another host thread
          _event("Trace", "PyTorch Profiler (0)", "Spans", "PyTorch Profiler", 990.0, 500.0),
          {"ph": "i", "s": "g", "name": "Iteration Start", "pid": "Traces", "tid": "Trace",
           "ts": 990.0},
          {"ph": "s", "id": 11, "pid": 4242, "tid": 4242, "ts": 1003.0, "cat": "ac2g",
           "name": "ac2g"},
          _event("gpu_user_annotation", "ProfilerStep#5", 0, 7, 1100.0, 300.0)]
    for corr, (name, stream, ts, dur) in KERNELS.items():
        ev.append(_event("cuda_runtime", "cudaLaunchKernel", 4242, 4242, 1003.0 + corr, 3.0,
                         correlation=corr))
        ev.append(_event("kernel", name, 0, stream, ts, dur, device=0, stream=stream,
                         correlation=corr))
    doc = {"schemaVersion": 1, "deviceProperties": [{"id": 0, "name": "H200"}],
           "traceEvents": ev, "baseTimeNanoseconds": 1_700_000_000_000_000_000}
    if rank is not None:
        doc["distributedInfo"] = {"backend": "nccl", "rank": rank, "world_size": 8}
    return doc


def _write(path, doc, gz=False):
    data = json.dumps(doc).encode()
    path.write_bytes(gzip.compress(data) if gz else data)
    return path


@pytest.mark.parametrize("gz", [False, True])
def test_hand_made_cuda_export(tmp_path, gz):
    path = _write(tmp_path / ("k.json.gz" if gz else "k.json"), _kineto_doc(), gz)
    frame, meta = read_trace(path)
    assert meta["rank"] == 3 and meta["world_size"] == 8
    assert (frame["rank"] == 3).all()
    kernels = frame[frame["category"] == "kernel"].sort_values("start_ns")
    assert list(kernels["stream"]) == ["gpu0:stream7", "gpu0:stream7", "gpu0:stream13",
                                       "gpu0:stream7"]
    assert list(kernels["duration_ns"]) == [12345, 12346, 250001, 12999]
    assert list(kernels["name"]) == [KERNELS[c][0] for c in (11, 12, 13, 14)]
    assert (kernels["step"] == 5).all()           # via the launch's correlation id
    host = frame[frame["category"] == "cpu_op"].set_index("name")
    assert host.loc["aten::copy_", "stream"] == "comm"
    assert sorted(host.loc["aten::mm", "duration_ns"]) == [5250, 5500]
    assert set(host["stream"].drop("aten::copy_")) == {"compute"}
    assert "PyTorch Profiler (0)" not in set(frame["name"])     # string-pid bookkeeping
    assert "ProfilerStep#5" not in set(frame["name"])
    assert int(frame["start_ns"].min()) == 0
    summary = compress(frame)
    sgemm = summary.group("ampere_sgemm_128x64_nn", rank=3, stream="gpu0:stream7")
    assert sgemm.samples == 3
    assert quantile(sgemm, [0.0, 0.5, 1.0]) == pytest.approx([12345, 12346, 12999], rel=1e-5)
    nccl = summary.group("ncclDevKernel_AllReduce_Sum_f32_RING_LL", rank=3)
    assert triple_quantile(nccl, [0.5]) == pytest.approx([250001], rel=1e-6)


def test_kineto_tables_and_rank_rules(tmp_path):
    trace = read_kineto(_write(tmp_path / "k.json", _kineto_doc()))
    assert trace.iterations.to_dict("records") == [
        {"rank": 3, "step": 5, "start_ns": 1_700_000_000_000_000_000 + 1_000_000,
         "duration_ns": 300_000}]
    assert sorted(trace.phases["phase"]) == ["allreduce", "forward"]
    assert read_kineto(tmp_path / "k.json", rank=7).events["rank"].eq(7).all()
    no_rank = _write(tmp_path / "r0.json", _kineto_doc(rank=None))
    assert read_trace(no_rank)[1]["rank"] == 0
    assert read_trace(no_rank, rank=2)[0]["rank"].eq(2).all()
    with pytest.raises(ValueError, match="repeat"):
        kineto_store([tmp_path / "k.json", tmp_path / "k.json"])


def test_bad_kineto_input_names_the_file(tmp_path):
    doc = _kineto_doc()
    doc["traceEvents"].append({"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7,
                               "ts": 1.0})
    bad = _write(tmp_path / "nodur.json", doc)
    with pytest.raises(TraceFileError, match="nodur.json.*malformed"):
        read_trace(bad)
    doc = _kineto_doc()
    doc["distributedInfo"]["rank"] = "x"
    with pytest.raises(TraceFileError, match="rankx.json.*distributedInfo"):
        read_trace(_write(tmp_path / "rankx.json", doc))
    cut = tmp_path / "cut.json.gz"
    cut.write_bytes(gzip.compress(json.dumps(_kineto_doc()).encode())[:80])
    with pytest.raises(TraceFileError, match="cut.json.gz.*corrupt or truncated"):
        read_trace(cut)
    foreign = _write(tmp_path / "foreign.json", {"traceEvents": [], "metadata": {}})
    with pytest.raises(TraceFileError, match="foreign.json.*not a torch.profiler"):
        read_kineto(foreign)
    with pytest.raises(ValueError, match="rank"):
        read_trace(tmp_path / "nodur.json", rank=-1)
