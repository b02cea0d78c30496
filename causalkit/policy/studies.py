"""Simulation studies of target-population policy evaluation and learning.

``reference``: bias, RMSE and CI coverage of the target value estimators (target DR, direct,
IPW, source-only AIPW) on the designs of :mod:`causalkit.policy.dgps`, across shift strengths,
K = 2 and 3 arms, and correctly or wrongly specified nuisances; plus the true target value and
regret of learned policies. ``versus_econml``: target regret and run time of
:class:`~causalkit.policy.TargetPolicyLearner` and of econml's ``DRPolicyTree`` /
``DRPolicyForest`` (which optimise the *source* value) on the same data. ``overlap_grid``:
the overlap checks, the default estimate and the trimmed estimate across the overlap grid of
:data:`causalkit.policy.dgps.OVERLAP_GRID`. ``objective_choice``: target regret of the learner
with the target, source and automatically chosen objective. ``learner_bootstrap``: coverage of
the learned policy's true target value by the learner's two-sample bootstrap and influence
intervals.

Every scenario is one :func:`causalkit.simulation.run_study` call writing its own resumable CSV
(``<out stem>-<scenario>.csv``); the returned table is :func:`causalkit.simulation.summarize`
per scenario, with ``regret`` columns for learners (there ``estimate`` is the true target value
of the learned policy and ``truth`` the unrestricted optimum, so ``bias = -mean regret``).
"""

from __future__ import annotations

import warnings
from contextlib import contextmanager
from functools import partial
from pathlib import Path

import numpy as np
import pandas as pd
from sklearn.dummy import DummyClassifier
from sklearn.linear_model import LinearRegression, LogisticRegression
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import FunctionTransformer, PolynomialFeatures

from causalkit.exceptions import CausalkitWarning
from causalkit.policy import dgps
from causalkit.policy.learner import TargetPolicyLearner
from causalkit.policy.value import METHODS, TargetPolicyValue

__all__ = ["reference", "versus_econml", "overlap_grid", "objective_choice",
           "learner_bootstrap", "nuisance_spec", "SPECS"]

#: Nuisance specifications of the reference study.
SPECS = ("correct", "outcome_wrong", "weights_wrong", "propensity_wrong",
         "outcome_and_weights_wrong")


@contextmanager
def _quietly():
    """Silence CausalkitWarnings of fits inside replications (they would repeat in every one)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", CausalkitWarning)
        yield


def _first_column(X):
    return np.asarray(X)[:, :1]


def nuisance_spec(spec, cv=2, random_state=0):
    """A :class:`TargetPolicyValue` with correctly or wrongly specified nuisances.

    ``outcome_wrong``: OLS on :math:`x_1` only; ``weights_wrong``: a constant domain classifier
    (so :math:`\\hat w \\equiv 1`, i.e. shift ignored); ``propensity_wrong``: a constant
    propensity; the correct models are OLS per arm and logistic regressions on :math:`x`.
    """
    if spec not in SPECS:
        raise ValueError(f"spec must be one of {SPECS}; got {spec!r}")
    outcome = LinearRegression()
    if spec in ("outcome_wrong", "outcome_and_weights_wrong"):
        outcome = make_pipeline(FunctionTransformer(_first_column), LinearRegression())
    propensity = (DummyClassifier(strategy="prior") if spec == "propensity_wrong"
                  else LogisticRegression(max_iter=1000))
    domain = (DummyClassifier(strategy="prior") if spec in ("weights_wrong",
                                                            "outcome_and_weights_wrong")
              else LogisticRegression(max_iter=1000))
    return TargetPolicyValue(outcome, propensity, domain, cv=cv, random_state=random_state)


# ------------------------------------------------------------------ designs and estimators
def _design(rng, *, design, shift, truth, n_source, n_target, outside_share=0.0):
    data = dgps.simulate(design, rng, n_source=n_source, n_target=n_target, shift=shift,
                         outside_share=outside_share)
    data.update(truth=truth, seed=int(rng.integers(2**31 - 1)), cache={})
    return data


def _value_estimator(data, *, spec, policy, method):
    """Fit the value estimator once per data set (shared by all methods) and estimate."""
    if spec not in data["cache"]:
        with _quietly():
            data["cache"][spec] = nuisance_spec(spec, random_state=data["seed"]).fit(
                data["X_source"], data["y"], data["treatment"], X_target=data["X_target"])
    fitted = data["cache"][spec]
    est = fitted.estimate(policy, method)
    est.details.update(ess_fraction=fitted.weight_summary()["ess_fraction"])
    return est


def _overlap_default(data, *, policy):
    """The default fit (``on_poor_overlap="warn"``): estimate, checks, and whether a miss by
    more than 3 SE went unflagged."""
    est = TargetPolicyValue(random_state=data["seed"]).fit(
        data["X_source"], data["y"], data["treatment"], X_target=data["X_target"])
    out = est.estimate(policy)
    report = est.overlap_
    miss = abs(out.value - data["truth"]) > 3 * out.std_error
    out.details.update(flagged=float(report["poor_overlap"]),
                       unsupported_share=report["unsupported_share"],
                       mean_weight=report["mean_weight"], ess_fraction=report["ess_fraction"],
                       miss_3se=float(miss), miss_3se_unflagged=float(miss and
                                                                      not report["poor_overlap"]))
    return out


def _overlap_trimmed(data, *, policy, design, shift, outside_share):
    """``on_poor_overlap="trim"``: the estimate and its influence interval against the value of
    the trimmed target population (Monte Carlo over the overlap region), as ``truth`` and
    ``covered``. A trimmed fit's default interval, the pipeline bootstrap, is 200 refits per
    replication; it is checked on 100 data sets per cell (200 where 30% of the nonlinear
    design's target lies outside) in ``simulations/policy_trim_bootstrap_check.py``."""
    with _quietly():
        est = TargetPolicyValue(on_poor_overlap="trim", random_state=data["seed"]).fit(
            data["X_source"], data["y"], data["treatment"], X_target=data["X_target"])
    out = est.estimate(policy, inference="influence")
    truth = data["truth"]
    if est.n_trimmed_target_ or est.n_trimmed_source_:
        truth = dgps.true_value(design, policy, shift, outside_share=outside_share,
                                region=est.overlap_region, n_mc=200_000, seed=data["seed"])
    lo, hi = out.conf_int()
    return {"estimate": out.value, "std_error": out.std_error, "truth": truth,
            "covered": float(lo <= truth <= hi), "n_trimmed_target": est.n_trimmed_target_}


def _true_policy_value(model, design, shift, optimum):
    value = dgps.true_value(design, model.predict_proba, shift, n_mc=200_000)
    return value, optimum - value


def _learner(data, *, make, design, shift):
    """True target value of a learned policy (``estimate``), regret and its held-out estimate."""
    with _quietly():
        model = make(data)
    value, regret = _true_policy_value(model, design, shift, data["truth"])
    out = {"estimate": value, "regret": regret}
    if hasattr(model, "value_"):
        lo, hi = model.value_.conf_int()
        out.update(estimated_value=model.value_.value, estimated_se=model.value_.std_error,
                   heldout_covers_true_value=float(lo <= value <= hi))
    if hasattr(model, "objective_"):
        out["picked_source"] = float(model.objective_ == "source")
    return out


def _bootstrapped_learner(data, *, policy, n_boot, shift):
    """True target value of the learned policy (``estimate``, so ``bias = -regret``) and whether
    the learner's bootstrap (normal, the default, and percentile) and influence intervals for
    its held-out value hold it."""
    with _quietly():
        learner = TargetPolicyLearner(TargetPolicyValue(cv=2), policy=policy, depth=2,
                                      random_state=data["seed"]).fit(
            data["X_source"], data["y"], data["treatment"], X_target=data["X_target"])
        boot = learner.estimate(inference="bootstrap", n_boot=n_boot, progress=False)
    value, regret = _true_policy_value(learner, "learning", shift, data["truth"])
    lo, hi = boot.conf_int()
    percentile_lo, percentile_hi = boot.conf_int(method="percentile")
    influence_lo, influence_hi = learner.value_.conf_int()
    return {"estimate": value, "regret": regret, "boot_value": boot.value,
            "boot_se": boot.std_error, "boot_ci_length": hi - lo,
            "influence_se": learner.value_.std_error,
            "covers_true_value": float(lo <= value <= hi),
            "percentile_covers_true_value": float(percentile_lo <= value <= percentile_hi),
            "influence_covers_true_value": float(influence_lo <= value <= influence_hi)}


class _Proba:
    """Adapter exposing econml's ``predict_proba`` with the policy-matrix column order."""

    def __init__(self, fitted):
        self.fitted = fitted

    def predict_proba(self, X):
        return self.fitted.predict_proba(X)


def _ck_learner(data, *, policy, outcome="linear", **kwargs):
    """causalkit learner with a linear or quadratic outcome model, 2-fold cross-fitting."""
    outcome_model = LinearRegression() if outcome == "linear" else make_pipeline(
        PolynomialFeatures(2), LinearRegression())
    value = TargetPolicyValue(outcome_model, cv=2, random_state=data["seed"])
    return TargetPolicyLearner(value, policy=policy, random_state=data["seed"], **kwargs).fit(
        data["X_source"], data["y"], data["treatment"], X_target=data["X_target"])


def _econml(data, *, forest):
    from econml.policy import DRPolicyForest, DRPolicyTree

    common = dict(model_regression=make_pipeline(PolynomialFeatures(3), LinearRegression()),
                  model_propensity=LogisticRegression(max_iter=1000), cv=2, max_depth=2,
                  min_samples_leaf=5, honest=False, min_balancedness_tol=0.5,
                  random_state=data["seed"])
    model = (DRPolicyForest(n_estimators=100, n_jobs=1, **common) if forest
             else DRPolicyTree(**common))
    model.fit(data["y"], data["treatment"], X=data["X_source"])
    return _Proba(model)


def _out_path(out, scenario):
    if out is None:
        return None
    out = Path(out)
    return out.with_name(f"{out.stem}-{scenario}{out.suffix or '.csv'}")


def _run(scenario, design_fn, estimators, reps, seed, n_jobs, backend, scheduler, out):
    from causalkit.simulation import run_study, summarize

    results = run_study(design_fn, estimators, reps, seed, n_jobs=n_jobs, backend=backend,
                        scheduler=scheduler, out=_out_path(out, scenario))
    summary = summarize(results)
    if "regret" in results:
        summary["regret"] = -summary["bias"]
        summary["regret_sd"] = summary["sd"]
    summary.insert(0, "scenario", scenario)
    return summary


# ---------------------------------------------------------------------------- studies
def _reference_scenarios(quick):
    if quick:
        return [("estimation", "moderate", spec, "optimal")
                for spec in ("correct", "outcome_wrong")]
    rows = [("estimation", "moderate", spec, pol) for spec in SPECS
            for pol in ("optimal", "soft")]
    rows += [("estimation", shift, spec, "optimal") for shift in ("none", "strong")
             for spec in ("correct", "outcome_wrong")]
    rows += [("estimation3", "moderate", spec, "optimal") for spec in ("correct", "outcome_wrong")]
    rows += [("estimation3", "strong", "correct", "optimal")]
    return rows


def reference(reps=None, seed=2024, n_jobs=1, backend="loky", scheduler=None, out=None,
              quick=False):
    """Reference study: value estimators across shifts, arms and nuisance specifications,
    then learned-policy regret on the ``learning`` design.

    Full size: 200 replications per scenario, n_S = n_T = 2000, 2-fold cross-fitting
    (learning part: 40 replications, n_S = n_T = 3000). ``quick``: 20 replications, n = 500.
    """
    n = 500 if quick else 2000
    reps_value = reps or (20 if quick else 200)
    tables = []
    for design, shift, spec, pol in _reference_scenarios(quick):
        m = dgps.SHIFTS[shift]
        policy = (dgps.optimal_policy if pol == "optimal" else dgps.soft_policy)(design)
        truth = dgps.true_value(design, policy, m)
        design_fn = partial(_design, design=design, shift=m, truth=truth, n_source=n,
                            n_target=n)
        estimators = {method: partial(_value_estimator, spec=spec, policy=policy, method=method)
                      for method in METHODS}
        table = _run(f"{design}-{shift}-{spec}-{pol}", design_fn, estimators, reps_value, seed,
                     n_jobs, backend, scheduler, out)
        table.insert(1, "design", design)
        table.insert(2, "shift", shift)
        table.insert(3, "spec", spec)
        table.insert(4, "policy", pol)
        tables.append(table)
    tables.append(_learning_table(reps or (4 if quick else 40), seed, n_jobs, backend, scheduler,
                                  out, quick, econml=False, prefix="reference-learning"))
    return _save(pd.concat(tables), out)


def _save(summary, out, figure=True):
    """Write ``<out stem>-summary.csv`` and (``figure``) a figure next to the replication
    files."""
    if out is not None:
        from causalkit.policy.plots import plot_study_summary

        out = Path(out)
        summary.to_csv(out.with_name(f"{out.stem}-summary.csv"))
        if not figure:
            return summary
        fig = plot_study_summary(summary)
        fig.savefig(out.with_name(f"{out.stem}-summary.png"), dpi=110, bbox_inches="tight")
        import matplotlib.pyplot as plt
        plt.close(fig)
    return summary


def _learning_table(reps, seed, n_jobs, backend, scheduler, out, quick, *, econml, prefix):
    n = 600 if quick else 3000
    shifts = ("none", "strong") if quick else tuple(dgps.LEARNING_SHIFTS)
    tables = []
    for shift in shifts:
        m = dgps.LEARNING_SHIFTS[shift]
        optimum = dgps.true_value("learning", None, m)
        design_fn = partial(_design, design="learning", shift=m, truth=optimum, n_source=n,
                            n_target=n)
        makers = {"ck_tree": partial(_ck_learner, policy="tree", outcome="poly2"),
                  "ck_linear": partial(_ck_learner, policy="linear", outcome="poly2")}
        if econml:
            makers["econml_tree"] = partial(_econml, forest=False)
            makers["econml_forest"] = partial(_econml, forest=True)
        estimators = {name: partial(_learner, make=make, design="learning", shift=m)
                      for name, make in makers.items()}
        table = _run(f"{prefix}-{shift}", design_fn, estimators, reps, seed, n_jobs, backend,
                     scheduler, out)
        table.insert(1, "design", "learning")
        table.insert(2, "shift", shift)
        tables.append(table)
    frame = pd.concat(tables)
    if econml:
        ref = frame.loc[frame.index == "econml_tree"].set_index("shift")["regret"]
        frame["regret_ratio_vs_econml_tree"] = frame["regret"] / frame["shift"].map(ref)
    return frame


def versus_econml(reps=None, seed=2024, n_jobs=1, backend="loky", scheduler=None, out=None,
                  quick=False):
    """Target regret and run time: causalkit learners (target objective) vs econml's
    ``DRPolicyTree`` / ``DRPolicyForest`` (source objective, depth 2) on the ``learning`` design.

    Same data, same policy class for the trees (depth 2, min 5 rows per leaf, no honesty, no
    balance constraint). Full size: 40 replications per shift, n_S = n_T = 3000.
    ``regret_ratio_vs_econml_tree`` divides each learner's mean regret by the econml tree's.
    """
    return _save(_learning_table(reps or (4 if quick else 40), seed, n_jobs, backend, scheduler,
                                 out, quick, econml=True, prefix="econml"), out)


def overlap_grid(reps=None, seed=2024, n_jobs=1, backend="loky", scheduler=None, out=None,
                 quick=False):
    """Overlap grid: warnings, misses and trimmed coverage from no shift to no overlap.

    For the ``estimation`` (linear) and ``nonlinear`` designs and every cell of
    :data:`causalkit.policy.dgps.OVERLAP_GRID` (target mean of :math:`x_1` shifted 0, 1, 2, 4,
    8 SD; 10% or 30% of the target moved 5 SD out), the value of the optimal policy is estimated
    by the default fit (``default``: coverage of the target value, the share of fits flagged,
    ``mean_miss_3se_unflagged``: misses by more than 3 SE that no check flagged) and by
    ``on_poor_overlap="trim"`` (``trim``: coverage of the value of the trimmed target
    population by the influence interval; at 8 SD the region is empty and the fit is an error
    row). Full size: 200 replications per cell, n_S = n_T = 2000; ``quick``: 10 replications,
    n = 1000.
    """
    n = 1000 if quick else 2000
    reps = reps or (10 if quick else 200)
    tables = []
    for design in ("estimation", "nonlinear"):
        policy = dgps.optimal_policy(design)
        for case, (shift, outside) in dgps.OVERLAP_GRID.items():
            truth = dgps.true_value(design, policy, shift, outside_share=outside)
            design_fn = partial(_design, design=design, shift=shift, truth=truth, n_source=n,
                                n_target=n, outside_share=outside)
            estimators = {"default": partial(_overlap_default, policy=policy),
                          "trim": partial(_overlap_trimmed, policy=policy, design=design,
                                          shift=shift, outside_share=outside)}
            label = case.replace(" ", "").replace("%", "pct")
            table = _run(f"overlap-{design}-{label}", design_fn, estimators, reps, seed,
                         n_jobs, backend, scheduler, out)
            table.insert(1, "design", design)
            table.insert(2, "case", case)
            tables.append(table)
    return _save(pd.concat(tables), out, figure=False)


def objective_choice(reps=None, seed=2024, n_jobs=1, backend="loky", scheduler=None, out=None,
                     quick=False):
    """Target regret of :class:`~causalkit.policy.TargetPolicyLearner` by objective.

    On the ``learning`` design under strong shift, depth-1 and depth-2 trees and the linear
    rule are learned with ``objective="target"``, ``"source"`` and ``"auto"`` (quadratic
    outcome model, 2-fold cross-fitting). ``mean_picked_source`` is the share of fits that used
    the source objective (for ``auto``: the share that chose it). Full size: 40 replications,
    n_S = n_T = 3000;
    ``quick``: 4 replications, n = 600.
    """
    n = 600 if quick else 3000
    reps = reps or (4 if quick else 40)
    m = dgps.LEARNING_SHIFTS["strong"]
    optimum = dgps.true_value("learning", None, m)
    design_fn = partial(_design, design="learning", shift=m, truth=optimum, n_source=n,
                        n_target=n)
    classes = {"tree1": dict(policy="tree", depth=1), "tree2": dict(policy="tree", depth=2),
               "linear": dict(policy="linear")}
    tables = []
    for label, kwargs in classes.items():
        estimators = {objective: partial(_learner, make=partial(_ck_learner, outcome="poly2",
                                                                objective=objective, **kwargs),
                                         design="learning", shift=m)
                      for objective in ("target", "source", "auto")}
        table = _run(f"objective-{label}", design_fn, estimators, reps, seed, n_jobs, backend,
                     scheduler, out)
        table.insert(1, "policy_class", label)
        tables.append(table)
    return _save(pd.concat(tables), out, figure=False)


def learner_bootstrap(reps=None, seed=2024, n_jobs=1, backend="loky", scheduler=None, out=None,
                      quick=False):
    """Coverage of the learned policy's true target value by the learner's two-sample
    bootstrap (``estimate(inference="bootstrap")``, the default: the value estimator refitted
    on each resample, the fold policies held fixed), under strong shift.

    On the ``learning`` design a depth-2 tree is learned (target objective, default nuisance
    models, 2-fold cross-fitting); ``mean_covers_true_value`` is the share of replications whose
    bootstrap interval (normal with the bootstrap SE, 200 resamples) holds the learned policy's
    true target value (Monte Carlo over the known outcome model, 200,000 draws),
    ``mean_percentile_covers_true_value`` the same for the percentile interval of those
    resamples and ``mean_influence_covers_true_value`` for the held-out influence-function
    interval of ``value_``. Full size: 200 replications, n_S = n_T = 1000; ``quick``: 4
    replications, n = 300, 20 resamples.
    """
    n, n_boot = (300, 20) if quick else (1000, 200)
    reps = reps or (4 if quick else 200)
    m = dgps.LEARNING_SHIFTS["strong"]
    optimum = dgps.true_value("learning", None, m)
    design_fn = partial(_design, design="learning", shift=m, truth=optimum, n_source=n,
                        n_target=n)
    estimators = {"tree2_bootstrap": partial(_bootstrapped_learner, policy="tree",
                                             n_boot=n_boot, shift=m)}
    table = _run("bootstrap-tree2", design_fn, estimators, reps, seed, n_jobs, backend,
                 scheduler, out)
    return _save(table, out, figure=False)
