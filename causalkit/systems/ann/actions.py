"""Pluggable action library with compatibility checks.

An :class:`Action` writes one object slot (``target``) of a workflow and declares which
bottlenecks it addresses (``fixes``). Before it is tried, each of its ``checks`` is evaluated;
a check returns ``None`` when the action is compatible, else the reason it is not (arithmetic:
``m | d``; data sufficiency: 39 training points per centroid; resources: bytes per vector
against an optional memory budget; structure: one accepted action per slot).

The library is data: pass ``actions=[...]`` to :class:`~causalkit.systems.ann.SmartANN` to
add, remove or reorder entries.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass, field

from causalkit.systems.ann._checks import MIN_POINTS_PER_CENTROID


@dataclass(frozen=True)
class Action:
    """One design change: ``apply(workflow) -> new unbuilt workflow``."""

    name: str
    family: str
    target: str
    fixes: tuple
    description: str
    apply: Callable
    checks: tuple = field(default_factory=tuple)

    def incompatibility(self, workflow, info: dict) -> str | None:
        """The first failing check's reason, or ``None`` if the action may be tried."""
        for check in self.checks:
            reason = check(workflow, info)
            if reason:
                return reason
        return None


# --------------------------------------------------------------------------- checks
def _pq_m(wf) -> int:
    return wf.objects["pq_codebooks"].resolved_m(wf.d_)


def _needs_codes(wf, info):
    pq = wf.objects["pq_codebooks"]
    return "codes are lossless" if pq.lossless else None


def _opq_divides(wf, info):
    return None if wf.d_ % _pq_m(wf) == 0 else f"OPQ needs m={_pq_m(wf)} to divide d={wf.d_}"


def _double_m_divides(wf, info):
    m2 = 2 * _pq_m(wf)
    if m2 > wf.d_ or wf.d_ % m2:
        return f"m={m2} does not divide d={wf.d_}"
    return None


def _more_lists_trainable(wf, info):
    need = MIN_POINTS_PER_CENTROID * 2 * wf.nlist_
    if info["n_train"] < need:
        return f"{info['n_train']} training points < {need} for nlist={2 * wf.nlist_}"
    return None


def _nlist_large(wf, info):
    return None if wf.nlist_ >= 1024 else f"nlist={wf.nlist_} < 1024: flat probing is cheap"


def _not_reranked(wf, info):
    kf = wf.objects["reranking" if wf.family == "ivfpq" else "distances"].k_factor
    return None if kf is None else "already re-ranked"


def _memory(extra_fn):
    def check(wf, info):
        budget = info.get("memory_budget")
        if budget is None:
            return None
        need = wf.memory_bytes_per_vector() + extra_fn(wf)
        return None if need <= budget else f"{need:.0f} B/vector > budget {budget:.0f}"
    return check


def _differs(name, make):
    def check(wf, info):
        return "already in place" if wf.objects[name] == make(wf).objects[name] else None
    return check


def _compressed(wf, info):
    return None if wf.objects["distances"].storage != "flat" else "vectors already stored exactly"


# --------------------------------------------------------------------------- IVF-PQ actions
def _ivf(name, target, fixes, description, apply, *checks):
    return Action(name, "ivfpq", target, tuple(fixes), description, apply,
                  tuple(checks) + (_differs_any(apply),))


def _differs_any(apply):
    def check(wf, info):
        new = apply(wf)
        same = new.objects == wf.objects and getattr(new, "nlist", None) == wf.nlist_
        return "no change" if same else None
    return check


def _rep(wf, name, **kw):
    return wf.replace(name, dataclasses.replace(wf.objects[name], **kw))


def _rerank_action(kf):
    return _ivf(f"rerank_k{kf}", "reranking", ("pq_codebooks", "distance_tables", "reranking"),
                f"exact re-ranking of the top {kf}k candidates (IndexRefineFlat, +4d B/vector)",
                lambda wf: _rep(wf, "reranking", k_factor=kf), _not_reranked,
                _memory(lambda wf: 4 * wf.d_))


IVFPQ_ACTIONS = (
    _ivf("opq", "rotation", ("rotation", "pq_codebooks"), "OPQ rotation before PQ (A1)",
         lambda wf: _rep(wf, "rotation", kind="opq"), _needs_codes, _opq_divides),
    _ivf("kmeans_converged", "coarse_kmeans", ("coarse_kmeans",),
         "k-means with 25 iterations (A3)", lambda wf: _rep(wf, "coarse_kmeans", niter=25)),
    _ivf("more_lists", "coarse_kmeans", ("coarse_kmeans", "probing"),
         "twice as many inverted lists, nprobe rescaled (A3)",
         lambda wf: wf.with_nlist(2 * wf.nlist_), _more_lists_trainable),
    _ivf("exact_assignment", "assignment", ("assignment",), "exact list assignment",
         lambda wf: _rep(wf, "assignment", kind="exact")),
    _ivf("hnsw_probing", "probing", ("probing",), "HNSW coarse quantizer (A5)",
         lambda wf: _rep(wf, "probing", kind="hnsw", ef=max(64, 2 * wf.budget)), _nlist_large),
    _ivf("residual_on", "residual", ("residual",), "encode residuals (A7)",
         lambda wf: _rep(wf, "residual", enabled=True)),
    _rerank_action(2), _rerank_action(4), _rerank_action(8),
    _ivf("more_bytes", "pq_codebooks", ("pq_codebooks", "reranking"),
         "twice as many PQ sub-quantizers (A8)",
         lambda wf: _rep(wf, "pq_codebooks", m=2 * _pq_m(wf)), _needs_codes, _double_m_divides,
         _memory(lambda wf: _pq_m(wf) * wf.objects["pq_codebooks"].nbits / 8)),
    _ivf("adc_tables", "distance_tables", ("distance_tables",),
         "plain ADC without polysemous filtering", lambda wf: _rep(wf, "distance_tables",
                                                                  kind="adc")),
)


# --------------------------------------------------------------------------- HNSW actions
def _hn(name, target, fixes, description, apply, *checks):
    return Action(name, "hnsw", target, tuple(fixes), description, apply,
                  tuple(checks) + (_differs(target, apply),))


def _hrerank(kf):
    return _hn(f"rerank_k{kf}", "distances", ("distances",),
               f"exact re-ranking of the top {kf}k (B8)",
               lambda wf: _rep(wf, "distances", k_factor=kf), _compressed, _not_reranked,
               _memory(lambda wf: 4 * wf.d_))


HNSW_ACTIONS = (
    _hn("standard_levels", "levels", ("levels",), "levels with mL = 1/ln(M)",
        lambda wf: _rep(wf, "levels", level_mult=None)),
    _hn("efc_x2", "build_candidates", ("build_candidates", "beam_search"),
        "twice the efConstruction (B2)",
        lambda wf: _rep(wf, "build_candidates",
                        ef_construction=2 * wf.objects["build_candidates"].ef_construction)),
    _hn("m_x2", "neighbour_pruning", ("neighbour_pruning", "reverse_links", "build_candidates",
                                       "beam_search"),
        "twice the neighbour budget M (B1)",
        lambda wf: _rep(wf, "neighbour_pruning", m=2 * wf.objects["neighbour_pruning"].m),
        _memory(lambda wf: 8 * wf.objects["neighbour_pruning"].m)),
    _hn("repair_links", "reverse_links", ("entry_point", "reverse_links"),
        "link orphan / unreachable nodes from their nearest reachable node (B6)",
        lambda wf: _rep(wf, "reverse_links", repair=True)),
    _hn("float_storage", "distances", ("distances",), "store float vectors (exact distances)",
        lambda wf: _rep(wf, "distances", storage="flat"), _compressed),
    _hrerank(2), _hrerank(4),
)

ACTIONS = {"ivfpq": IVFPQ_ACTIONS, "hnsw": HNSW_ACTIONS}


# --------------------------------------------------------------------------- efficiency actions
# Tried on every design whatever the diagnosis flags: they trade the structure (list count, code
# size, index type, graph degree) for speed, memory or build time, each calibrated to the target
# recall. ``apply`` may return a workflow of the other family. The pre-build memory check uses
# the estimate ``_est_bytes`` (codes + ids / links); the measured size decides after the build.
def _est_bytes(kind: str, d: int, m: int) -> float:
    """Bytes per vector of an IVF ("ivf_flat", "ivf_pq" with ``m`` bytes) or HNSW ("hnsw_flat",
    "hnsw_sq8" with degree ``m``: 2m 4-byte layer-0 links) design."""
    return {"ivf_flat": 4 * d + 8, "ivf_pq": m + 8, "hnsw_flat": 4 * d + 8 * m,
            "hnsw_sq8": d + 8 * m}[kind]


def _fits(kind: str, m_fn=lambda wf: 0):
    def check(wf, info):
        budget = info.get("memory_budget")
        need = _est_bytes(kind, wf.d_, m_fn(wf))
        if budget is not None and need > budget:
            return f"about {need:.0f} B/vector > budget {budget:.0f}"
        return None
    return check


def _is(family):
    def check(wf, info):
        return None if wf.family == family else f"not an {family} design"
    return check


def _lossy(wf, info):
    return "codes are lossless" if wf.objects["pq_codebooks"].lossless else None


def _nlist_at_least(n):
    def check(wf, info):
        return None if wf.nlist_ >= n else f"nlist={wf.nlist_} < {n}"
    return check


def _half_m_divides(wf, info):
    m = _pq_m(wf) // 2
    return None if m >= 2 and wf.d_ % m == 0 else f"m={m} does not divide d={wf.d_}"


def _ivf_flat(wf):
    from causalkit.systems.ann.ivfpq import IVFPQWorkflow, PQCodebooks
    nlist = wf.nlist_ if wf.family == "ivfpq" else None
    return IVFPQWorkflow(nlist, {"pq_codebooks": PQCodebooks(lossless=True)})


def _hnsw(m, storage):
    def make(wf):
        from causalkit.systems.ann.hnsw import HNSWWorkflow
        return HNSWWorkflow(m=m, ef_construction=100, storage=storage)
    return make


def _eff(name, description, apply, *checks):
    return Action(name, "any", "structure", ("efficiency",), description, apply, tuple(checks))


EFFICIENCY_ACTIONS = (
    _eff("lists_x2", "twice as many inverted lists (shorter lists to scan)",
         lambda wf: wf.with_nlist(2 * wf.nlist_), _is("ivfpq"), _more_lists_trainable),
    _eff("lists_half", "half as many inverted lists (cheaper routing, fewer lists to probe)",
         lambda wf: wf.with_nlist(wf.nlist_ // 2), _is("ivfpq"), _nlist_at_least(32)),
    _eff("ivf_flat", "IVF with float vectors (no codes, no re-ranking)", _ivf_flat,
         _fits("ivf_flat")),
    _eff("pq_bytes_x2", "twice as many PQ sub-quantizers",
         lambda wf: _rep(wf, "pq_codebooks", m=2 * _pq_m(wf)), _is("ivfpq"), _lossy,
         _double_m_divides, _fits("ivf_pq", lambda wf: 2 * _pq_m(wf))),
    _eff("pq_bytes_half", "half as many PQ sub-quantizers (cheaper scan)",
         lambda wf: _rep(wf, "pq_codebooks", m=_pq_m(wf) // 2), _is("ivfpq"), _lossy,
         _half_m_divides),
    _eff("drop_rerank", "no exact re-ranking",
         lambda wf: _rep(wf, "reranking", k_factor=None), _is("ivfpq"),
         lambda wf, info: None if wf.objects["reranking"].k_factor is not None
         else "not re-ranked"),
    _eff("hnsw16", "HNSW graph, M=16, float vectors", _hnsw(16, "flat"),
         _fits("hnsw_flat", lambda wf: 16)),
    _eff("hnsw32", "HNSW graph, M=32, float vectors", _hnsw(32, "flat"),
         _fits("hnsw_flat", lambda wf: 32)),
    _eff("hnsw16_sq8", "HNSW graph, M=16, 8-bit scalar-quantized vectors", _hnsw(16, "sq8"),
         _fits("hnsw_sq8", lambda wf: 16)),
    _eff("graph_degree_half", "half the graph degree M",
         lambda wf: _rep(wf, "neighbour_pruning", m=wf.objects["neighbour_pruning"].m // 2),
         _is("hnsw"), lambda wf, info: None if wf.objects["neighbour_pruning"].m >= 8
         else "M < 8"),
)
