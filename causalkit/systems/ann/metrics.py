"""Exact search, recall and single-thread throughput.

Recall@k is the id-intersection measure used by faiss (``knn_intersection_measure``) and
big-ann-benchmarks: ``|ANN_k(q) & GT_k(q)| / k`` averaged over the queries. QPS follows
ann-benchmarks: ``n_queries / best_time`` over ``repeats`` timed batch runs on one thread.
"""

from __future__ import annotations

import time
from contextlib import contextmanager

import numpy as np


def exact_knn(xb: np.ndarray, xq: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Exact squared-L2 k nearest neighbours of ``xq`` in ``xb`` (faiss brute force)."""
    import faiss
    return faiss.knn(np.ascontiguousarray(xq, dtype=np.float32),
                     np.ascontiguousarray(xb, dtype=np.float32), k)


def recall_at_k(found: np.ndarray, ground_truth: np.ndarray, k: int) -> float:
    """Recall@k: mean over queries of ``|found[:, :k] & ground_truth[:, :k]| / k``.

    Ids equal to -1 (faiss's "no result") never match.
    """
    found = np.asarray(found)[:, :k]
    gt = np.asarray(ground_truth)[:, :k]
    hits = (found[:, :, None] == gt[:, None, :]) & (found[:, :, None] >= 0)
    return float(hits.any(axis=2).sum(axis=1).mean() / k)


def per_query_recall(found: np.ndarray, ground_truth: np.ndarray, k: int) -> np.ndarray:
    """Recall@k of each query (vector of length ``nq``)."""
    found = np.asarray(found)[:, :k]
    gt = np.asarray(ground_truth)[:, :k]
    hits = (found[:, :, None] == gt[:, None, :]) & (found[:, :, None] >= 0)
    return hits.any(axis=2).sum(axis=1) / k


@contextmanager
def single_thread():
    """Run faiss on one OpenMP thread inside the block (restores the previous count)."""
    import faiss
    before = faiss.omp_get_max_threads()
    faiss.omp_set_num_threads(1)
    try:
        yield
    finally:
        faiss.omp_set_num_threads(before)


def measure_qps(search_fn, xq: np.ndarray, repeats: int = 3) -> tuple[float, object]:
    """Best-of-``repeats`` queries per second of ``search_fn(xq)`` on one thread.

    Returns ``(qps, last_result)`` so callers can score the same run they timed.
    """
    best = np.inf
    result = None
    with single_thread():
        for _ in range(max(1, int(repeats))):
            t0 = time.perf_counter()
            result = search_fn(xq)
            best = min(best, time.perf_counter() - t0)
    return float(len(xq) / max(best, 1e-9)), result
