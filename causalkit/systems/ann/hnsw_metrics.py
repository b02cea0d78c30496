"""Local metrics (expected behaviour) of the eight HNSW objects.

Same signature as :mod:`causalkit.systems.ann.ivfpq_metrics`: ``fn(workflow, oracle_workflow,
ctx) -> float``, named in :data:`causalkit.systems.ann.registry.HNSW_SPECS`.
"""

from __future__ import annotations

import numpy as np

from causalkit.systems.ann.evaluation import rerank_gain
from causalkit.systems.ann.hnsw import _layer_view, in_degrees, reachable_from_entry
from causalkit.systems.ann.metrics import recall_at_k


def level_share_deviation(wf, oracle, ctx) -> float:
    """``|ln(share of nodes on layer >= 1 * M)|``: 0 when the share equals 1/M."""
    share = float((wf.levels() >= 1).mean())
    if share == 0.0:
        return float("inf")
    return abs(float(np.log(share * wf.objects["neighbour_pruning"].m)))


def entry_reachability(wf, oracle, ctx) -> float:
    return float(reachable_from_entry(wf.hnsw_index_).mean())


def greedy_landing(wf, xq: np.ndarray) -> np.ndarray:
    """Layer-0 seed reached by the greedy upper-layer descent, for every query.

    Vectorised over queries: each step moves every query to its best neighbour on the current
    layer until no query improves, then drops a layer (Malkov & Yashunin, Alg. 2 with ef = 1).
    """
    layers = _layer_view(wf.hnsw_index_)
    xb = wf.xb_
    entry = wf.hnsw_index_.hnsw.entry_point
    cur = np.full(len(xq), entry, dtype=np.int64)
    cur_d = ((xq - xb[entry]) ** 2).sum(axis=1)
    for level in range(len(layers) - 1, 0, -1):
        nbr = layers[level]
        for _ in range(10_000):
            cand = nbr[cur]
            diff = xb[np.where(cand < 0, 0, cand)] - xq[:, None, :]
            dist = np.where(cand < 0, np.inf, np.einsum("qsd,qsd->qs", diff, diff))
            j = dist.argmin(axis=1)
            best = dist[np.arange(len(xq)), j]
            move = best < cur_d
            if not move.any():
                break
            cur[move] = cand[move, j[move]]
            cur_d[move] = best[move]
    return cur


def descent_landing_ratio(wf, oracle, ctx) -> float:
    """90th percentile over queries of dist(landing) / dist(exact NN among upper nodes)."""
    import faiss
    upper = wf.upper_nodes()
    best_d, _ = faiss.knn(ctx.xq, wf.xb_[upper], 1)
    land = greedy_landing(wf, ctx.xq)
    land_d = ((ctx.xq - wf.xb_[land]) ** 2).sum(axis=1)
    ratio = np.sqrt(land_d / np.maximum(best_d[:, 0], 1e-30))
    return float(np.quantile(ratio, 0.9))


def candidate_recall(wf, oracle, ctx, n_probe_nodes: int = 500) -> float:
    """M-NN recall of a search with ``ef = efConstruction`` from base nodes (self excluded)."""
    import faiss
    m = wf.objects["neighbour_pruning"].m
    idx = ctx.sample[:n_probe_nodes]
    xs = wf.xb_[idx]
    _, true = faiss.knn(xs, wf.xb_, m + 1)
    index = wf.hnsw_index_
    saved = index.hnsw.efSearch
    index.hnsw.efSearch = int(wf.objects["build_candidates"].ef_construction)
    try:
        _, found = index.search(xs, m + 1)
    finally:
        index.hnsw.efSearch = saved
    true = _drop_self(true, idx, m)
    found = _drop_self(found, idx, m)
    return recall_at_k(found, true, m)


def _drop_self(ids: np.ndarray, self_ids: np.ndarray, m: int) -> np.ndarray:
    is_self = ids == self_ids[:, None]
    order = np.argsort(is_self, axis=1, kind="stable")
    return np.take_along_axis(ids, order, axis=1)[:, :m]


def low_out_degree_share(wf, oracle, ctx) -> float:
    layer0 = _layer_view(wf.hnsw_index_)[0]
    deg = (layer0 >= 0).sum(axis=1)
    return float((deg < wf.objects["neighbour_pruning"].m / 4).mean())


def orphan_share(wf, oracle, ctx) -> float:
    deg = in_degrees(wf.hnsw_index_)
    deg[wf.hnsw_index_.hnsw.entry_point] = 1
    return float((deg == 0).mean())


def beam_recall(wf, oracle, ctx) -> float:
    _, ids = wf.search(ctx.xq, ctx.k)
    return recall_at_k(ids, ctx.gt, ctx.k)


def distances_rerank_gain(wf, oracle, ctx) -> float:
    return rerank_gain(wf, ctx)


METRICS = {
    "levels": level_share_deviation, "entry_point": entry_reachability,
    "upper_descent": descent_landing_ratio, "build_candidates": candidate_recall,
    "neighbour_pruning": low_out_degree_share, "reverse_links": orphan_share,
    "beam_search": beam_recall, "distances": distances_rerank_gain,
}
