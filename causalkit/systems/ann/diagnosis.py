"""Sequential diagnose-and-replace over the ordered objects of an ANN workflow.

For objects ``O1..O8`` in causal order, with ``P`` the current workflow:

1. build ``P_i* = P with O_i := oracle(O_i)`` (only ``O_i..O8`` are re-trained, the rest come
   from the artifact cache);
2. read the object's local metric ``m_i`` on ``P`` against its expectation (registry data);
3. read the oracle headroom on the object's stage bound ``S`` at the same search budget,
   ``H_i = S(P_i*) - S(P)``: probe coverage for the IVF routing objects (2-4), Recall@k
   otherwise; the end-to-end Recall@k headroom is reported as well;
4. ``O_i`` is a bottleneck iff ``m_i`` violates its expectation **and** ``H_i >= delta``;
   a bottleneck is replaced by its oracle (``P := P_i*``) before the walk continues downstream,
   so an upstream bottleneck cannot hide a downstream one.

This is the oracle-intervention reading of an object causal model: ``H_i`` is the effect of
``do(O_i := O_i*)`` on the quality bound that ``O_i`` controls.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import pandas as pd

from causalkit.systems.ann.cache import ArtifactCache
from causalkit.systems.ann.evaluation import EvalContext, evaluate
from causalkit.systems.ann.registry import SPECS


def _metric_functions(family: str) -> dict:
    if family == "ivfpq":
        from causalkit.systems.ann.ivfpq_metrics import METRICS
    else:
        from causalkit.systems.ann.hnsw_metrics import METRICS
    return METRICS


@dataclass
class Diagnosis:
    """Result of :meth:`SmartANN.diagnose`.

    Attributes
    ----------
    table : pandas.DataFrame
        One row per object in causal order: ``object, metric, expected, observed, violated,
        stage, headroom, recall_headroom, flagged, oracle, oracle_qps_ratio, cost_s``.
    baseline : dict
        Recall@k, QPS and stage measures of the workflow as given.
    final : dict
        The same for the workflow with every bottleneck replaced by its oracle.
    oracle_workflow
        That workflow (built).
    seconds : float
        Wall time of the diagnosis.
    """

    family: str
    table: pd.DataFrame
    baseline: dict
    final: dict
    oracle_workflow: object
    seconds: float
    build_seconds: float = float("nan")
    notes: list = field(default_factory=list)

    @property
    def bottlenecks(self) -> list[str]:
        """Names of the flagged objects, upstream first."""
        return self.table.loc[self.table["flagged"], "object"].tolist()

    def overhead(self) -> float:
        """Diagnosis wall time as a multiple of the baseline build time."""
        return self.seconds / self.build_seconds if self.build_seconds else float("nan")

    def summary(self) -> str:
        """The diagnosis table as text."""
        cols = ["object", "observed", "expected", "violated", "stage", "headroom",
                "recall_headroom", "flagged", "cost_s"]
        with pd.option_context("display.width", 200, "display.max_colwidth", 60):
            head = (f"{self.family} diagnosis: recall {self.baseline['recall']:.3f} -> "
                    f"{self.final['recall']:.3f} with bottlenecks replaced by their oracles; "
                    f"bottlenecks: {', '.join(self.bottlenecks) or 'none'}\n")
            return head + self.table[cols].round(4).to_string(index=False)

    def __repr__(self) -> str:
        return self.summary()


def run_diagnosis(workflow, ctx: EvalContext, *, delta: float = 0.01,
                  thresholds: dict | None = None, xt=None,
                  cache: ArtifactCache | None = None) -> Diagnosis:
    """Walk the objects of ``workflow`` in order (see the module docstring)."""
    t0 = time.perf_counter()
    family = workflow.family
    specs = SPECS[family]
    metric_fns = _metric_functions(family)
    thresholds = dict(thresholds or {})
    unknown = set(thresholds) - {s.name for s in specs}
    if unknown:
        raise ValueError(f"thresholds: unknown {family} objects {sorted(unknown)}")
    cache = cache if cache is not None else ArtifactCache()
    current = workflow if hasattr(workflow, "index_") else workflow.build(ctx.xb, xt, cache)
    build_seconds = current.build_seconds_
    base = evaluate(current, ctx)
    cur_eval = base
    rows = []
    for spec in specs:
        t1 = time.perf_counter()
        oracle = current.with_oracle(spec.name).build(ctx.xb, xt, cache)
        oracle_eval = evaluate(oracle, ctx)
        observed = float(metric_fns[spec.name](current, oracle, ctx))
        expected = thresholds.get(spec.name, spec.expected)
        expected = ctx.target_recall if expected is None else float(expected)
        violated = spec.violated(observed, expected)
        headroom = oracle_eval[spec.stage] - cur_eval[spec.stage]
        flagged = bool(violated and headroom >= delta)
        rows.append({
            "object": spec.name, "metric": spec.metric, "expected": expected,
            "direction": spec.direction, "observed": observed, "violated": violated,
            "stage": spec.stage, "headroom": headroom,
            "recall_headroom": oracle_eval["recall"] - cur_eval["recall"],
            "flagged": flagged, "implementation": current.objects[spec.name].label(),
            "oracle": spec.oracle, "oracle_kind": spec.oracle_kind,
            "recall": cur_eval["recall"], "oracle_recall": oracle_eval["recall"],
            "oracle_qps_ratio": oracle_eval["qps"] / cur_eval["qps"],
            "cost_s": time.perf_counter() - t1,
        })
        if flagged:
            current, cur_eval = oracle, oracle_eval
    table = pd.DataFrame(rows)
    return Diagnosis(family=family, table=table, baseline=base, final=cur_eval,
                     oracle_workflow=current, seconds=time.perf_counter() - t0,
                     build_seconds=build_seconds)
