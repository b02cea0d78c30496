"""Baselines a practitioner would run instead of SmartANN, under the same tuning-time budget.

``autotune``
    faiss's own tuner: for each index factory string, build the index and let
    ``faiss.ParameterSpace().explore`` walk its search parameters (``nprobe``, ``efSearch``,
    ``k_factor_rf``, ``ht`` ...) and keep the Pareto front of (Recall@k, time)
    (``OperatingPoints``), with ``IntersectionCriterion`` as Recall@k.
``grid``
    The plain sweep: every factory string x every value of its search parameter (``nprobe`` over
    powers of two up to the list count, ``efSearch`` over 16..512, ``k_factor_rf`` in {2, 4, 8}
    for re-ranked indexes), Recall@k and single-thread QPS of each on the validation queries.

Both walk the same factory list (:func:`factory_candidates`: IVF-Flat, IVF-SQ8, IVF-PQ with
8-bit codes (``np``: without polysemous training, which would dominate the build) and 4-bit
fast-scan codes, OPQ + IVF-PQ, HNSW with float or SQ8 storage, IVF-PQ fast-scan with exact
re-ranking, each list count at ``sqrt(n)`` and ``4 sqrt(n)`` rounded to powers of two as
autofaiss does), cheapest first, skip a factory whose estimated bytes per vector exceed the
memory budget, and stop starting new factories once ``time_budget`` seconds (wall clock,
building included) have passed (the first factory within the memory budget always runs).
:meth:`BaselineResult.choose` returns the fastest validated design with
``Recall@k >= target`` and measured bytes per vector (serialized index size / n) within the
budget.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np
import pandas as pd

from causalkit.systems.ann.metrics import measure_qps, recall_at_k, single_thread
from causalkit.systems.ann.throughput import index_bytes_per_vector

__all__ = ["BaselineResult", "autotune", "build_factory", "factory_candidates", "grid"]


def _pow2(x: float) -> int:
    return int(2 ** max(0, round(np.log2(max(x, 1.0)))))


def factory_candidates(n: int, d: int) -> list[tuple[str, float]]:
    """``(factory string, estimated bytes per vector)``, roughly cheapest build first.

    The estimate counts codes, the 8-byte id of IVF lists and the 2M 4-byte layer-0 links
    of HNSW (centroids, codebooks and padding come on top; the measured size decides).
    """
    small, large = _pow2(np.sqrt(n)), _pow2(4 * np.sqrt(n))
    out = []
    for nl in dict.fromkeys((small, large)):
        out += [(f"IVF{nl},Flat", 4 * d + 8), (f"IVF{nl},SQ8", d + 8)]
        if d % 4 == 0:
            out += [(f"IVF{nl},PQ{d // 4}np", d / 4 + 8), (f"IVF{nl},PQ{d // 2}x4fs", d / 4 + 8)]
        if d % 8 == 0:
            out += [(f"IVF{nl},PQ{d // 4}x4fs", d / 8 + 8)]
    out += [("HNSW16", 4 * d + 128), ("HNSW16_SQ8", d + 128), ("HNSW32", 4 * d + 256)]
    if d % 4 == 0:
        out += [(f"OPQ{d // 4},IVF{small},PQ{d // 4}np", d / 4 + 8),
                (f"IVF{small},PQ{d // 2}x4fs,RFlat", 4 * d + d / 4 + 8)]
    return out


def build_factory(factory: str, xb: np.ndarray, xt: np.ndarray | None = None):
    """Train and fill ``faiss.index_factory(d, factory)`` on one thread; ``(index, seconds)``.

    HNSW graphs use ``efConstruction = 40`` (faiss's default for the factory)."""
    import faiss
    with single_thread():
        t0 = time.perf_counter()
        index = faiss.index_factory(xb.shape[1], factory)
        if not index.is_trained:
            index.train(xb if xt is None else xt)
        index.add(xb)
        return index, time.perf_counter() - t0


@dataclass
class BaselineResult:
    """Every validated operating point of a baseline tuner.

    Attributes
    ----------
    table : pandas.DataFrame
        ``factory, params, recall, qps, bytes_per_vector, build_s``, one row per point.
    seconds : float
        Wall time of the tuning (builds included).
    skipped : list of str
        Factories not started: over the memory budget, or out of time.
    """

    method: str
    table: pd.DataFrame
    seconds: float
    skipped: list

    def choose(self, target_recall: float, memory_budget: float | None = None) -> dict | None:
        """The fastest point with ``recall >= target_recall`` within the memory budget
        (``None`` when no point qualifies)."""
        t = self.table
        if t.empty:
            return None
        ok = t["recall"] >= target_recall
        if memory_budget is not None:
            ok &= t["bytes_per_vector"] <= memory_budget
        if not ok.any():
            return None
        return t[ok].sort_values("qps", ascending=False).iloc[0].to_dict()


def _search_grid(index) -> list[str]:
    import faiss
    base = faiss.downcast_index(index.base_index if hasattr(index, "base_index") else index)
    inner = base
    if isinstance(inner, faiss.IndexPreTransform):
        inner = faiss.downcast_index(inner.index)
    if isinstance(inner, faiss.IndexHNSW):
        values = [f"efSearch={e}" for e in (16, 24, 32, 48, 64, 96, 128, 192, 256, 384, 512)]
    else:
        nlist = faiss.extract_index_ivf(inner).nlist
        values = [f"nprobe={2 ** i}" for i in range(int(np.log2(nlist)) + 1)]
    if hasattr(index, "base_index"):
        values = [f"{v},k_factor_rf={kf}" for v in values for kf in (2, 4, 8)]
    return values


def _run(method: str, point_fn, xb, xq, gt, k, time_budget, memory_budget, factories):
    t0 = time.perf_counter()
    rows, skipped, started = [], [], False
    for factory, est in factories or factory_candidates(len(xb), xb.shape[1]):
        if memory_budget is not None and est > memory_budget:
            skipped.append(f"{factory} (about {est:.0f} B/vector > budget {memory_budget:.0f})")
            continue
        if started and time.perf_counter() - t0 > time_budget:
            skipped.append(f"{factory} (tuning-time budget {time_budget:.0f} s spent)")
            continue
        started = True
        index, build_s = build_factory(factory, xb)
        nbytes = index_bytes_per_vector(index, len(xb))
        for params, recall, qps in point_fn(index, xq, gt, k, t0, time_budget):
            rows.append({"factory": factory, "params": params, "recall": recall, "qps": qps,
                         "bytes_per_vector": nbytes, "build_s": build_s})
    cols = ["factory", "params", "recall", "qps", "bytes_per_vector", "build_s"]
    return BaselineResult(method, pd.DataFrame(rows, columns=cols), time.perf_counter() - t0,
                          skipped)


def _explore_points(index, xq, gt, k, t0, time_budget):
    import faiss
    ps = faiss.ParameterSpace()
    ps.initialize(index)
    ps.verbose = 0
    crit = faiss.IntersectionCriterion(len(xq), k)
    crit.set_groundtruth(None, np.ascontiguousarray(gt[:, :k], dtype=np.int64))
    with single_thread():
        ops = ps.explore(index, np.ascontiguousarray(xq, dtype=np.float32), crit)
    pts = ops.all_pts
    return [(pts.at(i).key, float(pts.at(i).perf), len(xq) / max(pts.at(i).t, 1e-9))
            for i in range(pts.size())]


def _grid_points(index, xq, gt, k, t0, time_budget):
    import faiss
    ps = faiss.ParameterSpace()
    out = []
    for params in _search_grid(index):
        ps.set_index_parameters(index, params)
        qps, (_, ids) = measure_qps(lambda q: index.search(q, k), xq, 2)
        out.append((params, recall_at_k(ids, gt, k), qps))
        if out[-1][1] >= 0.999 or time.perf_counter() - t0 > time_budget:
            break
    return out


def autotune(xb, xq, gt, k: int = 10, time_budget: float = np.inf,
             memory_budget: float | None = None, factories=None) -> BaselineResult:
    """faiss ``ParameterSpace.explore`` over the factory list (see the module docstring).

    Parameters
    ----------
    xb, xq : float32 arrays
        Base vectors and validation queries.
    gt : int array (nq, >= k)
        Exact neighbours of ``xq``.
    time_budget : float
        Seconds after which no new factory is started.
    memory_budget : float, optional
        Bytes per vector; factories estimated above it are skipped.
    factories : list of (str, float), optional
        Overrides :func:`factory_candidates`.
    """
    return _run("autotune", _explore_points, xb, xq, gt, k, time_budget, memory_budget,
                factories)


def grid(xb, xq, gt, k: int = 10, time_budget: float = np.inf,
         memory_budget: float | None = None, factories=None) -> BaselineResult:
    """Index type x search parameter sweep (same arguments as :func:`autotune`)."""
    return _run("grid", _grid_points, xb, xq, gt, k, time_budget, memory_budget, factories)
