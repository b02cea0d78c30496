"""SmartANN: object-level diagnosis and auto-design of an ANN workflow.

``diagnose`` walks the eight objects in causal order and replaces each bottleneck by its oracle
(:mod:`causalkit.systems.ann.diagnosis`). ``auto_design`` then turns the bottlenecks into design
changes: for every bottleneck, upstream first, the compatible actions that address it
(:mod:`causalkit.systems.ann.actions`) are built and calibrated, and the best one is kept when it
improves the objective; accepted actions compose (one per object slot).

After the bottleneck fixes comes an efficiency stage that does not wait for a quality flag:
the structural actions of :data:`~causalkit.systems.ann.actions.EFFICIENCY_ACTIONS` (list count,
code size, index type, graph degree) are tried on the current design in rounds, each
calibrated to the target, and the best one is kept while one clears the acceptance test below.

Objective: designs must reach ``Recall@k >= target_recall`` on the validation queries (budget
``nprobe`` / ``ef`` calibrated by binary search over the budget grid) and fit the memory budget
(measured bytes per vector: serialized index size / n). Among them the utility is

.. math:: U = \\log \\mathrm{QPS} - w_m \\log \\mathrm{bytes} - w_b \\log \\mathrm{build\\ seconds},

and a candidate replaces the current design only when the lower end of the 95 % CI of its
utility gain clears ``log(1 + min_gain)``: the QPS ratio is measured interleaved over
``qps_rounds`` rounds with a paired log-ratio t interval
(:func:`~causalkit.systems.ann.throughput.ratio_ci`), so a gain that is load noise is not
accepted. A design that reaches the target beats one that does not; among designs that do not,
the higher recall (by ``delta``) wins. Defaults ``w_m = 0.1`` (a 2x larger index must be 7 %
faster) and ``w_b = 0.05`` (a 10x slower build must be 12 % faster) and ``min_gain = 0.05`` were
chosen before the baseline comparison and checked only on the ``synthetic`` set (faiss
``SyntheticDataset``, 10,000 vectors, seed 7); they were not tuned on the sets of the
comparison (``sift``, ``patches``, seed 2024).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np
import pandas as pd

from causalkit._validation import check_fraction
from causalkit.systems.ann._checks import check_ground_truth, check_k, check_vectors
from causalkit.systems.ann.actions import ACTIONS, EFFICIENCY_ACTIONS
from causalkit.systems.ann.cache import ArtifactCache
from causalkit.systems.ann.diagnosis import Diagnosis, run_diagnosis
from causalkit.systems.ann.evaluation import EvalContext
from causalkit.systems.ann.metrics import exact_knn, measure_qps, recall_at_k
from causalkit.systems.ann.throughput import compare_qps, index_bytes_per_vector


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
        accepted, budget, recall, qps`` (QPS at the calibrated budget), ``bytes_per_vector,
        build_s`` and, for candidates compared with the current design, ``qps_ratio`` with its
        CI ``qps_ratio_lower/upper`` and ``utility_gain_lower`` (efficiency-stage rows have
        ``bottleneck = "efficiency (round r)"``).
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
        Relative utility gain (QPS at equal memory and build time) whose CI an action must
        clear to be accepted (default 5 %).
    max_tries : int
        Compatible actions tried per bottleneck, in library order; also the number of
        reached candidates compared interleaved per acceptance step.
    qps_repeats : int
        Timed runs per QPS measurement while calibrating (best is kept).
    random_state : int
        Seed of the base-vector sample used by the local metrics.
    efficiency : bool
        Run the efficiency stage (structural actions tried without a quality flag).
    qps_rounds : int
        Interleaved rounds of each acceptance comparison (>= 2).
    memory_weight, build_weight : float
        ``w_m`` and ``w_b`` of the utility (see the module docstring).
    max_rounds : int
        Rounds of the efficiency stage (each accepts at most one action).

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
                 random_state: int = 0, efficiency: bool = True, qps_rounds: int = 5,
                 memory_weight: float = 0.1, build_weight: float = 0.05, max_rounds: int = 3):
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
        self.efficiency = efficiency
        self.qps_rounds = qps_rounds
        self.memory_weight = memory_weight
        self.build_weight = build_weight
        self.max_rounds = max_rounds

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
        """Fix the diagnosed bottlenecks, then run the efficiency stage (see module doc)."""
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
        current = self._fresh_build(_unbuilt(self.workflow), ctx, xt)
        base_point = best_point = calibrate(current, ctx)
        written: set[str] = set()
        rows = []
        for bottleneck in diagnosis.bottlenecks:
            candidates = [a for a in library if bottleneck in a.fixes]
            trial = []
            for action in candidates:
                reason = ("slot already set by an accepted action"
                          if action.target in written else action.incompatibility(current, info))
                row = _action_row(bottleneck, action, reason)
                rows.append(row)
                if reason is None and len(trial) < self.max_tries:
                    trial.append((action, row))
                elif reason is None:
                    row["reason"] = f"not tried (max_tries={self.max_tries})"
            points = []
            for action, row in trial:
                cand = action.apply(current).build(ctx.xb, xt, cache)
                # upstream artifacts came from the cache: charge the parent's build time too
                cand.total_build_seconds_ = current.total_build_seconds_ + cand.build_seconds_
                points.append((cand, calibrate(cand, ctx), row))
            winner = self._select(current, best_point, points, ctx)
            if winner is not None:
                current, best_point, row = winner
                row["accepted"] = True
                written.add(row["target"])
        if self.efficiency:
            current, best_point = self._efficiency(current, best_point, ctx, xt, info, rows)
        current.set_budget(best_point.budget)
        self.design_ = Design(workflow=current, actions=pd.DataFrame(rows),
                              baseline=base_point, design=best_point, diagnosis=diagnosis,
                              seconds=time.perf_counter() - t0)
        return self.design_

    # ------------------------------------------------------------------ acceptance
    def _fresh_build(self, wf, ctx, xt):
        """Build without the artifact cache (true build time), memoised by structure."""
        memo = self.__dict__.setdefault("fresh_", {})
        key = (type(wf).__name__, getattr(wf, "nlist", None),
               tuple((n, o) for n, o in wf.objects.items()
                     if n not in ("probing", "beam_search")))
        if key not in memo:
            built = wf.build(ctx.xb, xt)
            built.total_build_seconds_ = built.build_seconds_
            memo[key] = built
        return memo[key]

    def _bytes(self, wf) -> float:
        if not hasattr(wf, "bytes_per_vector_"):
            wf.bytes_per_vector_ = index_bytes_per_vector(wf.index_, wf.ntotal_)
        return wf.bytes_per_vector_

    def _select(self, current, cur_point, points, ctx):
        """The accepted candidate among ``(workflow, point, row)`` triples, or ``None``.

        Candidates over the memory budget are rejected. If the current design is over the
        memory budget, the best candidate within it wins (reaching the target first). If the
        current design misses the target, the best candidate that reaches it (or gains
        ``delta`` recall) wins. Otherwise
        candidates that reach the target are compared with the current design in order of
        screened utility; the first whose utility-gain CI clears ``log(1 + min_gain)`` wins.
        """
        ok = []
        for wf, point, row in points:
            nbytes = self._bytes(wf)
            row.update(tried=True, budget=point.budget, recall=point.recall, qps=point.qps,
                       bytes_per_vector=nbytes, build_s=wf.total_build_seconds_)
            if self.memory_budget is not None and nbytes > self.memory_budget:
                row["reason"] = f"{nbytes:.0f} B/vector > budget {self.memory_budget:.0f}"
            else:
                ok.append((wf, point, row))
        if self.memory_budget is not None and self._bytes(current) > self.memory_budget:
            # the hard budget first: any candidate within it beats the current design
            return max(ok, key=lambda c: (c[1].reached, self._utility(c[0], c[1].qps)
                                          if c[1].reached else c[1].recall), default=None)
        if not cur_point.reached:
            better = [c for c in ok if c[1].better_than(cur_point, 0.0, self.delta)]
            return max(better, key=lambda c: (c[1].reached, c[1].qps if c[1].reached
                                              else c[1].recall), default=None)
        reached = [c for c in ok if c[1].reached]
        reached.sort(key=lambda c: -self._utility(c[0], c[1].qps))
        for wf, point, row in reached[:self.max_tries]:
            wf.set_budget(point.budget)
            current.set_budget(cur_point.budget)
            ci, q = compare_qps(wf.search, current.search, ctx.xq, ctx.k, self.qps_rounds)
            gain = (np.log(ci.lower) - self.memory_weight * np.log(
                self._bytes(wf) / self._bytes(current)) - self.build_weight * np.log(
                wf.total_build_seconds_ / current.total_build_seconds_))
            row.update(qps_ratio=ci.ratio, qps_ratio_lower=ci.lower, qps_ratio_upper=ci.upper,
                       utility_gain_lower=gain)
            if gain >= np.log1p(self.min_gain):
                return wf, OperatingPoint(point.budget, point.recall, float(np.median(q[0])),
                                          True), row
        return None

    def _utility(self, wf, qps: float) -> float:
        return (np.log(qps) - self.memory_weight * np.log(self._bytes(wf))
                - self.build_weight * np.log(max(wf.total_build_seconds_, 1e-3)))

    def _efficiency(self, current, point, ctx, xt, info, rows):
        """Rounds of structural actions on the current design, accepted by :meth:`_select`."""
        for rnd in range(self.max_rounds):
            points = []
            for action in EFFICIENCY_ACTIONS:
                reason = action.incompatibility(current, info)
                row = _action_row(f"efficiency (round {rnd + 1})", action, reason)
                rows.append(row)
                if reason is None:
                    cand = self._fresh_build(_unbuilt(action.apply(current)), ctx, xt)
                    if cand is current:
                        row.update(compatible=False, reason="no change")
                        continue
                    points.append((cand, calibrate(cand, ctx, repeats=1), row))
            winner = self._select(current, point, points, ctx)
            if winner is None:
                break
            current, point, row = winner
            row["accepted"] = True
        return current, point

    def plot(self, ax=None):
        """Recall/QPS of the baseline and the design, and the per-object oracle headroom."""
        from causalkit.systems.ann.plotting import plot_smartann
        if not hasattr(self, "diagnosis_"):
            raise RuntimeError("call diagnose() (and optionally auto_design()) first")
        return plot_smartann(self.diagnosis_, getattr(self, "design_", None), ax=ax)


def _unbuilt(wf):
    """An unbuilt copy of ``wf`` (same objects; IVF keeps its list count)."""
    first = wf.object_names[0]
    return wf.replace(first, wf.objects[first])


def _action_row(bottleneck: str, action, reason) -> dict:
    return {"bottleneck": bottleneck, "action": action.name, "target": action.target,
            "description": action.description, "compatible": reason is None,
            "reason": reason or "", "tried": False, "accepted": False, "budget": np.nan,
            "recall": np.nan, "qps": np.nan, "bytes_per_vector": np.nan, "build_s": np.nan,
            "qps_ratio": np.nan, "qps_ratio_lower": np.nan, "qps_ratio_upper": np.nan,
            "utility_gain_lower": np.nan}
