"""IVF-PQ as a chain of eight ordered, replaceable objects, compiled to a native faiss index.

Objects, in causal order (each consumes the artifacts of the ones before it):

1. ``rotation``        pre-transform ``x' = R x`` (none, random rotation, OPQ);
2. ``coarse_kmeans``   nlist centroids from k-means on a training sample;
3. ``assignment``      inverted-list id of every base vector (exact argmin or HNSW search);
4. ``probing``         the ``nprobe`` lists scanned per query (flat or HNSW coarse search);
5. ``residual``        encode ``r = x' - c`` (residual) or ``x'`` itself;
6. ``pq_codebooks``    product quantizer with ``m`` sub-quantizers of ``2**nbits`` codewords;
7. ``distance_tables`` asymmetric distance computation (ADC), optionally polysemous filtering;
8. ``reranking``       optional exact re-ranking of the ``k * k_factor`` best candidates.

Each object is a frozen dataclass with an ``oracle()``: the exact or ideal computation its output
is checked against (OPQ rotation, converged k-means, exact assignment, exhaustive probing,
residual coding, lossless codes, un-filtered ADC, exact re-ranking of every probed candidate).
With every object replaced by its oracle the index scans every list with exact distances and
returns the exact neighbours.

The compiled index is the faiss index a user would configure directly (``IndexIVFPQ`` or
``IndexIVFFlat`` wrapped in ``IndexPreTransform`` / ``IndexRefineFlat``), so searching through the
workflow costs no throughput. Custom assignment goes through
``faiss.contrib.ivf_tools.add_preassigned``.

References
----------
Jegou, Douze, Schmid (2011), Product quantization for nearest neighbor search, IEEE TPAMI.
Ge, He, Ke, Sun (2013), Optimized product quantization, CVPR.
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass

import numpy as np

from causalkit.systems.ann._checks import check_k, check_training_points, check_vectors
from causalkit.systems.ann.cache import ArtifactCache

OBJECTS = ("rotation", "coarse_kmeans", "assignment", "probing", "residual", "pq_codebooks",
           "distance_tables", "reranking")


# --------------------------------------------------------------------------- the eight objects
@dataclass(frozen=True)
class Rotation:
    """Object 1, pre-transform. ``kind``: ``"none"``, ``"random"`` or ``"opq"`` (all orthonormal,
    so distances are preserved; OPQ minimises PQ distortion, Ge et al. 2013)."""

    kind: str = "none"
    opq_niter: int = 8
    opq_train_points: int = 10_000

    def oracle(self) -> Rotation:
        return Rotation("opq", self.opq_niter, self.opq_train_points)

    def label(self) -> str:
        names = {"none": "identity", "random": "RR", "opq": f"OPQ(niter={self.opq_niter})"}
        return names[self.kind]


@dataclass(frozen=True)
class CoarseKMeans:
    """Object 2, coarse quantizer training: k-means (faiss ``Clustering``; IndexIVF's own
    defaults are ``niter=10``, ``seed=1234``, 256 training points per centroid at most)."""

    niter: int = 10
    nredo: int = 1
    max_points_per_centroid: int = 256
    seed: int = 1234

    def oracle(self) -> CoarseKMeans:
        return CoarseKMeans(niter=max(self.niter, 50), nredo=max(self.nredo, 1),
                            max_points_per_centroid=max(self.max_points_per_centroid, 256),
                            seed=self.seed)

    def label(self) -> str:
        return f"kmeans(niter={self.niter}, nredo={self.nredo})"


@dataclass(frozen=True)
class Assignment:
    """Object 3, inverted-list assignment of the base vectors: ``"exact"`` argmin over the
    centroids, or ``"hnsw"`` (approximate search of an HNSW graph over the centroids)."""

    kind: str = "exact"
    hnsw_m: int = 16
    ef: int = 16

    def oracle(self) -> Assignment:
        return Assignment("exact")

    def label(self) -> str:
        return "exact" if self.kind == "exact" else f"HNSW{self.hnsw_m}(ef={self.ef})"


@dataclass(frozen=True)
class Probing:
    """Object 4, query routing: scan the ``nprobe`` lists with the nearest centroids, ranked
    exactly (``"flat"``) or by an HNSW graph (``"hnsw"``). ``nprobe=None`` scans every list."""

    nprobe: int | None = 8
    kind: str = "flat"
    hnsw_m: int = 32
    ef: int = 64

    def oracle(self) -> Probing:
        return Probing(nprobe=None, kind="flat")

    def label(self) -> str:
        n = "all" if self.nprobe is None else self.nprobe
        return f"nprobe={n}" + ("" if self.kind == "flat" else f", HNSW{self.hnsw_m}(ef={self.ef})")


@dataclass(frozen=True)
class Residual:
    """Object 5, what is encoded: the residual ``x' - c`` (``True``) or ``x'`` itself."""

    enabled: bool = True

    def oracle(self) -> Residual:
        return Residual(True)

    def label(self) -> str:
        return "residual" if self.enabled else "raw"


@dataclass(frozen=True)
class PQCodebooks:
    """Object 6, product quantizer: ``m`` sub-quantizers of ``2**nbits`` codewords
    (``m=None``: ``d // 4``). ``lossless=True`` stores the vectors themselves (the oracle)."""

    m: int | None = None
    nbits: int = 8
    lossless: bool = False

    def oracle(self) -> PQCodebooks:
        return PQCodebooks(self.m, self.nbits, lossless=True)

    def resolved_m(self, d: int) -> int:
        return max(1, d // 4) if self.m is None else int(self.m)

    def label(self) -> str:
        return "Flat (lossless)" if self.lossless else f"PQ{self.m or 'd/4'}x{self.nbits}"


@dataclass(frozen=True)
class DistanceTables:
    """Object 7, distance estimation from the codes: ``"adc"`` look-up tables (exact distance
    to each code's reconstruction) or ``"polysemous"`` (Hamming pre-filter with threshold
    ``ht`` before ADC; Douze et al. 2016)."""

    kind: str = "adc"
    ht: int = 64

    def oracle(self) -> DistanceTables:
        return DistanceTables("adc")

    def label(self) -> str:
        return "ADC" if self.kind == "adc" else f"polysemous(ht={self.ht})"


@dataclass(frozen=True)
class Reranking:
    """Object 8, final top-k: ``k_factor=None`` keeps the code ranking; an integer re-ranks the
    ``k * k_factor`` best candidates with exact distances (``IndexRefineFlat``); ``"all"``
    ranks every probed candidate exactly (the oracle)."""

    k_factor: int | str | None = None

    def oracle(self) -> Reranking:
        return Reranking("all")

    def label(self) -> str:
        return {None: "none"}.get(self.k_factor, f"exact(k_factor={self.k_factor})")


DEFAULT_OBJECTS = {"rotation": Rotation(), "coarse_kmeans": CoarseKMeans(),
                   "assignment": Assignment(), "probing": Probing(), "residual": Residual(),
                   "pq_codebooks": PQCodebooks(), "distance_tables": DistanceTables(),
                   "reranking": Reranking()}


# --------------------------------------------------------------------------- the workflow
class IVFPQWorkflow:
    """IVF-PQ index as eight ordered, swappable objects (see the module docstring).

    Parameters
    ----------
    nlist : int, optional
        Number of inverted lists; ``None`` uses ``round(sqrt(n))`` at build time.
    objects : dict, optional
        Object name -> object instance, overriding ``causalkit.systems.ann.ivfpq.DEFAULT_OBJECTS``.
    **overrides
        Shortcuts: ``nprobe``, ``pq_m``, ``pq_nbits``, ``kmeans_niter``, ``rotation`` (a kind),
        ``by_residual``, ``k_factor``.

    Examples
    --------
    >>> wf = IVFPQWorkflow(nlist=256, nprobe=16, pq_m=16).build(xb)      # doctest: +SKIP
    >>> D, I = wf.search(xq, 10)                                         # doctest: +SKIP
    >>> wf.replace("reranking", Reranking(4)).build(xb)                  # doctest: +SKIP
    """

    family = "ivfpq"
    object_names = OBJECTS
    budget_name = "nprobe"

    def __init__(self, nlist: int | None = None, objects: dict | None = None, **overrides):
        objs = dict(DEFAULT_OBJECTS)
        for name, obj in (objects or {}).items():
            if name not in OBJECTS:
                raise ValueError(f"objects: unknown IVF-PQ object {name!r}; expected one of "
                                 f"{OBJECTS}")
            objs[name] = obj
        objs = _apply_overrides(objs, overrides)
        if nlist is not None and (not isinstance(nlist, (int, np.integer)) or nlist < 1):
            raise ValueError(f"nlist must be a positive integer or None; got {nlist!r}")
        self.nlist = None if nlist is None else int(nlist)
        self.objects = objs

    # ------------------------------------------------------------------ object surgery
    def replace(self, name: str, obj) -> IVFPQWorkflow:
        """A new (unbuilt) workflow with object ``name`` replaced by ``obj``."""
        if name not in OBJECTS:
            raise ValueError(f"name must be one of {OBJECTS}; got {name!r}")
        return IVFPQWorkflow(self.nlist_ if hasattr(self, "nlist_") else self.nlist,
                             {**self.objects, name: obj})

    def with_oracle(self, name: str) -> IVFPQWorkflow:
        """A new workflow with object ``name`` replaced by its test oracle."""
        return self.replace(name, self.objects[name].oracle())

    def with_nlist(self, nlist: int) -> IVFPQWorkflow:
        """Same objects, another number of lists (``nprobe`` rescaled to the same fraction)."""
        probe = self.objects["probing"]
        old = self.nlist_ if hasattr(self, "nlist_") else self.nlist
        new_probe = probe
        if probe.nprobe is not None and old:
            new_probe = dataclasses.replace(probe, nprobe=max(1, round(probe.nprobe * nlist / old)))
        return IVFPQWorkflow(nlist, {**self.objects, "probing": new_probe})

    # ------------------------------------------------------------------ budget (nprobe)
    @property
    def budget(self) -> int:
        p = self.objects["probing"].nprobe
        return self.nlist_ if p is None else min(p, self.nlist_)

    def set_budget(self, nprobe: int) -> IVFPQWorkflow:
        """Set ``nprobe`` on the built index in place (no rebuild)."""
        nprobe = int(min(max(1, nprobe), self.nlist_))
        self.objects = {**self.objects,
                        "probing": dataclasses.replace(self.objects["probing"], nprobe=nprobe)}
        self.ivf_.nprobe = nprobe
        return self

    def budget_grid(self) -> list[int]:
        """Powers of two up to ``nlist`` (faiss ``ParameterSpace`` style), plus ``nlist``."""
        grid = [2 ** i for i in range(int(np.log2(self.nlist_)) + 1)]
        return sorted(set(grid + [self.nlist_]))

    # ------------------------------------------------------------------ build
    def build(self, xb, xt=None, cache: ArtifactCache | None = None) -> IVFPQWorkflow:
        """Train every object in order and add ``xb``.

        Parameters
        ----------
        xb : array-like (n, d)
            Base vectors.
        xt : array-like (nt, d), optional
            Training vectors (default: ``xb``).
        cache : ArtifactCache, optional
            Reuse artifacts of upstream objects whose configuration did not change.
        """
        import faiss
        from faiss.contrib.ivf_tools import add_preassigned

        t0 = time.perf_counter()
        xb = check_vectors(xb, "xb", min_rows=2)
        d = xb.shape[1]
        xt = xb if xt is None else check_vectors(xt, "xt", d=d)
        cache = ArtifactCache.for_data(cache, xb, xt)
        o = self.objects
        nlist = self.nlist if self.nlist is not None else max(1, int(round(np.sqrt(len(xb)))))
        check_training_points(len(xt), nlist, "the coarse quantizer (nlist)")
        pq = o["pq_codebooks"]
        m = pq.resolved_m(d)
        lossless = pq.lossless or o["reranking"].k_factor == "all"
        if not lossless:
            if d % m:
                raise ValueError(f"pq_codebooks.m={m} must divide the dimension d={d}")
            check_training_points(len(xt), 2 ** pq.nbits, "the PQ sub-quantizers (2**nbits)")
            if o["distance_tables"].kind == "polysemous" and pq.nbits != 8:
                raise ValueError("distance_tables='polysemous' needs 8-bit PQ codes")

        # 1. rotation
        key1 = ("rotation", o["rotation"], m)
        vt = cache.get_or(key1, lambda: _train_rotation(o["rotation"], xt, d, m))
        xt_r = xt if vt is None else vt.apply(xt)
        xb_r = xb if vt is None else vt.apply(xb)
        # 2. coarse k-means
        key2 = key1 + ("kmeans", o["coarse_kmeans"], nlist)
        centroids = cache.get_or(key2, lambda: _train_kmeans(o["coarse_kmeans"], xt_r, nlist))
        exact_q = faiss.IndexFlatL2(d)
        exact_q.add(centroids)
        # 3. assignment
        key3 = key2 + ("assign", o["assignment"])
        assign = cache.get_or(key3, lambda: _assign(o["assignment"], centroids, xb_r, exact_q))
        # 4. probing quantizer
        probe = o["probing"]
        search_q = exact_q if probe.kind == "flat" else _hnsw_quantizer(centroids, probe.hnsw_m,
                                                                        probe.ef)
        # 5-7. codes (trained on the exact quantizer, cached empty)
        key7 = key2 + ("codes", o["residual"], None if lossless else (m, pq.nbits),
                       o["distance_tables"].kind == "polysemous")
        template = cache.get_or(key7, lambda: _train_codes(exact_q, xt_r, d, nlist, m, pq.nbits,
                                                           lossless, o["residual"].enabled,
                                                           o["distance_tables"]))
        ivf = faiss.clone_index(template)
        cloned_q = ivf.quantizer
        cloned_q.thisown = True       # the clone's own quantizer copy is freed by Python
        ivf.own_fields = False
        ivf.quantizer = exact_q
        add_preassigned(ivf, xb_r, assign)
        ivf.quantizer = search_q
        ivf.nprobe = nlist if probe.nprobe is None else min(int(probe.nprobe), nlist)
        if not lossless and o["distance_tables"].kind == "polysemous":
            ivf.polysemous_ht = int(o["distance_tables"].ht)
        index = ivf
        if vt is not None:
            index = faiss.IndexPreTransform(vt, ivf)
        inner = index
        # 8. re-ranking
        kf = o["reranking"].k_factor
        if kf is not None and kf != "all":
            index = faiss.IndexRefineFlat(index, faiss.swig_ptr(xb))
            index.k_factor = float(kf)
        # SWIG objects must outlive index_
        self._keep = (exact_q, search_q, vt, ivf, inner, template)
        self.index_, self.ivf_ = index, ivf
        self.nlist_, self.d_, self.ntotal_ = nlist, d, len(xb)
        self.centroids_, self.assign_ = centroids, assign
        self.rotation_ = vt
        self.build_seconds_ = time.perf_counter() - t0
        return self

    # ------------------------------------------------------------------ search
    def search(self, xq, k: int = 10) -> tuple[np.ndarray, np.ndarray]:
        """Distances and ids of the ``k`` nearest base vectors of each query (native faiss)."""
        self._check_built()
        xq = check_vectors(xq, "xq", d=self.d_)
        k = check_k(k, self.ntotal_)
        return self.index_.search(xq, k)

    def stage_measures(self, ctx) -> dict:
        """Probe coverage at the current ``nprobe`` (the ceiling of downstream recall)."""
        from causalkit.systems.ann.ivfpq_metrics import probe_coverage
        return {"coverage": probe_coverage(self, ctx.xq, ctx.gt, ctx.k)}

    def transform(self, x: np.ndarray) -> np.ndarray:
        """Apply the trained rotation (identity when there is none)."""
        return x if self.rotation_ is None else self.rotation_.apply(x)

    def memory_bytes_per_vector(self) -> float:
        """Code plus id bytes per vector (+ 4d for exact re-ranking)."""
        o = self.objects
        pq = o["pq_codebooks"]
        if pq.lossless or o["reranking"].k_factor == "all":
            code = 4 * self.d_
        else:
            code = pq.resolved_m(self.d_) * pq.nbits / 8
        extra = 4 * self.d_ if isinstance(o["reranking"].k_factor, (int, np.integer)) else 0
        return code + 8 + extra

    def describe(self) -> str:
        """faiss-factory-like summary of the design."""
        o = self.objects
        parts = [] if o["rotation"].kind == "none" else [o["rotation"].label()]
        q = "" if o["probing"].kind == "flat" else f"_HNSW{o['probing'].hnsw_m}"
        n = getattr(self, "nlist_", self.nlist) or "sqrt(n)"
        parts.append(f"IVF{n}{q}")
        parts.append(o["pq_codebooks"].label() if o["reranking"].k_factor != "all" else "Flat")
        if not o["residual"].enabled:
            parts.append("raw")
        if o["distance_tables"].kind != "adc":
            parts.append(o["distance_tables"].label())
        if isinstance(o["reranking"].k_factor, (int, np.integer)):
            parts.append(f"RFlat(k_factor={o['reranking'].k_factor})")
        if o["assignment"].kind != "exact":
            parts.append(f"assign={o['assignment'].label()}")
        return ",".join(parts) + f" [{o['probing'].label()}]"

    def _check_built(self) -> None:
        if not hasattr(self, "index_"):
            raise RuntimeError("call build(xb) before search")

    def __repr__(self) -> str:
        return f"IVFPQWorkflow({self.describe()})"


# --------------------------------------------------------------------------- helpers
_SHORTCUTS = {
    "nprobe": ("probing", "nprobe"), "pq_m": ("pq_codebooks", "m"),
    "pq_nbits": ("pq_codebooks", "nbits"), "kmeans_niter": ("coarse_kmeans", "niter"),
    "rotation": ("rotation", "kind"), "by_residual": ("residual", "enabled"),
    "k_factor": ("reranking", "k_factor"), "seed": ("coarse_kmeans", "seed"),
}


def _apply_overrides(objs: dict, overrides: dict) -> dict:
    for key, value in overrides.items():
        if key not in _SHORTCUTS:
            raise TypeError(f"unexpected keyword argument {key!r}; shortcuts are "
                            f"{sorted(_SHORTCUTS)}")
        name, field = _SHORTCUTS[key]
        objs[name] = dataclasses.replace(objs[name], **{field: value})
    return objs


def _train_rotation(rot: Rotation, xt: np.ndarray, d: int, m: int):
    import faiss
    if rot.kind == "none":
        return None
    if rot.kind == "random":
        vt = faiss.RandomRotationMatrix(d, d)
        vt.init(1234)
        return vt
    if rot.kind == "opq":
        if d % m:
            raise ValueError(f"OPQ needs m={m} to divide d={d}")
        vt = faiss.OPQMatrix(d, m)
        vt.niter = int(rot.opq_niter)
        vt.niter_pq_0 = 10
        vt.max_train_points = int(rot.opq_train_points)
        vt.train(xt)
        return vt
    raise ValueError(f"rotation.kind must be 'none', 'random' or 'opq'; got {rot.kind!r}")


def _train_kmeans(km: CoarseKMeans, xt: np.ndarray, nlist: int) -> np.ndarray:
    import faiss
    kmeans = faiss.Kmeans(xt.shape[1], nlist, niter=int(km.niter), nredo=int(km.nredo),
                          seed=int(km.seed),
                          max_points_per_centroid=int(km.max_points_per_centroid),
                          verbose=False)
    kmeans.train(xt)
    return np.ascontiguousarray(kmeans.centroids, dtype=np.float32)


def _hnsw_quantizer(centroids: np.ndarray, m: int, ef: int):
    import faiss
    q = faiss.IndexHNSWFlat(centroids.shape[1], int(m))
    q.hnsw.efConstruction = 40
    q.add(centroids)
    q.hnsw.efSearch = int(ef)
    return q


def _assign(asg: Assignment, centroids: np.ndarray, xb_r: np.ndarray, exact_q) -> np.ndarray:
    if asg.kind == "exact":
        _, lab = exact_q.search(xb_r, 1)
    elif asg.kind == "hnsw":
        _, lab = _hnsw_quantizer(centroids, asg.hnsw_m, asg.ef).search(xb_r, 1)
    else:
        raise ValueError(f"assignment.kind must be 'exact' or 'hnsw'; got {asg.kind!r}")
    return lab[:, 0].astype(np.int64)


def _train_codes(exact_q, xt_r, d, nlist, m, nbits, lossless, by_residual, dist: DistanceTables):
    import faiss
    if lossless:
        ivf = faiss.IndexIVFFlat(exact_q, d, nlist)
    else:
        ivf = faiss.IndexIVFPQ(exact_q, d, nlist, int(m), int(nbits))
        ivf.by_residual = bool(by_residual)
        ivf.do_polysemous_training = dist.kind == "polysemous"
        ivf.train(xt_r)
    return ivf
