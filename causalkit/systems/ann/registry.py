"""Editable data: the eight objects of each family, their expected behaviour and thresholds.

Every object has one primary metric with an expectation ``observed <direction> expected``; a
violation plus an oracle headroom of at least ``delta`` makes the object a bottleneck (see
:mod:`causalkit.systems.ann.diagnosis`). ``stage`` says which quality bound the headroom is read
on: ``"coverage"`` (fraction of the true k-NN that reach the candidate set, the causal ceiling
for everything downstream of IVF routing) or ``"recall"`` (end-to-end Recall@k). ``expected=None``
means "the target recall".

The published thresholds of the method could not be obtained; these defaults follow faiss and
hnswlib guidance (39 points per centroid, M-NN recall >= 0.9 at ``ef = efConstruction``) and are
meant to be edited, e.g. ``SmartANN(wf, thresholds={"pq_codebooks": 0.2})``.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ObjectSpec:
    """One object of the causal chain: its metric, expectation and oracle."""

    name: str
    metric: str
    expected: float | None
    direction: str
    stage: str
    oracle: str
    oracle_kind: str = "exact"

    def violated(self, observed: float, expected: float) -> bool:
        """Whether ``observed`` breaks the expectation (NaN never does)."""
        if observed != observed:
            return False
        return observed > expected if self.direction == "<=" else observed < expected


IVFPQ_SPECS = (
    ObjectSpec("rotation", "sub-block variance ratio (max/min over the PQ sub-spaces)", 2.0, "<=",
               "recall", "OPQ rotation (orthonormal, PQ-distortion optimal)", "reference"),
    ObjectSpec("coarse_kmeans", "k-means objective excess over converged k-means", 0.02, "<=",
               "coverage", "k-means run to convergence (50 iterations)", "reference"),
    ObjectSpec("assignment", "share of base vectors not in their nearest list", 0.001, "<=",
               "coverage", "exact argmin over the centroids"),
    ObjectSpec("probing", "probe coverage of the true k-NN at nprobe", None, ">=",
               "coverage", "exhaustive probing (nprobe = nlist)"),
    ObjectSpec("residual", "energy of the encoded vectors / energy of the centred data", 0.7, "<=",
               "recall", "residual encoding"),
    ObjectSpec("pq_codebooks", "relative PQ distortion E|r-q(r)|^2 / E|r|^2", 0.3, "<=",
               "recall", "lossless codes (the vectors themselves)"),
    ObjectSpec("distance_tables", "top-k agreement with un-filtered ADC", 0.99, ">=",
               "recall", "ADC without filtering (exact distance to the reconstruction)"),
    ObjectSpec("reranking", "Recall@k gain of exact re-ranking of the top 4k", 0.02, "<=",
               "recall", "exact distances for every probed candidate"),
)

HNSW_SPECS = (
    ObjectSpec("levels", "|ln(upper-layer share x M)| (0 when the share is 1/M)", 0.693, "<=",
               "recall", "geometric levels with mL = 1/ln(M)", "reference"),
    ObjectSpec("entry_point", "share of layer-0 nodes reachable from the entry point", 0.999, ">=",
               "recall", "search seeded at each query's exact nearest neighbour"),
    ObjectSpec("upper_descent", "90th pct of dist(landing node) / dist(exact upper-layer NN)",
               2.0, "<=", "recall",
               "layer-0 search seeded at the exact NN among upper-layer nodes"),
    ObjectSpec("build_candidates", "M-NN recall of a search with ef = efConstruction", 0.9, ">=",
               "recall", "construction with a larger candidate list", "reference"),
    ObjectSpec("neighbour_pruning", "share of layer-0 nodes with out-degree < M/4", 0.01, "<=",
               "recall", "twice the neighbour budget M", "reference"),
    ObjectSpec("reverse_links", "share of layer-0 nodes with in-degree 0", 0.001, "<=",
               "recall", "graph repair: every node linked from its nearest reachable node"),
    ObjectSpec("beam_search", "Recall@k at ef", None, ">=",
               "recall", "exhaustive beam (ef = number of vectors)"),
    ObjectSpec("distances", "Recall@k gain of exact re-ranking of the top 4k", 0.02, "<=",
               "recall", "exact distances on stored float vectors"),
)

SPECS = {"ivfpq": IVFPQ_SPECS, "hnsw": HNSW_SPECS}
