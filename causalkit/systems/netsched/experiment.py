"""``ClusterExperiment``: schedulers x offered loads x repetitions on one simulated cluster.

Each (load, repetition) draws one synthetic trace (seeded by ``[seed, rep, load index]``) that
every scheduler then runs, so scheduler comparisons are paired (common random numbers). The
cluster is simulated (see :mod:`.sim`); the output says so in its ``simulated`` column.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from causalkit._validation import check_positive_int
from causalkit.systems.netsched.schedulers import SCHEDULERS
from causalkit.systems.netsched.sim import simulate
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
        Names from :data:`.schedulers.SCHEDULERS`.
    loads : sequence of float
        Offered GPU loads of the synthetic traces.
    n_jobs : int
        Jobs per trace.
    reps : int
        Traces per load.
    seed : int
    link_gbps : float
    trace_kwargs : dict, optional
        Extra arguments of :func:`.traces.synthetic_trace`.
    jobs : DataFrame, optional
        A fixed trace (e.g. from a loader) used instead of synthetic ones; ``loads`` is then
        ignored and a single load label ``nan`` is reported.

    Examples
    --------
    >>> exp = ClusterExperiment(leaves=4, spines=8, gpus_per_leaf=8, loads=[0.8], n_jobs=30)
    >>> df = exp.run()
    >>> sorted(df["scheduler"].unique())
    ['bestfit', 'ecmp', 'ocs-vclos', 'vclos']
    """

    def __init__(self, leaves=16, spines=8, gpus_per_leaf=8,
                 schedulers=("ecmp", "bestfit", "vclos", "ocs-vclos"), loads=(0.5, 0.8),
                 n_jobs=200, reps=1, seed=0, link_gbps=100.0, trace_kwargs=None, jobs=None):
        self.leaves = leaves
        self.spines = spines
        self.gpus_per_leaf = gpus_per_leaf
        self.schedulers = schedulers
        self.loads = loads
        self.n_jobs = n_jobs
        self.reps = reps
        self.seed = seed
        self.link_gbps = link_gbps
        self.trace_kwargs = trace_kwargs
        self.jobs = jobs

    def _validate(self):
        bad = [s for s in self.schedulers if s not in SCHEDULERS]
        if bad or len(self.schedulers) == 0:
            raise ValueError(f"schedulers must be names from {sorted(SCHEDULERS)}; got {bad}")
        check_positive_int(self.n_jobs, "n_jobs")
        check_positive_int(self.reps, "reps")
        loads = np.asarray(self.loads, dtype=float)
        if self.jobs is None and (loads.ndim != 1 or loads.size == 0 or np.any(loads <= 0)):
            raise ValueError(f"loads must be a non-empty list of positive numbers; got "
                             f"{self.loads!r}")
        return LeafSpine(self.leaves, self.spines, self.gpus_per_leaf, self.link_gbps)

    def traces(self):
        """Yield ``(load, rep, jobs)`` for every configuration."""
        cluster = self._validate()
        if self.jobs is not None:
            for rep in range(self.reps):
                yield float("nan"), rep, self.jobs
            return
        for i, load in enumerate(self.loads):
            for rep in range(self.reps):
                rng = np.random.default_rng([self.seed, rep, i])
                yield float(load), rep, synthetic_trace(self.n_jobs, cluster, load,
                                                        random_state=rng,
                                                        **(self.trace_kwargs or {}))

    def run(self, progress=None) -> pd.DataFrame:
        """One row per (load, repetition, scheduler): the :meth:`.Result.summary` metrics.

        Parameters
        ----------
        progress : callable, optional
            Called with each finished row (dict), e.g. to append it to a file.
        """
        cluster = self._validate()
        rows = []
        for load, rep, jobs in self.traces():
            for name in self.schedulers:
                c = cluster.with_ocs(name == "ocs-vclos")
                res = simulate(c, jobs, name, seed=int(self.seed * 1000 + rep))
                row = {"load": load, "rep": rep, **res.summary(),
                       "n_gpus": cluster.n_gpus, "leaves": self.leaves, "spines": self.spines}
                rows.append(row)
                if progress is not None:
                    progress(row)
        return pd.DataFrame(rows)
