"""SmartANN: object-level diagnosis and auto-design of an ANN workflow.

``diagnose`` walks the eight objects in causal order and replaces each bottleneck by its oracle
(:mod:`causalkit.systems.ann.diagnosis`). ``auto_design`` then turns the bottlenecks into design
changes: for every bottleneck, upstream first, the compatible actions that address it
(:mod:`causalkit.systems.ann.actions`) are built and calibrated, and the best one is kept when it
improves the objective; accepted actions compose (one per object slot).

Objective: the highest single-thread QPS at ``Recall@k >= target_recall`` on the validation
queries, the budget (``nprobe`` / ``ef``) calibrated by binary search over the budget grid; a
design that reaches the target beats one that does not, and among designs that do not, the higher
recall at the largest budget wins.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np
import pandas as pd

from causalkit._validation import check_fraction
from causalkit.systems.ann._checks import check_ground_truth, check_k, check_vectors
from causalkit.systems.ann.actions import ACTIONS
from causalkit.systems.ann.cache import ArtifactCache
from causalkit.systems.ann.diagnosis import Diagnosis, run_diagnosis
from causalkit.systems.ann.evaluation import EvalContext
from causalkit.systems.ann.metrics import exact_knn, measure_qps, recall_at_k


@dataclass
class OperatingPoint:
    """A workflow at its calibrated budget."""

    budget: int
    recall: float
    qps: float
    reached: bool

    def better_than(self, other: OperatingPoint, rel_qps: float, delta: float) -> bool:
        """Whether this point beats ``other`` by a margin (see the module docstring)."""
        if self.reached != other.reached:
            return self.reached
        if self.reached:
            return self.qps >= (1.0 + rel_qps) * other.qps
        return self.recall >= other.recall + delta


def calibrate(wf, ctx: EvalContext, repeats: int | None = None) -> OperatingPoint:
    """Smallest budget on ``wf.budget_grid()`` with Recall@k >= target (binary search; recall is
    non-decreasing in nprobe / ef), or the largest budget if none reaches it; sets it on ``wf``."""
    grid = wf.budget_grid()
    memo = {}

    def recall_at(b):
        if b not in memo:
            wf.set_budget(b)
            memo[b] = recall_at_k(wf.search(ctx.xq, ctx.k)[1], ctx.gt, ctx.k)
        return memo[b]

    lo, hi = 0, len(grid) - 1
    if recall_at(grid[hi]) < ctx.target_recall:
        best = hi
    else:
        while lo < hi:
            mid = (lo + hi) // 2
            if recall_at(grid[mid]) >= ctx.target_recall:
                hi = mid
            else:
                lo = mid + 1
        best = lo
    wf.set_budget(grid[best])
    reps = ctx.qps_repeats if repeats is None else repeats
    qps, (_, ids) = measure_qps(lambda q: wf.search(q, ctx.k), ctx.xq, reps)
    rec = recall_at_k(ids, ctx.gt, ctx.k)
    return OperatingPoint(grid[best], rec, qps, rec >= ctx.target_recall)


@dataclass
class Design:
    """Result of :meth:`SmartANN.auto_design`.

    Attributes
    ----------
    workflow
        The optimised workflow (built, at its calibrated budget).
    actions : pandas.DataFrame
        Every action considered: ``bottleneck, action, target, compatible, reason, tried,
        accepted, budget, recall, qps`` (QPS at the calibrated budget).
    baseline, design : OperatingPoint
    diagnosis : Diagnosis
    seconds : float
        Wall time of the design step (diagnosis excluded).
    """

    workflow: object
    actions: pd.DataFrame
    baseline: OperatingPoint
    design: OperatingPoint
    diagnosis: Diagnosis
    seconds: float

    @property
    def applied(self) -> list[str]:
        """Names of the accepted actions, in the order they were applied."""
        if self.actions.empty:
            return []
        return self.actions.loc[self.actions["accepted"], "action"].tolist()

    def summary(self) -> str:
        b, d = self.baseline, self.design
        lines = [f"baseline: {self.diagnosis.family} budget={b.budget} recall={b.recall:.3f} "
                 f"qps={b.qps:.0f}",
                 f"design:   {self.workflow.describe()} recall={d.recall:.3f} qps={d.qps:.0f}",
                 f"applied:  {', '.join(self.applied) or 'none'}"]
        return "\n".join(lines)

    def __repr__(self) -> str:
        return self.summary()


class SmartANN:
    """Diagnose and auto-design an IVF-PQ or HNSW workflow.

    Parameters
    ----------
    workflow : IVFPQWorkflow or HNSWWorkflow
        The design to diagnose (built or not).
    k : int
        Neighbours per query (Recall@k).
    target_recall : float
        Recall@k the objective must reach.
    delta : float
        Minimum oracle headroom that makes a violated object a bottleneck.
    thresholds : dict, optional
        Object name -> expected value, overriding the registry defaults.
    actions : sequence of Action, optional
        The action library (default: the family's library).
    memory_budget : float, optional
        Maximum bytes per vector a design may use.
    min_gain : float
        Relative QPS gain an action must bring to be accepted (default 5 %).
    max_tries : int
        Compatible actions tried per bottleneck, in library order.
    qps_repeats : int
        Timed runs per QPS measurement (best is kept).
    random_state : int
        Seed of the base-vector sample used by the local metrics.

    Examples
    --------
    >>> smart = SmartANN(IVFPQWorkflow(nprobe=16), k=10, target_recall=0.9)   # doctest: +SKIP
    >>> diag = smart.diagnose(xb, xq_val)                                      # doctest: +SKIP
    >>> design = smart.auto_design(xb, xq_val)                                 # doctest: +SKIP
    >>> design.workflow.search(xq_test, 10)                                    # doctest: +SKIP
    """

    def __init__(self, workflow, k: int = 10, target_recall: float = 0.9, delta: float = 0.01,
                 thresholds: dict | None = None, actions=None, memory_budget: float | None = None,
                 min_gain: float = 0.05, max_tries: int = 3, qps_repeats: int = 2,
                 random_state: int = 0):
        if getattr(workflow, "family", None) not in ACTIONS:
            raise TypeError("workflow must be an IVFPQWorkflow or an HNSWWorkflow; got "
                            f"{type(workflow).__name__}")
        self.workflow = workflow
        self.k = k
        self.target_recall = target_recall
        self.delta = delta
        self.thresholds = thresholds
        self.actions = actions
        self.memory_budget = memory_budget
        self.min_gain = min_gain
        self.max_tries = max_tries
        self.qps_repeats = qps_repeats
        self.random_state = random_state

    # ------------------------------------------------------------------ helpers
    def _context(self, xb, xq, ground_truth) -> EvalContext:
        check_fraction(self.target_recall, "target_recall")
        xb = check_vectors(xb, "xb", min_rows=2)
        xq = check_vectors(xq, "xq", d=xb.shape[1])
        k = check_k(self.k, len(xb))
        if ground_truth is None:
            _, ground_truth = exact_knn(xb, xq, k)
        gt = check_ground_truth(ground_truth, len(xq), k)
        return EvalContext(xb, xq, gt, k, float(self.target_recall),
                           qps_repeats=self.qps_repeats, seed=self.random_state)

    def _cache(self) -> ArtifactCache:
        if not hasattr(self, "cache_"):
            self.cache_ = ArtifactCache()
        return self.cache_

    # ------------------------------------------------------------------ public API
    def diagnose(self, xb, xq, ground_truth=None, xt=None) -> Diagnosis:
        """Ordered bottleneck table of the workflow on validation queries ``xq``.

        Parameters
        ----------
        xb : array (n, d)
            Base vectors.
        xq : array (nq, d)
            Validation queries (keep them disjoint from the test queries).
        ground_truth : int array (nq, >= k), optional
            True neighbour ids; computed by exact search when omitted.
        xt : array, optional
            Training vectors (default ``xb``).
        """
        ctx = self._context(xb, xq, ground_truth)
        self.context_ = ctx
        self.diagnosis_ = run_diagnosis(self.workflow, ctx, delta=self.delta,
                                        thresholds=self.thresholds, xt=xt, cache=self._cache())
        return self.diagnosis_

    def auto_design(self, xb, xq, ground_truth=None, xt=None,
                    diagnosis: Diagnosis | None = None) -> Design:
        """Compose the compatible actions that fix the diagnosed bottlenecks (see module doc)."""
        ctx = self._context(xb, xq, ground_truth)
        if diagnosis is None:
            diagnosis = getattr(self, "diagnosis_", None)
        if diagnosis is None or diagnosis.family != self.workflow.family:
            diagnosis = self.diagnose(xb, xq, ctx.gt, xt)
        t0 = time.perf_counter()
        cache = self._cache()
        library = ACTIONS[self.workflow.family] if self.actions is None else tuple(self.actions)
        info = {"n": len(ctx.xb), "d": ctx.xb.shape[1],
                "n_train": len(ctx.xb) if xt is None else len(xt),
                "memory_budget": self.memory_budget}
        current = self.workflow.replace(self.workflow.object_names[0],
                                        self.workflow.objects[self.workflow.object_names[0]])
        current.build(ctx.xb, xt, cache)
        base_point = calibrate(current, ctx)
        best_point = base_point
        written: set[str] = set()
        rows = []
        for bottleneck in diagnosis.bottlenecks:
            candidates = [a for a in library if bottleneck in a.fixes]
            trial = []
            for action in candidates:
                reason = ("slot already set by an accepted action"
                          if action.target in written else action.incompatibility(current, info))
                row = {"bottleneck": bottleneck, "action": action.name, "target": action.target,
                       "description": action.description, "compatible": reason is None,
                       "reason": reason or "", "tried": False, "accepted": False,
                       "budget": np.nan, "recall": np.nan, "qps": np.nan}
                rows.append(row)
                if reason is None and len(trial) < self.max_tries:
                    trial.append((action, row))
                elif reason is None:
                    row["reason"] = f"not tried (max_tries={self.max_tries})"
            winner = None
            for action, row in trial:
                cand = action.apply(current).build(ctx.xb, xt, cache)
                point = calibrate(cand, ctx)
                row.update(tried=True, budget=point.budget, recall=point.recall, qps=point.qps)
                if point.better_than(best_point, self.min_gain, self.delta) and (
                        winner is None or point.better_than(winner[1], 0.0, 0.0)):
                    winner = (cand, point, row)
            if winner is not None:
                current, best_point, row = winner
                row["accepted"] = True
                written.add(row["target"])
        self.design_ = Design(workflow=current, actions=pd.DataFrame(rows),
                              baseline=base_point, design=best_point, diagnosis=diagnosis,
                              seconds=time.perf_counter() - t0)
        return self.design_

    def plot(self, ax=None):
        """Recall/QPS of the baseline and the design, and the per-object oracle headroom."""
        from causalkit.systems.ann.plotting import plot_smartann
        if not hasattr(self, "diagnosis_"):
            raise RuntimeError("call diagnose() (and optionally auto_design()) first")
        return plot_smartann(self.diagnosis_, getattr(self, "design_", None), ax=ax)
