"""SmartANN studies, run through the experiment engine
(:func:`causalkit.simulation.run_experiment`: repetition ``r`` seeds the auto-design from
``SeedSequence([seed, r])``, resumable stores, manifests through
:func:`causalkit.studies.run_named_study`).

``designs``
    For each data set and index family: the default a user would pick (IVF-PQ
    ``IVF{sqrt n},PQ{d/4}``, HNSW ``M=16, efConstruction=200``), its object diagnosis, the
    auto-designed index, Recall@10 vs single-thread QPS sweeps of both on disjoint test queries
    (and, for IVF-PQ, of the same index configured directly with faiss), the recall gain at
    equal QPS, the QPS ratio at equal recall, and diagnosis + design time as a multiple of the
    baseline's build time (see :class:`~causalkit.systems.ann.experiment.ANNExperiment`).
    Every engine is real (faiss on this CPU); nothing is simulated.

The study function has the signature of :mod:`causalkit.studies`
(``reps, seed, n_jobs, backend, scheduler, out, quick``) and returns its summary table.
Repetitions run one after another whatever ``n_jobs`` says: builds and searches are timed on
one thread.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from causalkit.systems.ann.experiment import ANNExperiment

__all__ = ["FULL", "QUICK", "design_runs", "designs"]

#: Sizes of the full study and of the seconds-scale quick run. ``n_base=None`` keeps the whole
#: data set (the text embeddings are small).
FULL = {"datasets": ("sift", "patches", "text"), "families": ("ivfpq", "hnsw"),
        "n_base": {"sift": 30000, "patches": 30000, "text": None}, "n_queries": 1000,
        "reps": 1, "qps_repeats": 3}
QUICK = {"datasets": ("synthetic",), "families": ("ivfpq", "hnsw"),
         "n_base": {"synthetic": 3000}, "n_queries": 100, "reps": 1, "qps_repeats": 2}


def _part(out, tag: str):
    if out is None:
        return None
    out = Path(out)
    return out.with_name(f"{out.stem}_{tag}{out.suffix or '.jsonl'}")


def design_runs(reps=None, seed: int = 2024, out=None, quick: bool = False, datasets=None,
                families=None, progress: bool = False) -> list[ANNExperiment]:
    """Run the ``designs`` study; return one finished :class:`ANNExperiment` per data set
    (its ``results_``, ``summary_``, ``diagnoses_`` and ``actions_``). Each data set is stored
    in ``<out stem>_<dataset>.jsonl``; a rerun resumes."""
    from causalkit.systems.ann.metrics import single_thread

    cfg = QUICK if quick else FULL
    experiments = []
    for name in datasets or cfg["datasets"]:
        exp = ANNExperiment(datasets=(name,), families=tuple(families or cfg["families"]),
                            n_base=cfg["n_base"].get(name), n_queries=cfg["n_queries"],
                            repeats=reps or cfg["reps"], qps_repeats=cfg["qps_repeats"],
                            random_state=seed, progress=progress)
        with single_thread():  # builds as well as searches: timings on one core
            exp.run(out=_part(out, name))
        experiments.append(exp)
    return experiments


def designs(reps=None, seed: int = 2024, n_jobs: int = 1, backend="loky", scheduler=None,
            out=None, quick: bool = False) -> pd.DataFrame:
    """SmartANN: default vs auto-designed IVF-PQ and HNSW indexes (real faiss engines)."""
    runs = design_runs(reps, seed, out, quick)
    summary = pd.concat([exp.summary_ for exp in runs], ignore_index=True)
    cols = ["dataset", "family", "repetition", "n_base", "bottlenecks", "actions_applied",
            "val_baseline_recall", "val_design_recall", "recall_gain_at_equal_qps_median",
            "qps_ratio_at_equal_recall_median", "overhead_x_build", "simulated"]
    return summary[cols]
