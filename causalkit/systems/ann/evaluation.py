"""Shared evaluation context and end-to-end measurements used by diagnosis and design."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from causalkit.systems.ann.metrics import measure_qps, recall_at_k


@dataclass
class EvalContext:
    """Data a diagnosis runs on: base and validation queries with exact ground truth.

    ``sample`` holds the indices of up to ``n_sample`` base vectors used by the local metrics.
    """

    xb: np.ndarray
    xq: np.ndarray
    gt: np.ndarray
    k: int
    target_recall: float
    qps_repeats: int = 2
    n_sample: int = 5000
    seed: int = 0
    sample: np.ndarray = field(init=False)

    def __post_init__(self):
        rng = np.random.default_rng(self.seed)
        n = len(self.xb)
        self.sample = np.sort(rng.choice(n, size=min(n, self.n_sample), replace=False))


def exact_rerank(xb: np.ndarray, xq: np.ndarray, ids: np.ndarray, k: int) -> np.ndarray:
    """Re-rank candidate ``ids`` (nq, c) by exact squared L2 and keep the best ``k`` ids.

    Ids of -1 (missing results) are ranked last.
    """
    safe = np.where(ids < 0, 0, ids)
    dist = np.einsum("qcd,qcd->qc", xb[safe] - xq[:, None, :], xb[safe] - xq[:, None, :])
    dist = np.where(ids < 0, np.inf, dist)
    order = np.argsort(dist, axis=1, kind="stable")[:, :k]
    return np.take_along_axis(ids, order, axis=1)


def rerank_gain(wf, ctx: EvalContext, factor: int = 4) -> float:
    """Recall@k gain from re-ranking the top ``factor * k`` results of ``wf`` exactly."""
    k = ctx.k
    kk = min(factor * k, wf.ntotal_)
    _, ids = wf.search(ctx.xq, kk)
    rr = exact_rerank(ctx.xb, ctx.xq, ids, k)
    return recall_at_k(rr, ctx.gt, k) - recall_at_k(ids[:, :k], ctx.gt, k)


def evaluate(wf, ctx: EvalContext, repeats: int | None = None) -> dict:
    """Recall@k and single-thread QPS of ``wf`` on the context's queries (plus the family's
    stage measures, e.g. probe coverage for IVF)."""
    reps = ctx.qps_repeats if repeats is None else repeats
    qps, (_, ids) = measure_qps(lambda q: wf.search(q, ctx.k), ctx.xq, reps)
    out = {"recall": recall_at_k(ids, ctx.gt, ctx.k), "qps": qps, "budget": wf.budget}
    out.update(wf.stage_measures(ctx))
    return out
