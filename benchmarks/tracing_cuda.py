"""ARGUS on a CUDA GPU: CUDA-event phase timers, the CUDA kernel channel, a torch.profiler export
read back by the Kineto importer, both summary formats, diagnosis.

Run from the repository root on a machine with a CUDA GPU:

    PYTHONPATH=. python benchmarks/tracing_cuda.py --out DIR

1. A data-parallel-style training loop (an MLP; one process in a single-rank process group,
   NCCL on CUDA / gloo on CPU, or, if no group can be made, a stand-in collective on the
   communication stream) traced twice: with the host clock (``perf_counter_ns``: on a GPU it
   times kernel launches) and with the automatic clock (CUDA events on the compute and
   communication streams, ``ProfilerActivity.CUDA`` kernel windows). Phase medians of both.
2. ``torch.profiler`` exports the same loop (``export_chrome_trace``); the Kineto importer reads
   it back; each profiled step and each tracer kernel window is compressed in both formats (the
   paper's 24-byte triples, our quantile sketch) and scored; the export and the CUDA-traced run
   are diagnosed (no fault is injected: a culprit would be a false alarm).
3. The tracing overhead on step time, untraced and traced steps paired in one process
   (``causalkit.systems.tracing.overhead.measure_overhead`` with ``device="cuda"``: CUDA-event
   phase timers, CUDA kernel windows, a synchronisation closing each step), for the four
   configurations of the CPU study.

Writes to ``--out`` (at most 7 files): summary.json (run facts, diagnoses, the export's most
frequent kernels), phase_timers.csv, compression_formats.csv, compression_windows.csv,
overhead.csv (``summarize_overhead``), the export as export.json.gz (if under 4.5 MB) and
MANIFEST.json (``causalkit.studies.write_manifest``).
Exits 1 when CUDA is not available, unless ``--allow-cpu`` (then the CPU path runs).
"""

from __future__ import annotations

import argparse
import gzip
import json
import platform
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd


def _process_group(device: str, tmp: Path) -> str:
    """A single-rank process group (NCCL on CUDA, gloo on CPU); returns its backend or why not."""
    import torch.distributed as dist

    backend = "nccl" if device == "cuda" else "gloo"
    try:
        dist.init_process_group(backend, init_method=f"file://{tmp / 'pg'}", rank=0,
                                world_size=1)
        return backend
    except Exception as exc:  # noqa: BLE001 - fall back to a stand-in collective
        return f"none ({type(exc).__name__}: {exc})"[:200]


def _model(device: str, width: int, layers: int, batch: int):
    import torch

    torch.manual_seed(0)
    net = torch.nn.Sequential(*[torch.nn.Linear(width, width) for _ in range(layers)]).to(device)
    return net, torch.optim.SGD(net.parameters(), lr=1e-4), torch.randn(batch, width,
                                                                         device=device)


def _traced_loop(store, clock: str, device: str, steps: int, size: tuple, raw_dir) -> dict:
    """Train ``steps`` steps under a Tracer with ``clock``; returns wall time and the device."""
    import torch
    import torch.distributed as dist

    from causalkit.systems.tracing import Tracer

    net, opt, x = _model(device, *size)
    group = dist.is_initialized()
    t0 = time.perf_counter()
    with Tracer(store, device=clock, profile_every=8, profile_steps=2,
                raw_trace_dir=raw_dir, job_id=f"cuda-bench-{clock}") as tr:
        for _ in range(steps):
            with tr.step():
                with tr.phase("forward"):
                    loss = net(x).square().mean()
                with tr.phase("backward"):
                    loss.backward()
                flat = torch.cat([p.grad.reshape(-1) for p in net.parameters()])
                if group:
                    tr.collective("allreduce", dist.all_reduce, flat, async_op=True,
                                  nbytes=flat.numel() * flat.element_size())
                else:   # stand-in: one pass over the gradients on the communication stream
                    tr.collective("allreduce", flat.mul_, 1.0)
                with tr.phase("optimizer"):
                    opt.step()
                    opt.zero_grad()
        if device == "cuda":
            torch.cuda.synchronize()
    return {"clock": tr.device, "wall_s": time.perf_counter() - t0, "counters": tr.counters}


def _phase_table(store, label: str) -> pd.DataFrame:
    from causalkit.systems.tracing import TraceStore

    st = TraceStore(store)
    ph = st.phases()
    it = st.iterations().assign(phase="iteration")
    both = pd.concat([ph[["phase", "step", "duration_ns"]], it[["phase", "step", "duration_ns"]]])
    both = both[both["step"] >= 2]
    g = both.groupby("phase")["duration_ns"]
    return pd.DataFrame({"timer": label, "n": g.size(), "median_ms": g.median() / 1e6,
                         "p90_ms": g.quantile(0.9) / 1e6}).reset_index()


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, help="results folder")
    parser.add_argument("--allow-cpu", action="store_true",
                        help="run the CPU path when CUDA is not available")
    parser.add_argument("--steps", type=int, default=48, help="traced steps per clock (48)")
    parser.add_argument("--overhead-pairs", type=int, default=300,
                        help="paired untraced/traced steps per overhead configuration (300)")
    args = parser.parse_args(argv)
    if args.steps < 16:
        parser.error(f"--steps must be at least 16 (diagnosis needs them); got {args.steps}")
    if args.overhead_pairs < 2:
        parser.error(f"--overhead-pairs must be at least 2; got {args.overhead_pairs}")
    import torch

    cuda = torch.cuda.is_available()
    if not cuda and not args.allow_cpu:
        print("tracing_cuda: CUDA is not available (pass --allow-cpu to run the CPU path)",
              file=sys.stderr)
        return 1
    device = "cuda" if cuda else "cpu"
    size = (2048, 8, 512) if cuda else (128, 4, 64)       # width, layers, batch
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()

    from causalkit.studies import write_manifest
    from causalkit.systems.tracing import TraceStore, compress, diagnose
    from causalkit.systems.tracing.capture import profile_training
    from causalkit.systems.tracing.kineto import kineto_store
    from causalkit.systems.tracing.overhead import measure_overhead, summarize_overhead
    from causalkit.systems.tracing.studies import format_rows, summarize_formats
    from causalkit.systems.tracing.tracefile import read_kineto, read_trace

    summary = {"device": device, "gpu": torch.cuda.get_device_name(0) if cuda else None,
               "torch": torch.__version__, "python": platform.python_version(),
               "model": dict(zip(("width", "layers", "batch"), size, strict=True))}
    with tempfile.TemporaryDirectory(prefix="argus-cuda-") as tmp:
        tmp = Path(tmp)
        summary["process_group"] = _process_group(device, tmp)
        runs, tables = {}, []
        for clock, label in (("cpu", "host perf_counter"), ("auto", "auto (CUDA events)"
                                                            if cuda else "auto (host)")):
            runs[clock] = _traced_loop(tmp / f"store_{clock}", clock, device, args.steps, size,
                                       tmp / f"raw_{clock}")
            tables.append(_phase_table(tmp / f"store_{clock}", label))
        summary["traced_runs"] = runs
        phase_timers = pd.concat(tables, ignore_index=True)
        report = diagnose(TraceStore(tmp / "store_auto"))
        summary["diagnosis_traced"] = {"summary": report.summary(),
                                       "culprits": [str(f) for f in report.culprits]}

        windows, kernels = [], []
        st = TraceStore(tmp / "store_auto")
        for s in st.kernel_summaries():
            events, _ = read_trace(tmp / "raw_auto" / f"rank0_window{s.window_id}.json.gz")
            row, rows = format_rows(f"tracer windows ({device})", events, s)
            windows.append(row)
            kernels += rows
        t0 = time.perf_counter()
        export = profile_training(tmp / "export.json", steps=8, device=device, width=size[0],
                                  layers=size[1], batch=size[2])
        summary["export_s"] = time.perf_counter() - t0
        trace = read_kineto(export)
        for step, events in trace.events.groupby("step", sort=True):
            row, rows = format_rows(f"torch.profiler export ({device})", events,
                                    compress(events, window_id=int(step)))
            windows.append(row)
            kernels += rows
        windows, kernels = pd.DataFrame(windows), pd.DataFrame(kernels)
        formats = summarize_formats(windows, kernels)
        ev = trace.events
        summary["export"] = {"bytes": export.stat().st_size, "events": len(ev),
                             "by_category": ev["category"].value_counts().to_dict(),
                             "device_streams": sorted(ev.loc[ev["stream"].str.startswith("gpu"),
                                                             "stream"].unique().tolist()),
                             "rank": trace.meta["rank"],
                             "distributedInfo": trace.meta["distributedInfo"]}
        report = diagnose(kineto_store([trace]), warmup_steps=1)
        summary["diagnosis_export"] = {"summary": report.summary(),
                                       "culprits": [str(f) for f in report.culprits]}
        g = ev.groupby(["category", "stream", "name"])["duration_ns"]
        table = pd.DataFrame({"n": g.size(), "p50_ns": g.median(),
                              "p99_ns": g.quantile(0.99)}).reset_index()
        summary["export"]["top_kernels"] = table.sort_values("n", ascending=False).head(
            40).to_dict("records")
        packed = gzip.compress(export.read_bytes(), compresslevel=6)
        if len(packed) < 4_500_000:
            (out / "export.json.gz").write_bytes(packed)
        if summary["process_group"] in ("nccl", "gloo"):     # before its store file goes
            import torch.distributed as dist

            dist.destroy_process_group()
    # a GPU-bound transformer step on a data-centre GPU (the CPU path: the CPU study's default)
    workload = ({"layers": 4, "d_model": 1024, "hidden": 4096, "batch": 8, "seq": 256} if cuda
                else {})
    t0 = time.perf_counter()
    overhead = summarize_overhead(measure_overhead(pairs=args.overhead_pairs, device=device,
                                                   **workload))
    summary["overhead"] = {"workload": workload or "measure_overhead defaults",
                           "pairs": args.overhead_pairs, "seconds": time.perf_counter() - t0}
    summary["imported_econml_or_faiss"] = sorted(m for m in ("econml", "faiss")
                                                 if m in sys.modules)
    summary["wall_s"] = time.perf_counter() - start
    phase_timers.to_csv(out / "phase_timers.csv", index=False)
    formats.to_csv(out / "compression_formats.csv", index=False)
    windows.to_csv(out / "compression_windows.csv", index=False)
    overhead.to_csv(out / "overhead.csv")
    (out / "summary.json").write_text(json.dumps(summary, indent=1, default=_jsonable))
    write_manifest(out, study="argus-cuda", device=device, steps=args.steps,
                   wall_seconds=round(summary["wall_s"], 3))

    with pd.option_context("display.width", 160, "display.max_columns", 20):
        print(f"device {device} ({summary['gpu']}), torch {summary['torch']}, process group "
              f"{summary['process_group']}")
        print(phase_timers.pivot(index="phase", columns="timer", values="median_ms").round(4))
        cols = ["source", "format", "windows", "events", "summary_bytes", "ratio",
                "p50_err_median", "p99_err_median", "w1_median", "w1_max"]
        print(formats[cols].round(4).to_string(index=False))
        print(f"export: {summary['export']['events']} events {summary['export']['by_category']}"
              f", device streams {summary['export']['device_streams']}")
        print(f"diagnosis (traced, {runs['auto']['clock']} clock): "
              f"{summary['diagnosis_traced']['summary']}")
        print(f"diagnosis (export): {summary['diagnosis_export']['summary']}")
        print(f"tracing overhead ({args.overhead_pairs} pairs per configuration):")
        print(overhead.round(3).to_string())
        print(f"econml/faiss imported: {summary['imported_econml_or_faiss'] or 'no'}; "
              f"wall {summary['wall_s']:.1f} s; results in {out}/")
    return 0


def _jsonable(value):
    if isinstance(value, (np.integer, np.floating)):
        return value.item()
    return str(value)


if __name__ == "__main__":
    sys.exit(main())
