"""Local metrics (expected behaviour) of the eight IVF-PQ objects.

Each function takes the current built workflow, the same workflow with that object replaced by
its oracle (built), and the :class:`~causalkit.systems.ann.evaluation.EvalContext`, and returns
the observed value of the metric named in :data:`causalkit.systems.ann.registry.IVFPQ_SPECS`.
"""

from __future__ import annotations

import numpy as np

from causalkit.systems.ann.evaluation import rerank_gain
from causalkit.systems.ann.metrics import recall_at_k


def probe_coverage(wf, xq: np.ndarray, gt: np.ndarray, k: int) -> float:
    """Fraction of each query's true k-NN stored in one of its probed lists (mean over queries).

    This equals IVF-Flat recall at the same ``nprobe`` and bounds the recall of every downstream
    object.
    """
    nprobe = wf.budget
    _, probed = wf.ivf_.quantizer.search(wf.transform(xq), nprobe)
    true_lists = wf.assign_[gt[:, :k]]
    inside = (true_lists[:, :, None] == probed[:, None, :]).any(axis=2)
    return float(inside.mean())


def _encoded(wf, x: np.ndarray, ids: np.ndarray) -> np.ndarray:
    """What object 5 hands to the quantizer: residuals or the (rotated) vectors."""
    xr = wf.transform(x)
    if wf.objects["residual"].enabled:
        return xr - wf.centroids_[wf.assign_[ids]]
    return xr


def rotation_balance(wf, oracle, ctx) -> float:
    if wf.objects["pq_codebooks"].lossless:
        return float("nan")
    r = _encoded(wf, ctx.xb[ctx.sample], ctx.sample)
    m = wf.objects["pq_codebooks"].resolved_m(wf.d_)
    block = r.var(axis=0).reshape(m, -1).sum(axis=1)
    return float(block.max() / max(block.min(), 1e-30))


def _kmeans_objective(x: np.ndarray, centroids: np.ndarray) -> float:
    import faiss
    dist, _ = faiss.knn(x, centroids, 1)
    return float(dist.mean())


def kmeans_excess(wf, oracle, ctx) -> float:
    xs = wf.transform(ctx.xb[ctx.sample])
    cur = _kmeans_objective(xs, wf.centroids_)
    best = _kmeans_objective(xs, oracle.centroids_)
    return cur / max(best, 1e-30) - 1.0


def assignment_mismatch(wf, oracle, ctx) -> float:
    import faiss
    _, nearest = faiss.knn(wf.transform(ctx.xb[ctx.sample]), wf.centroids_, 1)
    return float((nearest[:, 0] != wf.assign_[ctx.sample]).mean())


def coverage_metric(wf, oracle, ctx) -> float:
    return probe_coverage(wf, ctx.xq, ctx.gt, ctx.k)


def residual_energy(wf, oracle, ctx) -> float:
    if not wf.objects["residual"].enabled:
        return 1.0
    xr = wf.transform(ctx.xb[ctx.sample])
    r = xr - wf.centroids_[wf.assign_[ctx.sample]]
    centred = xr - xr.mean(axis=0)
    return float((r ** 2).sum() / max((centred ** 2).sum(), 1e-30))


def pq_distortion(wf, oracle, ctx) -> float:
    if wf.objects["pq_codebooks"].lossless or wf.objects["reranking"].k_factor == "all":
        return 0.0
    r = np.ascontiguousarray(_encoded(wf, ctx.xb[ctx.sample], ctx.sample), dtype=np.float32)
    pq = wf.ivf_.pq
    rec = pq.decode(pq.compute_codes(r))
    return float(((r - rec) ** 2).sum() / max((r ** 2).sum(), 1e-30))


def adc_agreement(wf, oracle, ctx) -> float:
    if not hasattr(wf.ivf_, "polysemous_ht") or wf.ivf_.polysemous_ht == 0:
        return 1.0
    _, cur = wf.search(ctx.xq, ctx.k)
    saved = wf.ivf_.polysemous_ht
    wf.ivf_.polysemous_ht = 0
    try:
        _, full = wf.search(ctx.xq, ctx.k)
    finally:
        wf.ivf_.polysemous_ht = saved
    return recall_at_k(cur, full, ctx.k)


def reranking_gain(wf, oracle, ctx) -> float:
    return rerank_gain(wf, ctx)


METRICS = {
    "rotation": rotation_balance, "coarse_kmeans": kmeans_excess,
    "assignment": assignment_mismatch, "probing": coverage_metric,
    "residual": residual_energy, "pq_codebooks": pq_distortion,
    "distance_tables": adc_agreement, "reranking": reranking_gain,
}
