"""``ElasticExperiment``: run a resize schedule live or with checkpoint/restart and tabulate it.

Everything here is measured on real worker processes (gloo over loopback, CPU); nothing is
simulated. Timings depend on the machine's load: report them with it.
"""

from __future__ import annotations

import dataclasses
import os
import time

import numpy as np
import pandas as pd

from causalkit._validation import check_positive_int

from .layout import ModelSpec, ParallelLayout, layout_for
from .timeline import goodput, loss_curve, phase_table
from .trainer import ElasticTrainer

__all__ = ["ElasticExperiment", "parse_schedule", "tidy_runs"]


def parse_schedule(schedule, spec: ModelSpec) -> list[ParallelLayout]:
    """Layouts of a schedule given as world sizes (``[2, 3, 4, 2]``), ``"TPxPPxDP"`` strings or
    :class:`ParallelLayout` objects (mixed is fine). World sizes use :func:`layout_for`."""
    if isinstance(schedule, str):
        schedule = [s.strip() for s in schedule.split(",") if s.strip()]
    schedule = list(schedule)
    if len(schedule) < 1:
        raise ValueError("schedule must list at least one layout")
    out = []
    for i, item in enumerate(schedule):
        if isinstance(item, ParallelLayout):
            layout = item
        elif (isinstance(item, (int, np.integer)) and not isinstance(item, bool)) or (
                isinstance(item, str) and item.isdigit()):
            layout = layout_for(int(item), spec)
        elif isinstance(item, str):
            layout = ParallelLayout.parse(item)
        else:
            raise TypeError(f"schedule[{i}] must be an int, 'TPxPPxDP' or ParallelLayout; "
                            f"got {item!r}")
        out.append(spec.validate(layout, name=f"schedule[{i}]"))
    return out


def tidy_runs(runs: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Split the engine's rows of :meth:`ElasticExperiment.run_once` into the per-event table
    (one row per resize event and run; a run without events keeps one row) and the loss
    curves (``rep, mode, step, loss, layout``)."""
    curves = pd.DataFrame([{"rep": run["rep"], "mode": run["mode"], **point}
                           for run in runs.to_dict("records") for point in run["loss_curve"]])
    rows = []
    for run in runs.drop(columns="loss_curve").to_dict("records"):
        events = run.pop("events")
        rows.extend([{**run, **event} for event in events] or [run])
    return pd.DataFrame(rows), curves


class ElasticExperiment:
    """Train while the layout follows ``schedule``; one row per resize event and repetition.

    Parameters
    ----------
    schedule : sequence
        Initial layout followed by the targets of the resize events (see
        ``causalkit.systems.elastic.experiment.parse_schedule``), e.g. ``[2, 3, 4, 2]`` workers.
    steps : int
        Optimizer steps per run; resize notices are spread evenly (event ``i`` of ``n`` is
        requested once step ``(i + 1) * steps / (n + 1)`` has completed). If preparation is slow
        (a loaded machine), training runs past ``steps`` until the last resize is done plus
        ``steps / (n + 1)`` steps in the final layout.
    mode : {"live", "restart"}
        Live reconfiguration or the checkpoint/restart baseline.
    spec : ModelSpec, optional
    staging_bytes : int
        Staging bound per worker (live mode).
    repeats : int
        Independent runs (fresh processes each).
    timeout_s : float
        Timeout for groups and waits.
    seed : int
        Base seed: repetition ``r`` draws the model's seed from ``SeedSequence([seed, r])``.

    Attributes
    ----------
    loss_curves_ : DataFrame
        After :meth:`run`: ``rep, mode, step, loss, layout`` for every run.
    """

    def __init__(self, schedule, steps: int = 40, mode: str = "live", *, spec=None,
                 staging_bytes: int = 64 << 10, repeats: int = 1, timeout_s: float = 60.0,
                 seed: int = 0):
        self.schedule = schedule
        self.steps = steps
        self.mode = mode
        self.spec = spec
        self.staging_bytes = staging_bytes
        self.repeats = repeats
        self.timeout_s = timeout_s
        self.seed = seed

    def _validate(self):
        spec = self.spec if self.spec is not None else ModelSpec()
        if not isinstance(spec, ModelSpec):
            raise TypeError(f"spec must be a ModelSpec; got {type(spec).__name__}")
        if self.mode not in ("live", "restart"):
            raise ValueError(f"mode must be 'live' or 'restart'; got {self.mode!r}")
        layouts = parse_schedule(self.schedule, spec)
        steps = check_positive_int(self.steps, "steps")
        if steps < 3 * len(layouts):
            raise ValueError(f"steps must be >= 3 per schedule entry ({3 * len(layouts)}); "
                             f"got {steps}")
        check_positive_int(self.repeats, "repeats")
        return spec, layouts, steps

    def run(self, *, out=None, overwrite: bool | None = None,
            progress: bool = False) -> pd.DataFrame:
        """Run every repetition through the experiment engine
        (:func:`causalkit.simulation.run_experiment`: repetition ``r`` seeded from
        ``SeedSequence([seed, r])``, which seeds the model; a results file ``out`` makes the run
        resumable); return the tidy per-event table. Repetitions run one after another (each
        already starts one process per worker)."""
        from causalkit.simulation import run_experiment

        self._validate()
        runs = run_experiment(self.run_once, [{}], self.repeats, self.seed, out=out,
                              overwrite=overwrite, progress=progress)
        events, self.loss_curves_ = tidy_runs(runs)
        return events

    def run_once(self, rng: np.random.Generator, rep: int) -> dict:
        """One run (the engine's ``run_once`` protocol), the model seeded from ``rng``.

        Returns the run's row, with its resize events (``events``: one dict per event) and its
        loss curve (``loss_curve``: ``step, loss, layout`` dicts) as list-valued entries.
        """
        spec, layouts, steps = self._validate()
        spec = dataclasses.replace(spec, seed=int(rng.integers(2**31 - 1)))
        n_events = len(layouts) - 1
        t0 = time.time()
        gap = int(round(steps / (n_events + 1)))
        with ElasticTrainer(layouts[0], spec, steps=10 * steps + 1000,
                            staging_bytes=self.staging_bytes,
                            timeout_s=self.timeout_s) as trainer:
            for i, layout in enumerate(layouts[1:]):
                trainer.wait_step(int(round((i + 1) * steps / (n_events + 1))))
                if self.mode == "live":
                    trainer.resize(layout)
                else:
                    trainer.restart(layout)
                    trainer.wait_step(trainer.progress() + 1)
            trainer.stop(max(steps, trainer.progress() + gap))
            trainer.wait()
            events = trainer.timeline()
        phases = phase_table(events)
        exits = events[events.ev == "exit"]
        st = events[events.ev == "step"]
        dur = st.t - st.t0
        busy = st.preparing.astype(bool)
        return {"rep": rep, "mode": self.mode, "seed": spec.seed,
                "schedule": ",".join(str(x) for x in layouts), "steps": steps,
                "goodput": goodput(events, phases), "wall_s": time.time() - t0,
                "max_rss_mb": float(exits.maxrss_kb.max()) / 1024.0,
                "median_step_s": float(dur[~busy].median()),
                "median_step_preparing_s": float(dur[busy].median()) if busy.any()
                else float("nan"),
                "staging_bytes": self.staging_bytes, "engine": "real (gloo, CPU)",
                "load_average_1min": os.getloadavg()[0], "simulated": False,
                "events": [{"event": int(ph["gen"]) - 1, **ph} for ph in
                           phases.to_dict("records")],
                "loss_curve": loss_curve(events).to_dict("records")}
