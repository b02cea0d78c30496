"""HNSW as a chain of eight ordered, replaceable objects on faiss ``IndexHNSW``.

Objects, in causal order:

1. ``levels``            level of each node, geometric with multiplier ``mL`` (default 1/ln M);
2. ``entry_point``       where every search starts (the first node of the top level);
3. ``upper_descent``     greedy descent through the upper layers to a layer-0 seed;
4. ``build_candidates``  candidate list of size ``efConstruction`` for each inserted node;
5. ``neighbour_pruning`` the RNG-style heuristic keeping at most ``M`` (2M on layer 0) links;
6. ``reverse_links``     back-links of kept neighbours, with the degree cap;
7. ``beam_search``       layer-0 beam search of width ``ef``;
8. ``distances``         stored vectors (float, SQ8, SQ4, PQ) and optional exact re-ranking.

Oracles: standard levels, seeding at each query's exact nearest neighbour, seeding at the exact
nearest upper-layer node, a larger candidate list, twice the neighbour budget, graph repair (every
node given an in-link from its nearest reachable node), an exhaustive beam (``ef = n``) and exact
float distances. Seeded searches run through faiss ``IndexHNSW.search_level_0``; the graph arrays
are read and written with ``faiss.vector_to_array`` / ``copy_array_to_vector``. Searches of the
default chain are the native ``IndexHNSW.search``.

Reference
---------
Malkov, Yashunin (2020), Efficient and robust approximate nearest neighbor search using
Hierarchical Navigable Small World graphs, IEEE TPAMI 42(4).
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass

import numpy as np

from causalkit.systems.ann._checks import check_k, check_vectors
from causalkit.systems.ann.cache import ArtifactCache

OBJECTS = ("levels", "entry_point", "upper_descent", "build_candidates", "neighbour_pruning",
           "reverse_links", "beam_search", "distances")


@dataclass(frozen=True)
class Levels:
    """Object 1: level multiplier ``mL`` (``None`` = 1/ln M, so P(level >= 1) = 1/M)."""

    level_mult: float | None = None

    def oracle(self) -> Levels:
        return Levels(None)

    def label(self) -> str:
        return "mL=1/ln(M)" if self.level_mult is None else f"mL={self.level_mult:g}"


@dataclass(frozen=True)
class EntryPoint:
    """Object 2: ``"default"`` (faiss/hnswlib: the first node to reach the top level) or
    ``"exact_nn"`` (oracle: start layer 0 at the query's exact nearest neighbour)."""

    kind: str = "default"

    def oracle(self) -> EntryPoint:
        return EntryPoint("exact_nn")

    def label(self) -> str:
        return self.kind


@dataclass(frozen=True)
class UpperDescent:
    """Object 3: ``"greedy"`` (ef = 1 per upper layer) or ``"exact"`` (oracle: seed layer 0 at
    the exact nearest node among the upper-layer nodes)."""

    kind: str = "greedy"

    def oracle(self) -> UpperDescent:
        return UpperDescent("exact")

    def label(self) -> str:
        return self.kind


@dataclass(frozen=True)
class BuildCandidates:
    """Object 4: ``efConstruction`` (hnswlib default 200; faiss default 40)."""

    ef_construction: int = 200

    def oracle(self) -> BuildCandidates:
        return BuildCandidates(max(2 * self.ef_construction, 400))

    def label(self) -> str:
        return f"efConstruction={self.ef_construction}"


@dataclass(frozen=True)
class NeighbourPruning:
    """Object 5: faiss's RNG heuristic with neighbour budget ``m`` (2m on layer 0)."""

    m: int = 16

    def oracle(self) -> NeighbourPruning:
        return NeighbourPruning(2 * self.m)

    def label(self) -> str:
        return f"M={self.m}"


@dataclass(frozen=True)
class ReverseLinks:
    """Object 6: the built back-links (``repair=False``) or repaired ones (every node with no
    in-link, or unreachable from the entry, gets a link from its nearest reachable node)."""

    repair: bool = False

    def oracle(self) -> ReverseLinks:
        return ReverseLinks(True)

    def label(self) -> str:
        return "repaired" if self.repair else "as built"


@dataclass(frozen=True)
class BeamSearch:
    """Object 7: layer-0 beam width ``ef`` (``None`` = number of vectors: exhaustive)."""

    ef: int | None = 16

    def oracle(self) -> BeamSearch:
        return BeamSearch(None)

    def label(self) -> str:
        return f"ef={'n' if self.ef is None else self.ef}"


@dataclass(frozen=True)
class Distances:
    """Object 8: ``storage`` in ``"flat"``, ``"sq8"``, ``"sq4"``, ``"pq"`` (d/4 bytes) and
    optional exact re-ranking of ``k * k_factor`` candidates."""

    storage: str = "flat"
    k_factor: int | None = None

    def oracle(self) -> Distances:
        return Distances("flat", None)

    def label(self) -> str:
        rr = "" if self.k_factor is None else f"+RFlat(k_factor={self.k_factor})"
        return self.storage + rr


DEFAULT_OBJECTS = {"levels": Levels(), "entry_point": EntryPoint(),
                   "upper_descent": UpperDescent(), "build_candidates": BuildCandidates(),
                   "neighbour_pruning": NeighbourPruning(), "reverse_links": ReverseLinks(),
                   "beam_search": BeamSearch(), "distances": Distances()}

_SHORTCUTS = {"m": ("neighbour_pruning", "m"), "ef_construction": ("build_candidates",
              "ef_construction"), "ef": ("beam_search", "ef"), "storage": ("distances", "storage"),
              "k_factor": ("distances", "k_factor"), "level_mult": ("levels", "level_mult")}


class HNSWWorkflow:
    """HNSW index as eight ordered, swappable objects (see the module docstring).

    Parameters
    ----------
    objects : dict, optional
        Object name -> object instance, overriding ``causalkit.systems.ann.hnsw.DEFAULT_OBJECTS``.
    **overrides
        Shortcuts: ``m``, ``ef_construction``, ``ef``, ``storage``, ``k_factor``, ``level_mult``.
    """

    family = "hnsw"
    object_names = OBJECTS
    budget_name = "ef"

    def __init__(self, objects: dict | None = None, **overrides):
        objs = dict(DEFAULT_OBJECTS)
        for name, obj in (objects or {}).items():
            if name not in OBJECTS:
                raise ValueError(f"objects: unknown HNSW object {name!r}; expected one of "
                                 f"{OBJECTS}")
            objs[name] = obj
        for key, value in overrides.items():
            if key not in _SHORTCUTS:
                raise TypeError(f"unexpected keyword argument {key!r}; shortcuts are "
                                f"{sorted(_SHORTCUTS)}")
            name, fld = _SHORTCUTS[key]
            objs[name] = dataclasses.replace(objs[name], **{fld: value})
        if objs["distances"].storage not in ("flat", "sq8", "sq4", "pq"):
            raise ValueError("distances.storage must be 'flat', 'sq8', 'sq4' or 'pq'; got "
                             f"{objs['distances'].storage!r}")
        self.objects = objs

    def replace(self, name: str, obj) -> HNSWWorkflow:
        """A new (unbuilt) workflow with object ``name`` replaced by ``obj``."""
        if name not in OBJECTS:
            raise ValueError(f"name must be one of {OBJECTS}; got {name!r}")
        return HNSWWorkflow({**self.objects, name: obj})

    def with_oracle(self, name: str) -> HNSWWorkflow:
        """A new workflow with object ``name`` replaced by its test oracle."""
        return self.replace(name, self.objects[name].oracle())

    # ------------------------------------------------------------------ budget (ef)
    @property
    def budget(self) -> int:
        ef = self.objects["beam_search"].ef
        return self.ntotal_ if ef is None else int(ef)

    def set_budget(self, ef: int) -> HNSWWorkflow:
        """Set the beam width in place (no rebuild)."""
        ef = int(max(1, ef))
        self.objects = {**self.objects, "beam_search": BeamSearch(ef)}
        self.hnsw_index_.hnsw.efSearch = ef
        return self

    def budget_grid(self) -> list[int]:
        """Beam widths 10 .. 1024 (capped at the number of vectors)."""
        grid = [10, 16, 24, 32, 48, 64, 96, 128, 192, 256, 384, 512, 768, 1024]
        return [g for g in grid if g <= self.ntotal_] or [self.ntotal_]

    # ------------------------------------------------------------------ build
    def build(self, xb, xt=None, cache: ArtifactCache | None = None) -> HNSWWorkflow:
        """Insert ``xb`` (``xt`` trains SQ/PQ storage; default ``xb``)."""
        import faiss

        t0 = time.perf_counter()
        xb = check_vectors(xb, "xb", min_rows=2)
        d = xb.shape[1]
        xt = xb if xt is None else check_vectors(xt, "xt", d=d)
        cache = ArtifactCache.for_data(cache, xb, xt)
        o = self.objects
        key = ("graph", o["levels"], o["build_candidates"], o["neighbour_pruning"],
               o["distances"].storage)
        graph = cache.get_or(key, lambda: _build_graph(o, xb, xt))
        index = faiss.clone_index(graph)
        if o["reverse_links"].repair:
            repair_links(index, xb)
        self.hnsw_index_ = index
        self.d_, self.ntotal_ = d, len(xb)
        index.hnsw.efSearch = self.budget
        self.xb_ = xb
        self.index_ = index
        kf = o["distances"].k_factor
        if kf is not None:
            self.index_ = faiss.IndexRefineFlat(index, faiss.swig_ptr(xb))
            self.index_.k_factor = float(kf)
        self._upper = None
        self._reach = None
        self.build_seconds_ = time.perf_counter() - t0
        return self

    # ------------------------------------------------------------------ search
    def search(self, xq, k: int = 10) -> tuple[np.ndarray, np.ndarray]:
        """Distances and ids of the ``k`` nearest base vectors of each query."""
        if not hasattr(self, "index_"):
            raise RuntimeError("call build(xb) before search")
        xq = check_vectors(xq, "xq", d=self.d_)
        k = check_k(k, self.ntotal_)
        o = self.objects
        if o["beam_search"].ef is None:
            return self._exhaustive_beam(xq, k)
        if o["entry_point"].kind == "default" and o["upper_descent"].kind == "greedy":
            return self.index_.search(xq, k)
        return self._seeded_search(xq, k)

    def _exhaustive_beam(self, xq: np.ndarray, k: int):
        """What a beam of width ``ef >= n`` returns: the beam never fills, so it visits every
        node reachable from its start and keeps the exact top-k of them (computed directly
        by brute force over the nodes reachable from the entry point)."""
        import faiss
        if self._reach is None:
            self._reach = np.flatnonzero(reachable_from_entry(self.hnsw_index_))
        reach = self._reach
        dist, pos = faiss.knn(xq, self.xb_[reach], min(k, len(reach)))
        ids = np.where(pos < 0, -1, reach[np.maximum(pos, 0)])
        if ids.shape[1] < k:
            pad = k - ids.shape[1]
            ids = np.hstack([ids, np.full((len(xq), pad), -1)])
            dist = np.hstack([dist, np.full((len(xq), pad), np.inf, dtype=np.float32)])
        return dist, ids

    def _seeded_search(self, xq: np.ndarray, k: int):
        """Layer-0 beam search from oracle seeds (exact NN, or exact upper-layer NN)."""
        import faiss

        from causalkit.systems.ann.evaluation import exact_rerank
        if self.objects["entry_point"].kind == "exact_nn":
            seed_d, seed = faiss.knn(xq, self.xb_, 1)
        else:
            upper = self.upper_nodes()
            seed_d, pos = faiss.knn(xq, self.xb_[upper], 1)
            seed = upper[pos]
        kf = self.objects["distances"].k_factor
        kk = k if kf is None else min(self.ntotal_, int(k * kf))
        nq = len(xq)
        dist = np.empty((nq, kk), dtype=np.float32)
        ids = np.empty((nq, kk), dtype=np.int64)
        seed = np.ascontiguousarray(seed, dtype=np.int32)
        seed_d = np.ascontiguousarray(seed_d, dtype=np.float32)
        self.hnsw_index_.search_level_0(nq, faiss.swig_ptr(xq), kk, faiss.swig_ptr(seed),
                                        faiss.swig_ptr(seed_d), faiss.swig_ptr(dist),
                                        faiss.swig_ptr(ids))
        if kf is None:
            return dist, ids
        top = exact_rerank(self.xb_, xq, ids, k)
        diff = self.xb_[np.where(top < 0, 0, top)] - xq[:, None, :]
        return np.einsum("qkd,qkd->qk", diff, diff), top

    # ------------------------------------------------------------------ graph access
    def levels(self) -> np.ndarray:
        """Level of every node (0 = base layer only)."""
        import faiss
        return faiss.vector_to_array(self.hnsw_index_.hnsw.levels).astype(np.int64) - 1

    def upper_nodes(self) -> np.ndarray:
        """Ids of the nodes present on layer 1 or above."""
        if self._upper is None:
            lv = self.levels()
            self._upper = np.flatnonzero(lv >= 1) if (lv >= 1).any() else np.array(
                [self.hnsw_index_.hnsw.entry_point])
        return self._upper

    def layer_neighbours(self, level: int = 0) -> np.ndarray:
        """(n, slots) neighbour ids on ``level`` (-1 = empty slot)."""
        return _layer_view(self.hnsw_index_)[level]

    def stage_measures(self, ctx) -> dict:
        return {}

    def memory_bytes_per_vector(self) -> float:
        """Stored code + links (4 bytes per layer-0 slot, 2M slots) + re-rank vectors."""
        o = self.objects
        code = {"flat": 4 * self.d_, "sq8": self.d_, "sq4": self.d_ / 2,
                "pq": max(1, self.d_ // 4)}[o["distances"].storage]
        links = 4 * 2 * o["neighbour_pruning"].m * (1 + 1 / o["neighbour_pruning"].m)
        extra = 0 if o["distances"].k_factor is None else 4 * self.d_
        return code + links + extra

    def describe(self) -> str:
        o = self.objects
        parts = [f"HNSW{o['neighbour_pruning'].m}", o["build_candidates"].label(),
                 o["distances"].label(), o["beam_search"].label()]
        for name in ("levels", "entry_point", "upper_descent", "reverse_links"):
            if o[name] != DEFAULT_OBJECTS[name]:
                parts.append(f"{name}={o[name].label()}")
        return ",".join(parts)

    def __repr__(self) -> str:
        return f"HNSWWorkflow({self.describe()})"


# --------------------------------------------------------------------------- helpers
def _build_graph(o: dict, xb: np.ndarray, xt: np.ndarray):
    import faiss
    d = xb.shape[1]
    m = int(o["neighbour_pruning"].m)
    storage = o["distances"].storage
    if storage == "flat":
        index = faiss.IndexHNSWFlat(d, m)
    elif storage in ("sq8", "sq4"):
        qtype = faiss.ScalarQuantizer.QT_8bit if storage == "sq8" else faiss.ScalarQuantizer.QT_4bit
        index = faiss.IndexHNSWSQ(d, qtype, m)
    else:
        pm = max(1, d // 4)
        if d % pm:
            raise ValueError(f"distances.storage='pq' needs d={d} divisible by {pm}")
        index = faiss.IndexHNSWPQ(d, pm, m)
    mult = o["levels"].level_mult
    if mult is not None:
        h = index.hnsw
        h.assign_probas.resize(0)
        h.cum_nneighbor_per_level.resize(0)
        h.set_default_probas(m, float(mult))
    index.hnsw.efConstruction = int(o["build_candidates"].ef_construction)
    if not index.is_trained:
        index.train(xt)
    index.add(xb)
    return index


def _layer_view(index) -> list[np.ndarray]:
    """Neighbour arrays per level as (n, slots) int arrays (copies)."""
    import faiss
    h = index.hnsw
    nb = faiss.vector_to_array(h.neighbors)
    off = faiss.vector_to_array(h.offsets).astype(np.int64)[:-1]
    lv = faiss.vector_to_array(h.levels).astype(np.int64) - 1
    out = []
    for level in range(h.max_level + 1):
        lo, hi = h.cum_nb_neighbors(level), h.cum_nb_neighbors(level + 1)
        pos = off[:, None] + np.arange(lo, hi)[None, :]
        pos = np.minimum(pos, len(nb) - 1)
        view = nb[pos].astype(np.int64)
        view[lv < level] = -1
        out.append(view)
    return out


def reachable_from_entry(index) -> np.ndarray:
    """Boolean mask of the layer-0 nodes reachable from the entry point (BFS)."""
    from scipy.sparse import csr_matrix
    from scipy.sparse.csgraph import breadth_first_order
    layer0 = _layer_view(index)[0]
    n = layer0.shape[0]
    rows = np.repeat(np.arange(n), layer0.shape[1])
    cols = layer0.ravel()
    keep = cols >= 0
    graph = csr_matrix((np.ones(keep.sum(), dtype=np.int8), (rows[keep], cols[keep])),
                       shape=(n, n))
    order = breadth_first_order(graph, index.hnsw.entry_point, directed=True,
                                return_predecessors=False)
    mask = np.zeros(n, dtype=bool)
    mask[order] = True
    return mask


def in_degrees(index) -> np.ndarray:
    """Layer-0 in-degree of every node."""
    layer0 = _layer_view(index)[0]
    valid = layer0[layer0 >= 0]
    return np.bincount(valid, minlength=layer0.shape[0])


def repair_links(index, xb: np.ndarray, rounds: int = 20) -> int:
    """Give every node without an in-link, or unreachable from the entry point, an in-link from
    nearest reachable node (of its 8 nearest) with a free slot, or with a link whose target keeps
    another in-link. Overwriting can disconnect nodes behind that link, so the pass repeats until
    nothing is defective (at most ``rounds`` times).

    Returns the number of links written. Loops only over the (few) defective nodes.
    """
    import faiss
    h = index.hnsw
    nb = faiss.vector_to_array(h.neighbors)
    off = faiss.vector_to_array(h.offsets).astype(np.int64)
    n0 = h.cum_nb_neighbors(1)
    written = 0
    for _ in range(rounds):
        reach = reachable_from_entry(index)
        deg = in_degrees(index)
        deg[h.entry_point] = 1
        bad = np.flatnonzero(~reach | (deg == 0))
        good = np.flatnonzero(reach)
        if bad.size == 0 or good.size == 0:
            break
        _, near = faiss.knn(xb[bad], xb[good], min(8, good.size))
        for u, cands in zip(bad, good[near], strict=True):
            for v in cands[cands != u]:
                block = nb[off[v]: off[v] + n0]
                free = np.flatnonzero(block < 0)
                if free.size:
                    slot = free[0]
                else:      # overwrite a link whose target keeps another in-link
                    spare = np.flatnonzero(deg[block] >= 2)
                    if not spare.size:
                        continue
                    slot = spare[-1]
                    deg[block[slot]] -= 1
                nb[off[v] + slot] = u
                deg[u] += 1
                written += 1
                break
        faiss.copy_array_to_vector(nb, h.neighbors)
    return written
