"""``TrainingExperiment``: real multi-process gloo training with injected faults, traced and
diagnosed, one tidy row per repetition.

Each repetition launches ``world_size`` rank processes (forked, or ``python -m
causalkit.systems.tracing.workload CONFIG RANK``; gloo over 127.0.0.1), runs
:mod:`causalkit.systems.tracing.workload` under a :class:`Tracer` per rank, then
diagnoses the store progressively: every ``detect_every`` steps after the fault onset the window
[warm-up, e) is diagnosed, and the first window whose root causes name the faulty rank(s) with
the expected kind gives the steps and seconds to detect (wall time from the fault step's start
to the window's end, plus the diagnosis time). The final diagnosis of the whole run gives the
precision and recall of the named ranks.

All faults run for real. ``link_degradation`` is emulated by default (held collectives, see
:mod:`~causalkit.systems.tracing.workload`); with ``link_mode="tbf"`` (or ``"auto"`` where root,
``ip`` and ``tc`` work) the faulty rank's traffic crosses a real veth link that is rate-limited
with tbf from the fault step (:class:`~causalkit.systems.tracing.netns.ShapedLink`). Rows carry
``emulated``, ``link_mode`` and ``simulated`` columns.
"""

from __future__ import annotations

import inspect
import json
import os
import secrets
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

from causalkit._validation import check_positive_int
from causalkit.exceptions import CausalkitWarning
from causalkit.systems.tracing.diagnosis import diagnose
from causalkit.systems.tracing.netns import ShapedLink, link_support
from causalkit.systems.tracing.store import TraceStore
from causalkit.systems.tracing.tracer import CHANNELS

__all__ = ["TrainingExperiment", "FAULTS", "EXPECTED_KINDS"]

FAULTS = (None, "compute_straggler", "link_degradation", "pipeline_bubble", "jit_stall",
          "masked_straggler")
#: Root-cause kinds that count as a correct diagnosis of each fault.
EXPECTED_KINDS = {"compute_straggler": ("compute_straggler",),
                  "masked_straggler": ("compute_straggler",),
                  "link_degradation": ("link_degradation", "communication"),
                  "pipeline_bubble": ("pipeline_bubble",),
                  "jit_stall": ("jit_compile",)}
_SEVERITY = {"compute_straggler": 4.0, "masked_straggler": 3.0, "pipeline_bubble": 1.9,
             "link_degradation": 3.0}


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class TrainingExperiment:
    """Trace and diagnose a small data-parallel or pipeline training job with one fault.

    Parameters
    ----------
    model : {"transformer", "pipeline"} or None
        Workload; None picks ``"pipeline"`` for ``fault="pipeline_bubble"``, else
        ``"transformer"``.
    world_size : int
        Rank processes, 2-4 (``link_degradation`` needs 4: two expert groups of two).
    fault : str or None
        One of ``causalkit.systems.tracing.FAULTS``.
    steps : int
        Training steps per repetition.
    repetitions : int
        Independent runs of :meth:`run` (repetition ``r`` seeded from
        ``SeedSequence([seed, r])``).
    faulty_rank : int, optional
        Rank carrying the fault (default: the last rank; for ``link_degradation`` the last
        expert group).
    fault_step : int, optional
        First faulty step (default ``steps // 3``; ``jit_stall``: ``steps // 2``;
        ``masked_straggler``: 5, i.e. present all along, with no iteration-level change; moved one
        step on if it falls on a profiled step, whose timing diagnosis ignores).
    severity : float, optional
        Work factor of a slow rank's padded kernels (defaults: compute straggler 4, masked
        straggler 3, pipeline stage 1.9); for an emulated link degradation, the factor by which
        the link is slower (default 3).
    link_delay_ms : float
        Least extra time per ``alltoall`` on an emulated degraded link: each is held for
        ``max(link_delay_ms, (severity - 1) * m)``, ``m`` the rank's median ``alltoall`` time
        before the fault (see ``causalkit.systems.tracing.workload``).
    link_mode : {"emulated", "tbf", "auto"}
        How ``link_degradation`` is injected: held collectives (``"emulated"``), a real veth
        link into a network namespace shaped with tbf (``"tbf"``; needs root, ``ip`` and
        ``tc``, else an error), or ``"tbf"`` where available and ``"emulated"`` otherwise, with
        a warning (``"auto"``).
    link_rate_mbit : float
        tbf rate of the degraded link (``link_mode="tbf"``).
    profile_every : int
        Kernel-channel duty cycle (one profiled step per ``profile_every``).
    channels : sequence of str
        Tracer channels.
    detect_every : int
        Progressive-diagnosis period in steps.
    out_dir : str or Path, optional
        Where each repetition's trace store is kept (default: a temporary directory, removed).
    keep_raw_windows : bool
        Also write every profiler window as gzip Chrome-trace JSON to ``<store dir>/raw``
        (``rank<r>_window<w>.json.gz``), e.g. to check the compression against the raw events.
    timeout_s : float
        Wall-clock limit of one repetition's processes.
    diagnose_options : dict, optional
        Keyword arguments of :func:`diagnose` (thresholds) for the final and the progressive
        diagnoses, e.g. ``{"phase_rel": 0.3}`` from :func:`calibrate_phase_rel`.
    layers, d_model, hidden, batch, seq : int
        Workload size.
    start_method : {"fork", "spawn"}
        How rank processes start (see ``_launch``).
    seed : int

    Examples
    --------
    >>> TrainingExperiment(fault="compute_straggler", steps=40).run()   # doctest: +SKIP
    """

    def __init__(self, model=None, world_size: int = 2, fault=None, steps: int = 48,
                 repetitions: int = 1, faulty_rank=None, fault_step=None, severity=None,
                 link_delay_ms: float = 4.0, link_mode: str = "emulated",
                 link_rate_mbit: float = 50.0, profile_every: int = 8, channels=CHANNELS,
                 detect_every: int = 4, out_dir=None, keep_raw_windows: bool = False,
                 timeout_s: float = 240.0, diagnose_options=None, layers: int = 2,
                 d_model: int = 64, hidden: int = 256, batch: int = 8, seq: int = 16,
                 start_method: str = "fork", seed: int = 0):
        if fault not in FAULTS:
            raise ValueError(f"fault must be one of {FAULTS}; got {fault!r}")
        if model is None:
            model = "pipeline" if fault == "pipeline_bubble" else "transformer"
        if model not in ("transformer", "pipeline"):
            raise ValueError(f"model must be 'transformer' or 'pipeline'; got {model!r}")
        if fault == "pipeline_bubble" and model != "pipeline":
            raise ValueError("fault='pipeline_bubble' needs model='pipeline'")
        world_size = check_positive_int(world_size, "world_size", minimum=2)
        if world_size > 4:
            raise ValueError(f"world_size must be 2-4 on this host; got {world_size}")
        if fault == "link_degradation" and world_size != 4:
            raise ValueError("fault='link_degradation' needs world_size=4 (two expert groups)")
        self.model, self.world_size, self.fault = model, world_size, fault
        self.steps = check_positive_int(steps, "steps", minimum=24)
        self.repetitions = check_positive_int(repetitions, "repetitions")
        if faulty_rank is not None and not 0 <= int(faulty_rank) < world_size:
            raise ValueError(f"faulty_rank must be in [0, {world_size}); got {faulty_rank!r}")
        self.faulty_rank = world_size - 1 if faulty_rank is None else int(faulty_rank)
        default_step = {"jit_stall": self.steps // 2, "masked_straggler": 5}.get(
            fault, self.steps // 3)
        if default_step % profile_every == 0:   # keep the onset out of a profiler window
            default_step += 1
        self.fault_step = default_step if fault_step is None else int(fault_step)
        if not 4 <= self.fault_step < self.steps - 8:
            raise ValueError(f"fault_step must be in [4, steps - 8); got {self.fault_step}")
        self.severity = float(_SEVERITY.get(fault, 1.0) if severity is None else severity)
        if self.severity < 1:
            raise ValueError(f"severity must be >= 1; got {severity!r}")
        self.link_delay_ms = float(link_delay_ms)
        if link_mode not in ("emulated", "tbf", "auto"):
            raise ValueError(f"link_mode must be 'emulated', 'tbf' or 'auto'; got {link_mode!r}")
        if not link_rate_mbit > 0:
            raise ValueError(f"link_rate_mbit must be > 0; got {link_rate_mbit!r}")
        self.link_mode, self.link_rate_mbit = link_mode, float(link_rate_mbit)
        if fault == "link_degradation" and link_mode != "emulated" and self.faulty_rank == 0:
            raise ValueError("a real link needs faulty_rank >= 1: rank 0 hosts the rendezvous "
                             "store outside the namespace")
        self.profile_every = check_positive_int(profile_every, "profile_every")
        self.channels = tuple(channels)
        self.detect_every = check_positive_int(detect_every, "detect_every")
        self.out_dir = None if out_dir is None else Path(out_dir)
        self.keep_raw_windows = bool(keep_raw_windows)
        self.timeout_s = float(timeout_s)
        self.diagnose_options = dict(diagnose_options or {})
        allowed = set(inspect.signature(diagnose).parameters) - {"store", "steps", "ranks"}
        unknown = sorted(set(self.diagnose_options) - allowed)
        if unknown:
            raise ValueError(f"diagnose_options: unknown {unknown}; choose from "
                             f"{sorted(allowed)}")
        self.layers, self.d_model, self.hidden = layers, d_model, hidden
        self.batch, self.seq, self.seed = batch, seq, int(seed)
        if start_method not in ("fork", "spawn"):
            raise ValueError(f"start_method must be 'fork' or 'spawn'; got {start_method!r}")
        self.start_method = start_method

    # ------------------------------------------------------------------ truth
    @property
    def true_ranks(self) -> set[int]:
        """Ranks a correct diagnosis names."""
        if self.fault is None:
            return set()
        if self.fault == "link_degradation":
            first = 2 * (self.faulty_rank // 2)
            return {first, first + 1}
        if self.fault == "pipeline_bubble":
            return {self.world_size - 1}
        return {self.faulty_rank}

    def resolved_link_mode(self) -> str:
        """``"tbf"`` or ``"emulated"``: how this experiment's link fault is injected (``"none"``
        for other faults). ``"auto"`` checks ``causalkit.systems.tracing.netns.link_support``
        and warns when it falls back to the emulation."""
        if self.fault != "link_degradation":
            return "none"
        if self.link_mode == "auto":
            ok, why = link_support()
            if not ok:
                warnings.warn(f"link_mode='auto': real link unavailable ({why}); emulating the "
                              "degraded link", CausalkitWarning, stacklevel=2)
            return "tbf" if ok else "emulated"
        if self.link_mode == "tbf":
            ok, why = link_support()
            if not ok:
                raise RuntimeError(f"link_mode='tbf' needs root, ip and tc: {why}")
        return self.link_mode

    def _config(self, store: Path, seed: int) -> dict:
        return {"mode": self.model, "world_size": self.world_size, "fault": self.fault,
                "faulty_rank": self.faulty_rank, "fault_step": self.fault_step,
                "severity": self.severity, "link_delay_ms": self.link_delay_ms,
                "degraded_group": self.faulty_rank // 2, "steps": self.steps,
                "layers": self.layers, "d_model": self.d_model, "hidden": self.hidden,
                "batch": self.batch, "seq": self.seq, "microbatches": 4, "ep_tokens": 64,
                "seed": seed, "store": str(store), "channels": list(self.channels),
                "profile_every": self.profile_every, "stack_interval_s": 0.02,
                "queue_size": 8192, "job_id": f"{self.fault}-{seed}", "port": _free_port(),
                "timeout_s": max(30.0, self.timeout_s / 2)}

    # ------------------------------------------------------------------ run
    def _launch(self, cfg: dict, workdir: Path) -> float:
        """Start one process per rank and wait for all of them (``timeout_s``).

        ``start_method="fork"`` forks the (already imported) interpreter, which keeps start-up
        to the gloo rendezvous; ``"spawn"`` runs ``python -m causalkit.systems.tracing.workload
        CONFIG RANK`` per rank (cold start: import torch, ~2 s of CPU per rank).
        """
        workdir.mkdir(parents=True, exist_ok=True)
        cfg_path = workdir / "config.json"
        cfg_path.write_text(json.dumps(cfg))
        t0 = time.perf_counter()
        if self.start_method == "fork":
            import multiprocessing as mp

            import torch.distributed  # noqa: F401  (imported once, before forking)

            from causalkit.systems.tracing.workload import run_logged

            ctx = mp.get_context("fork")
            procs = [ctx.Process(target=run_logged, args=(rank, cfg, str(workdir / f"rank{rank}"
                                                                          ".log")))
                     for rank in range(self.world_size)]
            for p in procs:
                p.start()
            poll, code = (lambda p: p.exitcode), (lambda p: p.exitcode)
        else:
            env = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
            procs = []
            for rank in range(self.world_size):
                with open(workdir / f"rank{rank}.log", "wb") as log:
                    procs.append(subprocess.Popen(
                        [sys.executable, "-m", "causalkit.systems.tracing.workload",
                         str(cfg_path), str(rank)], stdout=log, stderr=subprocess.STDOUT,
                        env=env))
            poll, code = (lambda p: p.poll()), (lambda p: p.returncode)
        deadline = time.monotonic() + self.timeout_s
        timed_out = False
        try:
            while any(poll(p) is None for p in procs):
                if any(poll(p) not in (None, 0) for p in procs):
                    break
                if time.monotonic() > deadline:
                    timed_out = True
                    break
                time.sleep(0.05)
        finally:
            for p in procs:
                if poll(p) is None:
                    p.kill()
            for p in procs:
                (p.join if hasattr(p, "join") else p.wait)(10)
        bad = [(r, code(p)) for r, p in enumerate(procs) if code(p) != 0]
        if bad:
            tails = "\n".join(f"--- rank {r} log:\n" + (workdir / f"rank{r}.log").read_text(
                errors="replace")[-1200:] for r, _ in bad)
            reason = f"timed out after {self.timeout_s} s" if timed_out else f"exit codes {bad}"
            raise RuntimeError(f"training processes failed ({reason})\n{tails}")
        return time.perf_counter() - t0

    def _score(self, report) -> dict:
        expected = EXPECTED_KINDS.get(self.fault, ())
        flagged = {f.rank for f in report.culprits if f.rank is not None}
        hits = {f.rank for f in report.culprits if f.kind in expected} & self.true_ranks
        truth = self.true_ranks
        top = report.culprits[0] if report.culprits else None
        return {"flagged_ranks": ",".join(map(str, sorted(flagged))),
                "precision": (len(hits) / len(flagged)) if flagged else float(not truth),
                "recall": len(hits) / len(truth) if truth else np.nan,
                "detected": bool(truth) and hits == truth,
                "false_alarm": bool(flagged - truth),
                "culprit_kind": top.kind if top else "", "culprit_rank": top.rank if top else -1,
                "culprit_category": top.category if top else "",
                "culprit_phase": (top.phase or top.kernel or "") if top else ""}

    def _time_to_detect(self, store: TraceStore, iters: pd.DataFrame):
        if self.fault is None:
            return np.nan, np.nan
        job_start = iters.groupby("step")["start_ns"].min()
        job_end = (iters["start_ns"] + iters["duration_ns"]).groupby(iters["step"]).max()
        expected = EXPECTED_KINDS[self.fault]
        onset = job_start.loc[self.fault_step]
        ends = list(range(self.fault_step + self.detect_every, self.steps, self.detect_every))
        for end in ends + [self.steps]:
            t0 = time.perf_counter()
            report = diagnose(store, steps=(2, end), **self.diagnose_options)
            spent = time.perf_counter() - t0
            hits = {f.rank for f in report.culprits if f.kind in expected}
            if self.true_ranks <= hits:
                return end - self.fault_step, (job_end.loc[end - 1] - onset) / 1e9 + spent
        return np.nan, np.nan

    def trace(self, seed: int | None = None, rep: int = 0):
        """One traced and diagnosed run with ``seed`` (default: ``self.seed``), recorded as
        repetition ``rep``; returns (row dict, Report)."""
        seed = self.seed if seed is None else int(seed)
        base = Path(tempfile.mkdtemp(prefix="argus-")) if self.out_dir is None else self.out_dir
        store_dir = base / f"{self.fault or 'none'}-ws{self.world_size}-seed{seed}"
        if store_dir.exists():
            shutil.rmtree(store_dir)
        mode = self.resolved_link_mode()
        try:
            cfg = self._config(store_dir / "traces", seed)
            if self.keep_raw_windows:
                cfg["raw_trace_dir"] = str(store_dir / "raw")
            if mode == "tbf":
                with ShapedLink(secrets.token_hex(3)) as link:
                    cfg["link"] = {"netns": link.netns, "inner_rank": self.faulty_rank,
                                   "inner_dev": link.inner_dev, "outer_dev": link.outer_dev,
                                   "outer_addr": link.outer_addr,
                                   "rate_mbit": self.link_rate_mbit}
                    wall = self._launch(cfg, store_dir)
            else:
                wall = self._launch(cfg, store_dir)
            store = TraceStore(store_dir / "traces")
            t0 = time.perf_counter()
            report = diagnose(store, **self.diagnose_options)
            diag_s = time.perf_counter() - t0
            iters = store.iterations()
            windows = store.windows()
            meta = store.meta()
            steps_to, seconds_to = self._time_to_detect(store, iters)
            job = iters.groupby("step")["duration_ns"].max() / 1e6
            counters = [m.get("counters", {}) for m in meta.values()]
            row = {"fault": self.fault or "none", "model": self.model,
                   "world_size": self.world_size, "rep": rep, "seed": seed,
                   "steps": self.steps, "fault_step": self.fault_step,
                   "faulty_ranks": ",".join(map(str, sorted(self.true_ranks))),
                   "severity": self.severity,
                   "emulated": mode == "emulated", "link_mode": mode, "simulated": False,
                   **self._score(report),
                   "steps_to_detect": steps_to, "time_to_detect_s": seconds_to,
                   "diagnose_s": diag_s, "wall_s": wall,
                   "step_ms_before": float(job.loc[2:self.fault_step - 1].median()),
                   "step_ms_after": float(job.loc[self.fault_step:].median()),
                   "l1_label": report.labels.get("job", ""),
                   "n_windows": len(windows),
                   "compression_ratio": float(windows["raw_bytes"].sum()
                                              / windows["summary_bytes"].sum())
                   if len(windows) else np.nan,
                   "dropped": sum(sum(c.get("dropped", {}).values()) for c in counters),
                   "tracer_errors": sum(c.get("errors", 0) for c in counters)}
            return row, report
        finally:
            if self.out_dir is None:
                shutil.rmtree(base, ignore_errors=True)

    def run_once(self, rng: np.random.Generator, rep: int) -> dict:
        """Repetition ``rep`` (the engine's ``run_once`` protocol): the row of :meth:`trace`
        with a seed drawn from ``rng``."""
        return self._seeded_trace(rng, rep)[0]

    def repetition(self, rep: int):
        """Repetition ``rep`` of :meth:`run` with its report: ``(row, Report)``."""
        return self._seeded_trace(np.random.default_rng([self.seed, rep]), rep)

    def _seeded_trace(self, rng: np.random.Generator, rep: int):
        return self.trace(int(rng.integers(2**31 - 1)), rep)

    def run(self, *, out=None, overwrite: bool | None = None,
            progress: bool = False) -> pd.DataFrame:
        """All repetitions through the experiment engine
        (:func:`causalkit.simulation.run_experiment`: repetition ``r`` seeded from
        ``SeedSequence([seed, r])``; a results file ``out`` makes the run resumable).
        Repetitions run one after another (each already uses ``world_size`` processes).

        Returns
        -------
        pandas.DataFrame
            One row per repetition (see :meth:`trace`).
        """
        from causalkit.simulation import run_experiment
        return run_experiment(self.run_once, [{}], self.repetitions, self.seed, out=out,
                              overwrite=overwrite, progress=progress)
