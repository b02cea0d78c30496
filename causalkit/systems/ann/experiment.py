"""Baseline-vs-auto-design study driver (the systems-driver convention: ``run() -> DataFrame``).

For each data set and family: the default a user would pick (IVF-PQ: ``IVF{sqrt n},PQ{d/4}``,
faiss's own k-means defaults, diagnosed at ``nprobe=16``; HNSW: ``M=16, efConstruction=200``,
diagnosed at ``ef=16``), its diagnosis on the validation queries, the auto-designed workflow,
and Recall@10 / single-thread QPS sweeps of both over the budget grid on the disjoint test
queries. For IVF-PQ the same index configured directly through ``faiss.index_factory`` is swept
too, as the reproduction reference. All engines are real (faiss on this CPU); ``simulated`` is
False in every row.
"""

from __future__ import annotations

import time

import numpy as np
import pandas as pd

from causalkit.systems.ann.metrics import measure_qps, recall_at_k


def sweep(wf, xq: np.ndarray, gt: np.ndarray, k: int = 10, qps_repeats: int = 3,
          budgets=None) -> pd.DataFrame:
    """Recall@k and single-thread QPS of a built workflow at every budget of its grid."""
    rows = []
    for b in (wf.budget_grid() if budgets is None else budgets):
        wf.set_budget(b)
        qps, (_, ids) = measure_qps(lambda q: wf.search(q, k), xq, qps_repeats)
        rows.append({"budget": int(wf.budget), "recall": recall_at_k(ids, gt, k), "qps": qps})
    return pd.DataFrame(rows)


def faiss_reference_sweep(ds, nlist: int, m: int, budgets, k: int = 10,
                          qps_repeats: int = 3) -> pd.DataFrame:
    """The same IVF-PQ configured directly: ``index_factory(d, f"IVF{nlist},PQ{m}")``."""
    import faiss
    index = faiss.index_factory(ds.d, f"IVF{nlist},PQ{m}")
    t0 = time.perf_counter()
    index.train(ds.xb)
    index.add(ds.xb)
    build = time.perf_counter() - t0
    rows = []
    for b in budgets:
        index.nprobe = int(b)
        qps, (_, ids) = measure_qps(lambda q: index.search(q, k), ds.xq, qps_repeats)
        rows.append({"budget": int(b), "recall": recall_at_k(ids, ds.gt, k), "qps": qps,
                     "build_s": build})
    return pd.DataFrame(rows)


def _interp_increasing(x, y, at):
    order = np.argsort(x)
    x, y = np.asarray(x)[order], np.asarray(y)[order]
    inside = (at >= x[0]) & (at <= x[-1])
    return np.where(inside, np.interp(at, x, y), np.nan)


def curve_gains(base: pd.DataFrame, design: pd.DataFrame) -> dict:
    """Recall gain at equal QPS and QPS ratio at equal recall, read on the baseline's points.

    The design curve is interpolated (recall against log QPS; log QPS against recall) at each
    baseline operating point inside its range; the median and the maximum are reported.
    """
    r_at = _interp_increasing(np.log(design["qps"]), design["recall"], np.log(base["qps"]))
    rgain = r_at - base["recall"].to_numpy()
    # QPS at equal recall: design QPS decreases with recall; interpolate log QPS on recall.
    logq = _interp_increasing(design["recall"], np.log(design["qps"]), base["recall"].to_numpy())
    qratio = np.exp(logq) / base["qps"].to_numpy()
    fin_r, fin_q = rgain[np.isfinite(rgain)], qratio[np.isfinite(qratio)]
    return {"recall_gain_at_equal_qps_median": float(np.median(fin_r)) if fin_r.size else np.nan,
            "recall_gain_at_equal_qps_max": float(np.max(fin_r)) if fin_r.size else np.nan,
            "n_equal_qps_points": int(fin_r.size),
            "qps_ratio_at_equal_recall_median": float(np.median(fin_q)) if fin_q.size else np.nan,
            "qps_ratio_at_equal_recall_max": float(np.max(fin_q)) if fin_q.size else np.nan,
            "n_equal_recall_points": int(fin_q.size)}


def _fresh(wf):
    """An unbuilt copy of ``wf`` (same objects, same number of lists)."""
    first = wf.object_names[0]
    return wf.replace(first, wf.objects[first])


class ANNExperiment:
    """Run the SmartANN study (see the module docstring).

    Parameters
    ----------
    datasets : sequence of str
        Names for :func:`causalkit.datasets.load_ann`.
    families : sequence of {"ivfpq", "hnsw"}
    k : int
        Recall@k.
    target_recall : float
        Objective of the auto-design.
    n_base : int, optional
        Base-set size per data set (default: all).
    n_queries : int
        Test and validation queries per data set (each).
    repeats : int
        Repetitions of every (data set, family) pair: diagnosis, auto-design and sweeps (one
        row per configuration and repetition).
    qps_repeats : int
        Timed runs inside one QPS measurement (best kept).
    random_state : int
    """

    def __init__(self, datasets=("sift", "patches"), families=("ivfpq", "hnsw"), k: int = 10,
                 target_recall: float = 0.9, n_base: int | None = None, n_queries: int = 1000,
                 repeats: int = 1, qps_repeats: int = 3, random_state: int = 0,
                 progress: bool = False):
        self.datasets = datasets
        self.families = families
        self.k = k
        self.target_recall = target_recall
        self.n_base = n_base
        self.n_queries = n_queries
        self.repeats = repeats
        self.qps_repeats = qps_repeats
        self.random_state = random_state
        self.progress = progress

    @staticmethod
    def baseline(family: str, d: int):
        """The default a user would pick for ``family``."""
        from causalkit.systems.ann.hnsw import HNSWWorkflow
        from causalkit.systems.ann.ivfpq import IVFPQWorkflow
        if family == "ivfpq":
            return IVFPQWorkflow(nprobe=16, pq_m=max(1, d // 4))
        if family == "hnsw":
            return HNSWWorkflow(m=16, ef_construction=200, ef=16)
        raise ValueError(f"families: unknown family {family!r}; expected 'ivfpq' or 'hnsw'")

    def _log(self, msg: str) -> None:
        if self.progress:
            print(msg, flush=True)

    def run(self, *, out=None, overwrite: bool | None = None) -> pd.DataFrame:
        """Tidy results: one row per (dataset, family, design, budget, repetition).

        Runs through the experiment engine (:func:`causalkit.simulation.run_experiment`), one
        configuration per (dataset, family) and ``repeats`` repetitions each (repetition ``r``
        seeds the auto-design from ``SeedSequence([random_state, r])``; the data set and its
        queries stay fixed by ``random_state``). A results file ``out`` makes the run resumable.
        Repetitions run one after another (QPS is timed single-threaded).

        Side results: ``summary_`` (one row per data set, family and repetition: gains and
        overheads), ``diagnoses_`` and ``actions_`` (tables keyed by ``(dataset, family)``, of
        the first repetition).
        """
        from causalkit.simulation import run_experiment

        configs = [{"dataset": name, "family": family}
                   for name in self.datasets for family in self.families]
        runs = run_experiment(self.run_once, configs, self.repeats, self.random_state, out=out,
                              overwrite=overwrite, progress=False)
        first = runs[runs["rep"] == 0]
        keys = list(zip(first["dataset"], first["family"], strict=True))
        self.diagnoses_ = dict(zip(keys, map(pd.DataFrame, first["diagnosis"]), strict=True))
        self.actions_ = dict(zip(keys, map(pd.DataFrame, first["actions"]), strict=True))
        self.summary_ = pd.DataFrame([{**summary, "repetition": rep} for summary, rep in
                                      zip(runs["summary"], runs["rep"], strict=True)])
        self.results_ = pd.DataFrame([row for rows in runs["curves"] for row in rows])
        return self.results_

    def run_once(self, rng: np.random.Generator, rep: int, *, dataset: str,
                 family: str) -> dict:
        """Diagnose, auto-design and sweep one (data set, family) pair (the engine's
        ``run_once`` protocol): a dict of list-valued entries ``curves`` (rows of the tidy
        results), ``summary`` (gains and overheads), ``diagnosis`` and ``actions`` (tables)."""
        from causalkit.datasets.ann import load_ann
        from causalkit.systems.ann.smartann import SmartANN

        ds = load_ann(dataset, n_base=self.n_base, n_queries=self.n_queries,
                      n_validation=self.n_queries, random_state=self.random_state)
        self._log(f"[{dataset}/{family}] diagnose")
        base_wf = self.baseline(family, ds.d)
        smart = SmartANN(base_wf, k=self.k, target_recall=self.target_recall,
                         random_state=int(rng.integers(2**31 - 1)))
        diag = smart.diagnose(ds.xb, ds.xv, ds.gt_val)
        self._log(diag.summary())
        design = smart.auto_design(ds.xb, ds.xv, ds.gt_val, diagnosis=diag)
        self._log(design.summary())
        # fresh, uncached builds: true build times for the tables
        built_base = _fresh(base_wf).build(ds.xb)
        built_design = _fresh(design.workflow).build(ds.xb)
        build_s = built_base.build_seconds_
        rows, curves = [], {}
        for label, wf in (("baseline", built_base), ("auto-design", built_design)):
            curves[label] = sweep(wf, ds.xq, ds.gt, self.k, self.qps_repeats)
            rows += [self._row(dataset, family, label, wf.describe(), r, rep, wf.build_seconds_,
                               ds) for _, r in curves[label].iterrows()]
        if family == "ivfpq":
            m = base_wf.objects["pq_codebooks"].resolved_m(ds.d)
            ref = faiss_reference_sweep(ds, built_base.nlist_, m, built_base.budget_grid(),
                                        self.k, self.qps_repeats)
            rows += [self._row(dataset, family, "faiss IndexIVFPQ (direct)",
                               f"IVF{built_base.nlist_},PQ{m}", r, rep, float(r["build_s"]), ds)
                     for _, r in ref.iterrows()]
        summary = {
            "dataset": dataset, "family": family, "n_base": len(ds.xb), "d": ds.d,
            "baseline": built_base.describe(), "design": built_design.describe(),
            "bottlenecks": ";".join(diag.bottlenecks),
            "actions_applied": ";".join(design.applied),
            "baseline_build_s": build_s, "diagnosis_s": diag.seconds,
            "design_s": design.seconds,
            "overhead_x_build": (diag.seconds + design.seconds) / build_s,
            "val_baseline_recall": design.baseline.recall,
            "val_baseline_qps": design.baseline.qps,
            "val_design_recall": design.design.recall,
            "val_design_qps": design.design.qps,
            **curve_gains(curves["baseline"], curves["auto-design"]),
            "simulated": False,
        }
        return {"curves": rows, "summary": summary,
                "diagnosis": diag.table.to_dict("records"),
                "actions": design.actions.to_dict("records")}

    def _row(self, name, family, label, desc, r, rep, build_s, ds) -> dict:
        return {"dataset": name, "family": family, "design": label, "config": desc,
                "budget": int(r["budget"]), "recall": float(r["recall"]), "qps": float(r["qps"]),
                "build_s": float(build_s), "repetition": rep, "k": self.k,
                "n_base": len(ds.xb), "d": ds.d, "engine": "faiss", "simulated": False}
