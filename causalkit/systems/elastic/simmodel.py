"""SIMULATED: a SimPy discrete-event model of live reconfiguration versus checkpoint/restart.

Nothing in this module runs a real job. It models the same protocol as the real runtime, for
scales this machine does not have (GPU clusters up to 1,024 GPUs, spot-instance traces):

* a training loop of fixed-length steps; reconfiguration requests arrive from a trace and are
  served one at a time (a request arriving during a reconfiguration waits in a queue);
* live: preparation runs in the background while training continues; at the first step boundary
  after it is ready the job pauses for cut + transfer + verify + commit + switch + warm-up;
* restart: at the next step boundary the job pauses for save + teardown + start/import +
  rendezvous + load + warm-up.

Phase durations come from a :class:`ProtocolParams`: either fitted to the real CPU runs
(:func:`params_from_phases`, used to check the model against measurements) or the GPU-scale
parameters of :func:`gpu_params`, CALIBRATED to the numbers reported for LiveR (Liu et al., arXiv
2605.22014, 2026: GPT-30B on 32 A800 GPUs, about 5.8 s live vs about 150 s Megatron restart) and
scaled by state size and GPU count. Outputs carry ``simulated=True``. A GPU-scale run is
therefore calibrated, not predicted: at the calibration point it returns the paper's own
downtimes, and elsewhere the assumed scaling laws; it cannot confirm the paper's claims. A
prediction from costs measured on this machine is made in
:mod:`~causalkit.systems.elastic.transfer_study`.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np
import pandas as pd
import simpy

__all__ = ["ProtocolParams", "simulate_resizes", "spot_trace", "gpu_params", "params_from_phases"]


@dataclass(frozen=True)
class ProtocolParams:
    """Durations (seconds) of the protocol's phases for one job size.

    Size-dependent terms: ``transfer = moved_fraction * state_bytes / (n * link_Bps)`` (every
    GPU moves its share over its own link, ``n = min(n_old, n_new)``); ``save = state_bytes /
    save_Bps`` and ``load = state_bytes / storage_Bps`` (a shared checkpoint store: its aggregate
    write / read bandwidth does not grow with the job);
    ``rendezvous = rdzv_base_s + rdzv_per_rank_s * n``. Fixed terms otherwise.
    """

    step_s: float
    state_bytes: float
    # live
    prepare_s: float
    cut_s: float
    link_Bps: float
    moved_fraction: float
    verify_s: float
    commit_s: float
    switch_s: float
    live_warmup_s: float
    # restart
    storage_Bps: float
    save_Bps: float
    save_fixed_s: float
    teardown_s: float
    start_s: float
    rdzv_base_s: float
    rdzv_per_rank_s: float
    load_fixed_s: float
    restart_warmup_s: float

    def live_phases(self, n_old: int, n_new: int) -> dict:
        n = min(n_old, n_new)
        return {"cut": self.cut_s,
                "transfer": self.moved_fraction * self.state_bytes / (n * self.link_Bps),
                "verify": self.verify_s, "commit": self.commit_s, "switch": self.switch_s,
                "warmup": self.live_warmup_s}

    def restart_phases(self, n_old: int, n_new: int) -> dict:
        return {"save": self.save_fixed_s + self.state_bytes / self.save_Bps,
                "teardown": self.teardown_s, "start_import": self.start_s,
                "rendezvous": self.rdzv_base_s + self.rdzv_per_rank_s * n_new,
                "load": self.load_fixed_s + self.state_bytes / self.storage_Bps,
                "warmup": self.restart_warmup_s}


def simulate_resizes(params: ProtocolParams, trace, horizon_s: float, mode: str,
             n0: int) -> tuple[pd.DataFrame, dict]:
    """Simulate ``horizon_s`` seconds of training under ``trace`` (``[(time_s, world_size)]``).

    Returns the per-event table (phases, downtime, queueing delay) and a summary with goodput
    (= fraction of the horizon spent in training steps) and the number of steps completed.
    """
    if mode not in ("live", "restart"):
        raise ValueError(f"mode must be 'live' or 'restart'; got {mode!r}")
    env = simpy.Environment()
    requests = simpy.Store(env)
    state = {"n": n0, "ready": None, "steps": 0, "train_s": 0.0}
    rows = []

    def arrivals():
        for t, n in sorted(trace):
            if t >= horizon_s:
                break
            yield env.timeout(max(t - env.now, 0.0))
            requests.put((env.now, int(n)))

    def manager():
        while True:
            t_req, n_new = yield requests.get()
            if n_new == state["n"]:
                continue
            if mode == "live":
                yield env.timeout(params.prepare_s)
            done = env.event()
            state["ready"] = (t_req, n_new, done)
            yield done

    def trainer():
        while True:
            yield env.timeout(params.step_s)
            state["steps"] += 1
            state["train_s"] += params.step_s
            if state["ready"] is not None:
                t_req, n_new, done = state["ready"]
                state["ready"] = None
                ph = (params.live_phases if mode == "live" else params.restart_phases)(
                    state["n"], n_new)
                pause = sum(ph.values())
                rows.append({"t_request": t_req, "t_cut": env.now, "old_n": state["n"],
                             "new_n": n_new, **ph, "downtime_s": pause,
                             "delay_s": env.now - t_req})
                yield env.timeout(pause)
                state["n"] = n_new
                done.succeed()

    env.process(arrivals())
    env.process(manager())
    env.process(trainer())
    env.run(until=horizon_s)
    table = pd.DataFrame(rows)
    if len(table):
        table.insert(0, "mode", mode)
        table["simulated"] = True
    summary = {"mode": mode, "events": len(rows), "steps": state["steps"],
               "goodput": state["train_s"] / horizon_s,
               "downtime_s": float(table.downtime_s.sum()) if len(table) else 0.0,
               "simulated": True}
    return table, summary


def spot_trace(n_events: int, horizon_s: float, sizes, *, seed: int = 0):
    """A synthetic spot-capacity trace: ``n_events`` uniformly random times in the horizon, each
    moving the world size to a random different value of ``sizes``."""
    rng = np.random.default_rng(seed)
    times = np.sort(rng.uniform(0, horizon_s, n_events))
    sizes = list(sizes)
    current, out = sizes[-1], []
    for t in times:
        current = rng.choice([s for s in sizes if s != current])
        out.append((float(t), int(current)))
    return out


def gpu_params(n_params: float = 30e9, *, step_s: float = 10.0,
               bytes_per_param: float = 16.0) -> ProtocolParams:
    """GPU-scale parameters, CALIBRATED to the reported GPT-30B / 32-GPU numbers (the paper's
    downtimes are inputs here, so a simulation with them is not a prediction of the paper).

    Assumptions (not measurements): mixed-precision Adam state of ``bytes_per_param`` = 16 B per
    parameter; a resize moves half of the state; the live fixed costs are the reported switch
    (< 0.5 s) and a drain/verify/warm-up of about 0.5 s each; the restart fixed costs are process
    start + CUDA init 30 s, teardown 5 s, NCCL rendezvous 5 s + 10 ms per GPU, warm-up 10 s.
    The per-GPU link bandwidth and the aggregate checkpoint-store bandwidth are then solved so
    that GPT-30B on 32 GPUs gives 5.8 s live and 150 s restart downtime; other sizes follow from
    the formulas of :class:`ProtocolParams`.
    """
    n_ref, state_ref = 32, 30e9 * bytes_per_param
    live_fixed = {"cut_s": 0.5, "verify_s": 0.3, "commit_s": 0.2, "switch_s": 0.4,
                  "live_warmup_s": 0.5}
    link = 0.5 * state_ref / n_ref / (5.8 - sum(live_fixed.values()))
    restart_fixed = {"save_fixed_s": 1.0, "teardown_s": 5.0, "start_s": 30.0,
                     "rdzv_base_s": 5.0, "rdzv_per_rank_s": 0.01, "load_fixed_s": 1.0,
                     "restart_warmup_s": 10.0}
    fixed = sum(restart_fixed.values()) - restart_fixed["rdzv_per_rank_s"] + 0.01 * n_ref
    storage = 2 * state_ref / (150.0 - fixed)
    return ProtocolParams(step_s=step_s, state_bytes=n_params * bytes_per_param,
                          prepare_s=60.0, link_Bps=link, moved_fraction=0.5,
                          storage_Bps=storage, save_Bps=storage, **live_fixed, **restart_fixed)


def params_from_phases(live: pd.DataFrame, restart: pd.DataFrame, *, step_s: float,
                       state_bytes: float, moved_bytes: float) -> ProtocolParams:
    """Fit :class:`ProtocolParams` to measured phase tables (medians; CPU runs).

    Bandwidths are taken from the measured transfer, save and load times and the known byte
    counts.
    """
    med = lambda df, c: float(np.nanmedian(df[c])) if c in df and len(df) else 0.0  # noqa: E731
    n_live = float(np.median(np.minimum(live.old_n, live.new_n))) if "old_n" in live else 2.0
    transfer = max(med(live, "transfer"), 1e-6)
    load = max(med(restart, "load"), 1e-6)
    return ProtocolParams(
        step_s=step_s, state_bytes=state_bytes, prepare_s=med(live, "prepare_s"),
        cut_s=med(live, "cut"), link_Bps=moved_bytes / (n_live * transfer),
        moved_fraction=moved_bytes / state_bytes, verify_s=med(live, "verify"),
        commit_s=med(live, "commit"), switch_s=med(live, "switch"),
        live_warmup_s=med(live, "warmup_excess_s"),
        storage_Bps=state_bytes / load,
        save_Bps=state_bytes / max(med(restart, "save"), 1e-6), save_fixed_s=0.0,
        teardown_s=med(restart, "teardown"), start_s=med(restart, "start_import"),
        rdzv_base_s=med(restart, "rendezvous"), rdzv_per_rank_s=0.0, load_fixed_s=0.0,
        restart_warmup_s=med(restart, "warmup_excess_s") + med(restart, "resume"))


def describe(params: ProtocolParams) -> dict:
    return {k: (float(v) if isinstance(v, (int, float)) else v) for k, v in asdict(params).items()}


__all__ += ["describe"]
