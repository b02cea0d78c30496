"""The coordinator: launches workers, issues resize / restart requests, decides commit or abort.

``ElasticTrainer`` runs in the calling process. It hosts the control store (a ``TCPStore`` on
127.0.0.1), starts one worker process per rank (real gloo processes), and drives the protocol of
:mod:`.worker`. Every worker and the coordinator append timestamped events to JSON-lines files in
``run_dir``; :mod:`.timeline` turns them into phases, downtime, goodput and loss curves.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd

from causalkit._validation import check_positive_int

from .layout import ModelSpec, ParallelLayout
from .plan import reshard_plan

__all__ = ["ElasticTrainer"]

_WORKER = "causalkit.systems.elastic.worker"
#: Seconds a reported failure waits for a silent member to show up as dead: a peer's
#: communication error is usually the symptom of that death, which the process table shows a
#: moment later (on a loaded host, after the peer's report).
_DEATH_GRACE_S = 2.0


class ElasticTrainer:
    """Train the model of ``spec`` on ``layout`` and reshape it while it runs.

    Parameters
    ----------
    layout : ParallelLayout
        Initial layout (its world size is the number of worker processes started).
    spec : ModelSpec, optional
        Model and training hyper-parameters (default ``ModelSpec()``).
    steps : int
        Total optimizer steps; workers stop after the last one (see also :meth:`stop`).
    staging_bytes : int
        Staging bound ``B`` per worker for live transfers.
    timeout_s : float
        Timeout of gloo groups and of the coordinator's waits.
    run_dir : str or Path, optional
        Folder for event logs, checkpoints and dumps (default: a fresh temporary folder, removed
        by :meth:`close`).
    dump_state : bool
        Save every rank's state before and after each live transfer (``.npz``) so that
        :meth:`state_checksums` can compare the logical tensors.

    Notes
    -----
    Use as a context manager, or call :meth:`close`. ``resize`` is the live path (prepare in the
    background, cut, stream, verify, commit); ``restart`` is the checkpoint/restart baseline
    (torch.distributed.checkpoint save, all workers exit, a ``torchrun`` relaunch, load with
    resharding). Requests are served one at a time.
    """

    def __init__(self, layout: ParallelLayout, spec: ModelSpec | None = None, *, steps: int = 40,
                 staging_bytes: int = 64 << 10, timeout_s: float = 60.0, run_dir=None,
                 dump_state: bool = False):
        self.spec = spec if spec is not None else ModelSpec()
        if not isinstance(self.spec, ModelSpec):
            raise TypeError(f"spec must be a ModelSpec; got {type(self.spec).__name__}")
        self.layout = self.spec.validate(layout)
        self.steps = check_positive_int(steps, "steps")
        self.staging_bytes = check_positive_int(staging_bytes, "staging_bytes")
        if staging_bytes < self.spec.itemsize:
            raise ValueError("staging_bytes must hold at least one element")
        if not timeout_s > 0:
            raise ValueError(f"timeout_s must be > 0; got {timeout_s}")
        self.timeout_s = float(timeout_s)
        self._own_dir = run_dir is None
        self.run_dir = Path(tempfile.mkdtemp(prefix="elastic-") if run_dir is None else run_dir)
        self.dump_state = bool(dump_state)
        self.gen = 0
        self.members = list(range(layout.world_size))
        self.procs: dict[int, subprocess.Popen] = {}
        self.launchers: list[subprocess.Popen] = []
        self.records: list[dict] = []
        self._next_wid = layout.world_size
        self._cmds = 0
        self.store = None

    # -- lifecycle ----------------------------------------------------------------------------
    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.close()

    def start(self) -> ElasticTrainer:
        """Start the control store and the workers of generation 0 (returns at once)."""
        from .comm import serve_store

        self.run_dir.mkdir(parents=True, exist_ok=True)
        self._log = open(self.run_dir / "coordinator.jsonl", "a")  # noqa: SIM115
        self.store, self.port = serve_store(self.timeout_s * 5)
        self.store.set("run", json.dumps({"spec": self.spec.to_dict(), "steps": self.steps,
                                          "timeout_s": self.timeout_s,
                                          "dump_state": self.dump_state}))
        self._write_spec(0, self.layout, self.members, self.layout, self.members)
        self.log("start", gen=0, layout=str(self.layout))
        for w in self.members:
            self.procs[w] = self._spawn(w, 0, "start")
        return self

    def close(self) -> None:
        """Stop every process still running and remove a temporary ``run_dir``."""
        for p in self.launchers:  # torchrun forwards SIGTERM to its workers
            if p.poll() is None:
                p.terminate()
                try:
                    p.wait(timeout=15)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait()
        for p in self.procs.values():
            if p.poll() is None:
                p.kill()
                p.wait()
        if getattr(self, "_log", None) is not None and not self._log.closed:
            self._log.close()
        if self._own_dir:
            shutil.rmtree(self.run_dir, ignore_errors=True)

    def wait(self, timeout_s: float | None = None) -> ElasticTrainer:
        """Wait until training has finished and every worker has exited cleanly."""
        deadline = time.time() + (timeout_s or 20 * self.timeout_s)
        for p in list(self.procs.values()) + self.launchers:
            left = max(deadline - time.time(), 0.1)
            try:
                p.wait(timeout=left)
            except subprocess.TimeoutExpired:
                raise TimeoutError(f"worker {p.args[-1]} did not finish; logs in "
                                   f"{self.run_dir}") from None
        bad = [e for e in self.events() if e["ev"] == "crash"]
        if bad:
            raise RuntimeError(f"worker {bad[0]['wid']} crashed: {bad[0]['error']}")
        self.log("finished")
        return self

    def stop(self, at_step: int) -> None:
        """End training after step ``at_step`` (or at once, if it has already passed it)."""
        self.store.set("stop_at", str(check_positive_int(at_step, "at_step")))

    def progress(self) -> int:
        """Optimizer steps completed so far (as last reported by world rank 0)."""
        return int(self.store.get("progress").decode()) if self.store.check(["progress"]) else 0

    def wait_step(self, step: int, timeout_s: float | None = None) -> int:
        deadline = time.time() + (timeout_s or 10 * self.timeout_s)
        while self.progress() < step:
            self._check_alive(self.members)
            if time.time() > deadline:
                raise TimeoutError(f"training did not reach step {step}")
            time.sleep(0.005)
        return self.progress()

    # -- requests -----------------------------------------------------------------------------
    def resize(self, new_layout: ParallelLayout, *, fault: dict | None = None) -> dict:
        """Live reconfiguration to ``new_layout``; returns when committed or aborted.

        ``fault={"kill_worker": wid, "after_batches": k}`` makes worker ``wid`` (a joiner) kill
        itself with SIGKILL after receiving ``k`` staging batches (fault injection).
        """
        old_layout, old_members, new_members, gen = self._begin(new_layout)
        plan = reshard_plan(old_layout, new_layout, self.spec, old_workers=old_members,
                            new_workers=new_members, staging_bytes=self.staging_bytes)
        self._write_spec(gen, new_layout, new_members, old_layout, old_members, fault=fault)
        self.log("notice", gen=gen, mode="live", old_layout=str(old_layout),
                 new_layout=str(new_layout),
                 **{k: v for k, v in plan.to_dict().items() if "layout" not in k})
        for w in new_members:
            if w not in old_members:
                self.log("spawn", gen=gen, worker=w)
                self.procs[w] = self._spawn(w, gen, "join")
        self._command("prepare", gen)
        union = sorted(set(old_members) | set(new_members))
        decision, reason = self._decide(gen, union)
        self.store.set(f"g{gen}/decision", decision)
        self.log("decision", gen=gen, decision=decision, reason=reason)
        if decision == "commit":
            self.layout, self.members = new_layout, new_members
            for w in set(old_members) - set(new_members):
                self.procs[w].wait(timeout=self.timeout_s)
        else:
            for w in set(new_members) - set(old_members):
                try:
                    self.procs[w].wait(timeout=self.timeout_s)
                except subprocess.TimeoutExpired:
                    self.procs[w].kill()
        record = {"gen": gen, "mode": "live", "old_layout": str(old_layout),
                  "new_layout": str(new_layout), "outcome": decision, "reason": reason,
                  **{f"plan_{k}": v for k, v in plan.to_dict().items() if "layout" not in k}}
        self.records.append(record)
        return record

    def restart(self, new_layout: ParallelLayout) -> dict:
        """Checkpoint/restart baseline: save (DCP), stop all workers, relaunch with torchrun on
        ``new_layout``, load with resharding. Returns once the relaunch has been started."""
        old_layout, old_members, new_members, gen = self._begin(new_layout)
        self._write_spec(gen, new_layout, new_members, old_layout, old_members)
        self.log("notice", gen=gen, mode="restart", old_layout=str(old_layout),
                 new_layout=str(new_layout))
        self._command("checkpoint", gen)
        deadline = time.time() + 5 * self.timeout_s
        for p in [self.procs[w] for w in old_members] + self.launchers:
            p.wait(timeout=max(deadline - time.time(), 0.1))
        if any(p.returncode for p in [self.procs[w] for w in old_members] + self.launchers):
            raise RuntimeError(f"a worker failed while checkpointing; logs in {self.run_dir}")
        self.log("teardown_end", gen=gen)
        self.launchers = []
        cmd = [sys.executable, "-m", "torch.distributed.run", "--nnodes=1",
               f"--nproc-per-node={new_layout.world_size}", "--rdzv-backend=c10d",
               f"--rdzv-endpoint=127.0.0.1:{self.port}", "--rdzv-conf=is_host=false",
               "--local-addr=127.0.0.1", f"--rdzv-id=elastic-g{gen}", "--max-restarts=0",
               "--monitor-interval=0.1",
               "-m", _WORKER, "--port", str(self.port), "--run-dir", str(self.run_dir),
               "--gen", str(gen), "--role", "restart"]
        self.log("launch", gen=gen)
        # no shared rendezvous TCPStore: torchrun would serve it on every interface
        env = dict(self._env(), TORCH_DISABLE_SHARE_RDZV_TCP_STORE="1")
        launcher = subprocess.Popen(cmd, env=env, stdout=self._out(f"torchrun-g{gen}"),
                                    stderr=subprocess.STDOUT)
        self.launchers = [launcher]
        for w in old_members:
            self.procs.pop(w)
        for w in new_members:
            self.procs[w] = launcher
        self.layout, self.members = new_layout, new_members
        record = {"gen": gen, "mode": "restart", "old_layout": str(old_layout),
                  "new_layout": str(new_layout), "outcome": "commit", "reason": ""}
        self.records.append(record)
        return record

    # -- results ------------------------------------------------------------------------------
    def events(self) -> list[dict]:
        """Every event logged so far by the coordinator and the workers (time-ordered)."""
        out = []
        for path in sorted(self.run_dir.glob("*.jsonl")):
            with open(path) as fh:
                out.extend(json.loads(line) for line in fh if line.strip())
        return sorted(out, key=lambda e: e["t"])

    def timeline(self) -> pd.DataFrame:
        """All events as a DataFrame (``t`` in seconds since the start)."""
        df = pd.DataFrame(self.events())
        origin = df["t"].min()
        df["t"] -= origin
        if "t0" in df:
            df["t0"] -= origin
        return df

    def state_checksums(self, gen: int, when: str) -> dict[str, str]:
        """SHA-256 of every logical tensor assembled from the ``when`` ("before" / "after")
        dumps of the resize to generation ``gen`` (requires ``dump_state=True``)."""
        from .timeline import assemble_dumps

        return assemble_dumps(self.run_dir, gen, when, self.spec)[1]

    # -- internals ----------------------------------------------------------------------------
    def log(self, ev: str, **kw) -> None:
        kw.update(ev=ev, wid=-1, t=time.time())
        self._log.write(json.dumps(kw) + "\n")
        self._log.flush()

    def _env(self) -> dict:
        env = dict(os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
        root = str(Path(__file__).resolve().parents[3])
        env["PYTHONPATH"] = root + os.pathsep + env.get("PYTHONPATH", "")
        return env

    def _out(self, name: str):
        return open(self.run_dir / f"{name}.log", "ab")

    def _spawn(self, wid: int, gen: int, role: str) -> subprocess.Popen:
        cmd = [sys.executable, "-m", _WORKER, "--port", str(self.port), "--run-dir",
               str(self.run_dir), "--gen", str(gen), "--role", role, "--wid", str(wid)]
        return subprocess.Popen(cmd, env=self._env(), stdout=self._out(f"w{wid}"),
                                stderr=subprocess.STDOUT)

    def _begin(self, new_layout):
        if self.store is None:
            raise RuntimeError("call start() (or use the trainer as a context manager) first")
        self.spec.validate(new_layout, name="new_layout")
        self._check_alive(self.members)
        if self.progress() >= self.steps:
            raise RuntimeError("training has already finished")
        old_members = list(self.members)
        n = new_layout.world_size
        if n >= len(old_members):
            new_members = old_members + list(range(self._next_wid,
                                                   self._next_wid + n - len(old_members)))
            self._next_wid += n - len(old_members)
        else:
            new_members = old_members[:n]
        self.gen += 1
        return self.layout, old_members, new_members, self.gen

    def _write_spec(self, gen, layout, members, old_layout, old_members, fault=None):
        self.store.set(f"g{gen}/spec", json.dumps({
            "gen": gen, "layout": layout.to_dict(), "members": members,
            "old_layout": old_layout.to_dict(), "old_members": old_members,
            "staging_bytes": self.staging_bytes, "fault": fault}))

    def _command(self, op: str, gen: int) -> None:
        self.store.set(f"cmd/{self._cmds}", json.dumps({"op": op, "gen": gen}))
        self._cmds += 1

    def _check_alive(self, members) -> None:
        dead = [w for w in members if self.procs[w].poll() not in (None, 0)]
        if dead:
            raise RuntimeError(f"workers {dead} died; logs in {self.run_dir}")

    def _decide(self, gen: int, union: list[int]) -> tuple[str, str]:
        """COMMIT iff every member reports ``ok``; ABORT on a failure, a death or a timeout.
        A death is named as the cause before a reported failure, which waits up to
        ``_DEATH_GRACE_S`` for a silent member to exit."""
        deadline = time.time() + 5 * self.timeout_s
        keys = {w: f"g{gen}/status/{w}" for w in union}
        grace = None
        while True:
            done = {w: self.store.get(k).decode() for w, k in keys.items()
                    if self.store.check([k])}
            dead = [w for w in union if w not in done and self.procs[w].poll() is not None]
            if dead:
                return "abort", f"worker {dead[0]} exited (code {self.procs[dead[0]].poll()})"
            failed = {w: s for w, s in done.items() if s != "ok"}
            if failed:
                grace = grace or time.time() + _DEATH_GRACE_S
                if len(done) == len(union) or time.time() > grace:
                    return "abort", f"worker {min(failed)} reported {failed[min(failed)]}"
            if len(done) == len(union):
                return "commit", ""
            if time.time() > deadline:
                return "abort", "timeout"
            time.sleep(0.005)
