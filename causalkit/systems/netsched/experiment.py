"""``ClusterExperiment``: schedulers x offered loads x repetitions on one simulated cluster.

Each (load, repetition) draws one synthetic trace (from ``SeedSequence([seed, rep])``, through the
experiment engine) that every scheduler then runs, so scheduler comparisons are paired (common
random numbers). The cluster is simulated (see :mod:`.sim`); the output says so in its
``simulated`` column.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from causalkit._validation import check_positive_int
from causalkit.systems.netsched.schedulers import ECMP_ROUTED, SCHEDULERS
from causalkit.systems.netsched.sim import simulate_cluster
from causalkit.systems.netsched.topology import LeafSpine
from causalkit.systems.netsched.traces import synthetic_trace

__all__ = ["ClusterExperiment"]


class ClusterExperiment:
    """Compare placement/routing policies across offered loads.

    Parameters
    ----------
    leaves, spines, gpus_per_leaf : int
        Cluster shape (see :class:`.LeafSpine`); ``ocs-vclos`` runs on the same cluster with an
        OCS layer.
    schedulers : sequence of str
        Names from ``causalkit.systems.netsched.SCHEDULERS``.
    loads : sequence of float
        Offered GPU loads of the synthetic traces.
    trace_jobs : int
        Jobs per trace.
    reps : int
        Traces per load.
    seed : int
    link_gbps : float
    trace_kwargs : dict, optional
        Extra arguments of :func:`~causalkit.systems.netsched.synthetic_trace`.
    jobs : DataFrame, optional
        A fixed trace (e.g. from a loader) used instead of synthetic ones; ``loads`` is then
        ignored and a single load label ``nan`` is reported.
    ecmp : dict, optional
        ECMP knobs (``qps``, ``adaptive``: :class:`~causalkit.systems.netsched.ECMP`) of the
        ECMP-routed policies.

    Examples
    --------
    >>> exp = ClusterExperiment(leaves=4, spines=8, gpus_per_leaf=8, loads=[0.8], trace_jobs=30)
    >>> df = exp.run()
    >>> sorted(df["scheduler"].unique())
    ['bestfit', 'ecmp', 'ocs-vclos', 'vclos', 'vclos-ecmp']
    """

    def __init__(self, leaves=16, spines=8, gpus_per_leaf=8,
                 schedulers=("ecmp", "bestfit", "vclos-ecmp", "vclos", "ocs-vclos"),
                 loads=(0.5, 0.8),
                 trace_jobs=200, reps=1, seed=0, link_gbps=100.0, trace_kwargs=None, jobs=None,
                 ecmp=None):
        self.leaves = leaves
        self.spines = spines
        self.gpus_per_leaf = gpus_per_leaf
        self.schedulers = schedulers
        self.loads = loads
        self.trace_jobs = trace_jobs
        self.reps = reps
        self.seed = seed
        self.link_gbps = link_gbps
        self.trace_kwargs = trace_kwargs
        self.jobs = jobs
        self.ecmp = ecmp

    def _validate(self):
        bad = [s for s in self.schedulers if s not in SCHEDULERS]
        if bad or len(self.schedulers) == 0:
            raise ValueError(f"schedulers must be names from {sorted(SCHEDULERS)}; got {bad}")
        check_positive_int(self.trace_jobs, "trace_jobs")
        check_positive_int(self.reps, "reps")
        loads = np.asarray(self.loads, dtype=float)
        if self.jobs is None and (loads.ndim != 1 or loads.size == 0 or np.any(loads <= 0)):
            raise ValueError(f"loads must be a non-empty list of positive numbers; got "
                             f"{self.loads!r}")
        return LeafSpine(self.leaves, self.spines, self.gpus_per_leaf, self.link_gbps)

    def run(self, *, n_jobs: int = 1, out=None, overwrite: bool | None = None,
            progress: bool = False) -> pd.DataFrame:
        """One row per (load, repetition, scheduler): the :meth:`.Result.to_dict` metrics.

        Runs through the experiment engine (:func:`causalkit.simulation.run_experiment`):
        repetition ``r`` of every load draws its trace and simulation seed from
        ``SeedSequence([seed, r])`` (common random numbers across loads); ``n_jobs`` worker
        processes; a results file ``out`` makes the run resumable.
        """
        from causalkit.simulation import run_experiment

        self._validate()
        loads = [float("nan")] if self.jobs is not None else [float(x) for x in self.loads]
        frame = run_experiment(self.run_once, [{"load": load} for load in loads], self.reps,
                               self.seed, n_jobs=n_jobs, out=out, overwrite=overwrite,
                               progress=progress)
        return frame[["load", "rep", *[c for c in frame.columns if c not in ("load", "rep")]]]

    def run_once(self, rng: np.random.Generator, rep: int, *, load: float) -> list[dict]:
        """Every scheduler on one trace (the engine's ``run_once`` protocol): the given jobs, or
        a synthetic trace at offered ``load`` drawn from ``rng``."""
        cluster = self._validate()
        jobs = self.jobs if self.jobs is not None else synthetic_trace(
            self.trace_jobs, cluster, load, random_state=rng, **(self.trace_kwargs or {}))
        seed = int(rng.integers(2**31 - 1))
        rows = []
        for name in self.schedulers:
            knobs = (self.ecmp or {}) if name in ECMP_ROUTED else {}
            res = simulate_cluster(cluster.with_ocs(name == "ocs-vclos"), jobs, name, seed=seed,
                                   **knobs)
            rows.append({**res.to_dict(), "n_gpus": cluster.n_gpus, "leaves": self.leaves,
                         "spines": self.spines})
        return rows
