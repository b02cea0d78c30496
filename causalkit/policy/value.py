"""Value of a treatment policy in a target population that has covariates only.

Setting: a labelled source sample :math:`(X_i, A_i, Y_i)_{i \\le n_S}` and an unlabelled target
sample :math:`(X_j)_{j \\le n_T}` with shifted covariates but the same outcome model (covariate
shift: :math:`E[Y(a) \\mid X, \\text{target}] = E[Y(a) \\mid X, \\text{source}]`). The estimand is
the target value :math:`V_T(\\pi) = E_T[\\sum_a \\pi(a \\mid X) Y(a)]`.

Nuisances: the source outcome regression :math:`\\mu(a, x)`, the source propensity
:math:`e(a \\mid x)` and the density ratio :math:`w(x) = p_T(x)/p_S(x)`, obtained from a domain
classifier :math:`\\rho(x) = P(\\text{source} \\mid x)` fitted on the stacked samples as
:math:`w(x) = \\{(1-\\rho(x))/\\rho(x)\\} \\cdot n_S/n_T` (the odds factor uses the training-fold
sizes).

The estimator is the one-step (efficient influence function) form implied by the identification
formula :math:`V_T(\\pi) = E_T[\\sum_a \\pi(a|X)\\mu(a, X)]`, cross-fitted over both samples;
the within-arm normalisation of the weights (``normalize=True``) turns the weighted term of
each arm into a ratio (Hajek) estimator, whose influence function centres the weighted
residuals at their weighted mean (class Notes).

Reference: Liu, Yang, Tian, Guo & Wu (2025), "Optimal Policy Adaptation under Covariate Shift",
IJCAI 2025 (arXiv:2501.08067); Uehara, Kato & Yasui (2020), "Off-Policy Evaluation and Learning
for External Validity under a Covariate Shift", NeurIPS 2020.
"""

from __future__ import annotations

import numbers
import warnings

import numpy as np
import pandas as pd
from joblib import Parallel, delayed
from sklearn.ensemble import HistGradientBoostingClassifier
from sklearn.linear_model import LinearRegression, LogisticRegression
from sklearn.metrics import roc_auc_score
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler
from sklearn.utils.validation import check_is_fitted

from causalkit._base import CausalEstimator
from causalkit._validation import check_array, check_n_jobs, check_positive_int, seed_int
from causalkit.exceptions import OverlapWarning
from causalkit.inference import Estimate, contrast
from causalkit.nuisance import (
    clip_probabilities,
    default_if_none,
    fit_clone,
    make_folds,
    predict_positive_proba,
    seeded,
)
from causalkit.policy._data import policy_data
from causalkit.policy._policies import one_hot, policy_matrix

__all__ = ["TargetPolicyValue", "METHODS"]

#: Estimators offered by :meth:`TargetPolicyValue.estimate`.
METHODS = ("dr", "direct", "ipw", "source_only")

_METHOD_LABELS = {"dr": "Target DR (efficient)", "direct": "Direct (outcome regression)",
                  "ipw": "IPW (density ratio x propensity)",
                  "source_only": "Source-only AIPW (ignores shift)"}

#: Methods whose influence-function SE treats the fitted nuisances as known: it omits their
#: estimation error, so its interval is conditional on them (the pipeline bootstrap is not).
_CONDITIONAL = ("direct", "ipw")
_CONDITIONAL_NOTE = "conditional on the fitted nuisances"

#: Estimand name when ``on_poor_overlap="trim"`` has trimmed the samples.
TRIMMED_ESTIMAND = "target policy value in the overlap region"

#: Share of the source sample below which the weights' effective sample size is "weak overlap".
MIN_ESS_FRACTION = 0.1
#: A target unit whose estimated density ratio exceeds this bound is "outside the source
#: support" (the source has less than 1/20 of the target's density there).
MAX_DENSITY_RATIO = 20.0
#: Largest estimated density ratio kept by ``on_poor_overlap="trim"`` (the overlap region).
TRIM_DENSITY_RATIO = 20.0
#: Per-column quantiles of the source that bound its "support box" (its range).
SUPPORT_QUANTILES = (0.0, 1.0)
#: Per-column source quantiles that bound the overlap region kept by ``on_poor_overlap="trim"``
#: (tighter than the range, which a single outlying source unit can stretch).
TRIM_QUANTILES = (0.001, 0.999)
#: Share of target units outside the source support (by density ratio or box) that is "poor
#: overlap".
MAX_UNSUPPORTED_SHARE = 0.05
#: Range of the mean estimated density ratio over the source (its population value is one) that
#: is not flagged.
MEAN_WEIGHT_RANGE = (2.0 / 3.0, 1.5)
#: Values of ``on_poor_overlap``.
ON_POOR_OVERLAP = ("warn", "raise", "trim")
#: Named domain models.
DOMAIN_MODELS = ("logistic", "boosting")
#: Smallest domain probability used for the unclipped density ratio (avoids division by zero).
_TINY = 1e-12


def _default_regressor():
    return make_pipeline(StandardScaler(), LinearRegression())


def _default_classifier():
    return make_pipeline(StandardScaler(), LogisticRegression(max_iter=1000))


def _domain_classifier(model):
    """The domain model for ``domain_model`` (``None`` and ``"logistic"``: the default)."""
    if model is None or (isinstance(model, str) and model == "logistic"):
        return _default_classifier()
    if isinstance(model, str) and model == "boosting":
        return HistGradientBoostingClassifier()
    return model


def _raw_ratio(rho, factor):
    """Density ratio :math:`(1-\\rho)/\\rho \\cdot factor` without the domain clip."""
    rho = np.clip(rho, _TINY, 1.0)
    return (1.0 - rho) / rho * factor


def _ess(w):
    """Kish effective sample size :math:`(\\sum w)^2/\\sum w^2` (0 for all-zero weights)."""
    total = np.sum(w ** 2)
    return float(w.sum() ** 2 / total) if total > 0 else 0.0


class _Identity:
    """Bootstrap-cache key of a policy object: equal only to itself, and holding a reference
    so that its ``id`` cannot be reused while the key lives."""

    __slots__ = ("obj",)

    def __init__(self, obj):
        self.obj = obj

    def __hash__(self):
        return id(self.obj)

    def __eq__(self, other):
        return isinstance(other, _Identity) and other.obj is self.obj


def _target_key(policy, method):
    """Cache key of ``(policy, method)``: arm labels by value, other policies by identity."""
    if isinstance(policy, numbers.Real) and not isinstance(policy, bool):
        return (float(policy), method)
    return (_Identity(policy), method)


class TargetPolicyValue(CausalEstimator):
    """Doubly robust, efficient estimator of a policy's value in a covariate-shifted target.

    Parameters
    ----------
    outcome_model : scikit-learn regressor or Pipeline, optional
        Source outcome regression :math:`\\mu(a, x)`; default
        ``make_pipeline(StandardScaler(), LinearRegression())``: least squares, whose fit does
        not depend on the covariates' units (scikit-learn's ``LinearRegression`` alone
        truncates singular values below ``tol`` times the largest, so a covariate in much
        larger units than the others silently drops them).
    propensity_model : scikit-learn classifier or Pipeline, optional
        Source propensity :math:`e(a \\mid x)` (multi-class for K arms); default
        ``make_pipeline(StandardScaler(), LogisticRegression(max_iter=1000))``.
    domain_model : scikit-learn classifier, Pipeline, "logistic" or "boosting", optional
        Domain classifier :math:`\\rho(x) = P(\\text{source} \\mid x)` on the stacked samples;
        default (``None`` or ``"logistic"``): the same standardised logistic regression, whose
        log-odds are linear in :math:`x` (exact for Gaussian samples that differ in their mean).
        ``"boosting"``: scikit-learn's ``HistGradientBoostingClassifier`` (log-loss, so its
        probabilities are calibrated), which also detects shifts in spread, interactions and
        partial non-support that the linear log-odds smooth over. The density ratio is the
        classifier's odds, so use calibrated probabilities.
    cv : int or scikit-learn splitter
        Cross-fitting folds, built by ``causalkit.nuisance.make_folds`` on each sample
        (the source stratified on the arm); both samples are split into the same number of
        folds, so no source or target row is scored by a model that saw it.
    min_propensity : float
        Lower clip of :math:`\\hat e(a \\mid x)`.
    domain_clip : float
        :math:`\\hat\\rho` is clipped to ``[domain_clip, 1 - domain_clip]``.
    max_weight : float, optional
        Cap on the density ratio. Capping trades variance for bias when the outcome model is
        misspecified; ``None`` (default) leaves the weights uncapped.
    normalize : bool
        Normalise the residual weights :math:`\\hat w(X_i)/\\hat e(A_i|X_i)` within each arm
        to average one over the source sample (their population mean is
        :math:`E_S[w(X)1\\{A=a\\}/e(a|X)] = 1`), i.e. Hajek-type ratio weights; the same for
        the source-only weights :math:`1/\\hat e`. Double robustness and the influence function
        are unchanged (the normaliser tends to one when :math:`\\hat w, \\hat e` are right, and
        the residuals have mean zero when :math:`\\hat\\mu` is); in finite samples it removes
        the upward bias of estimated inverse-odds weights. ``False`` gives the plain
        Horvitz-Thompson form shown in the Notes section.
    per_arm : bool
        Fit one outcome model per arm (default) instead of one model on ``[X, one-hot(A)]``.
    on_poor_overlap : {"warn", "raise", "trim"}
        What a fit does when the overlap checks fail (Notes): ``"warn"`` (default) issues an
        :class:`~causalkit.exceptions.OverlapWarning` naming the unsupported target units and
        the covariates they stray on; ``"raise"`` raises a ``ValueError`` with the same message;
        ``"trim"`` restricts both samples to the overlap region (:meth:`overlap_region`) and
        refits, which changes the estimand to the target value *within that region*: the
        summaries say so and ``n_trimmed_source_``/``n_trimmed_target_`` count the dropped
        units. A fit that trimmed defaults to the pipeline bootstrap interval (Notes).
    n_jobs : int or None
        Threads that fit the cross-fitting folds side by side (each fold's outcome, propensity
        and domain models; joblib's convention: None is 1 unless a ``joblib.parallel_config``
        says otherwise, -1 is every core). The fit is the same for any value. Threads pay with
        the default linear models, not with models that run their own threads
        (``domain_model="boosting"``); ``benchmarks/policy.py`` times both. Bootstrap
        replicates refit on one thread each.
    random_state : None, int or numpy SeedSequence
        Seeds the two fold splits, the nuisance models whose ``random_state`` is unset and the
        bootstrap, each through its own stream
        (:meth:`~causalkit._base.CausalEstimator.seed_for`).

    Attributes
    ----------
    arms_ : ndarray of shape (K,)
        Sorted treatment arms of the source sample (column order of every policy matrix).
    mu_source_, mu_target_ : ndarray of shape (n_S, K), (n_T, K)
        Out-of-fold :math:`\\hat\\mu(a, X)` on the source and target rows.
    propensity_ : ndarray of shape (n_S, K)
        Out-of-fold, clipped :math:`\\hat e(a \\mid X_i)`.
    weights_ : ndarray of shape (n_S,)
        Out-of-fold density ratio :math:`\\hat w(X_i)` of the source rows.
    domain_source_, domain_target_ : ndarray
        Out-of-fold :math:`\\hat\\rho` on both samples (for the domain AUC).
    residual_weights_ : ndarray of shape (n_S,)
        :math:`\\hat w(X_i)/\\hat e(A_i|X_i)`, normalised within arms when ``normalize``.
    inverse_propensity_ : ndarray of shape (n_S,)
        :math:`1/\\hat e(A_i|X_i)`, normalised within arms when ``normalize``.
    residuals_ : ndarray of shape (n_S,)
        :math:`Y_i - \\hat\\mu(A_i, X_i)`.
    folds_ : dict
        ``{"source": [...], "target": [...]}``: the ``(train, test)`` index pairs of each sample;
        fold ``k`` trains on both samples' ``train`` rows and scores both ``test`` sets.
    source_folds_, target_folds_ : ndarray of int
        Fold of each row.
    score_units_ : ndarray of int or None
        The unit each row of :meth:`score_matrix` copies (``None``: the data as given). On a
        bootstrap resample, later splits of the score rows (the learner's held-out folds) keep a
        unit's copies together through it.
    outcome_models_, propensity_models_, domain_models_ : list
        Fitted nuisance models per fold (outcome: a list per arm when ``per_arm``).
    feature_names_in_ : ndarray of str
        Covariate names (DataFrame columns, else ``x0, x1, ...``).
    overlap_ : dict
        The overlap checks of the (final) fit, as returned by :meth:`overlap_report`.
    raw_weights_, raw_weights_target_ : ndarray of shape (n_S,), (n_T,)
        Out-of-fold density ratio without the domain clip or the cap, on both samples (the
        overlap checks use it).
    support_models_ : list of (classifier, float)
        The first fit's fold domain models and odds factors, which define
        :meth:`overlap_region` (they are the ``domain_models_`` unless trimming refitted).
    support_box_, trim_box_ : ndarray of shape (2, p)
        Per-column source quantiles ``causalkit.policy.value.SUPPORT_QUANTILES`` (the range:
        support check) and ``causalkit.policy.value.TRIM_QUANTILES`` (the overlap region), before
        any trimming.
    n_trimmed_source_, n_trimmed_target_ : int
        Units dropped by ``on_poor_overlap="trim"`` (0 otherwise).

    Notes
    -----
    With out-of-fold nuisances, the target-DR ("SE") estimate is

    .. math:: \\hat V(\\pi) = \\frac{1}{n_T}\\sum_{j} \\sum_a \\pi(a|X_j)\\hat\\mu(a, X_j)
              + \\frac{1}{n_S}\\sum_i \\hat w(X_i) \\frac{\\pi(A_i|X_i)}{\\hat e(A_i|X_i)}
              \\{Y_i - \\hat\\mu(A_i, X_i)\\},

    unbiased to first order when :math:`\\hat\\mu` is correct or when both :math:`\\hat w` and
    :math:`\\hat e` are. Its two-sample influence function gives
    :math:`\\widehat{se}^2 = s^2_T/n_T + s^2_S/n_S` (variances of the two summands), which
    attains the semiparametric efficiency bound. With ``normalize=True`` (default) the weights
    :math:`r_i = \\hat w(X_i)/\\hat e(A_i|X_i)` are divided by their mean within each arm, so
    the source term is a sum over arms of ratios :math:`\\hat\\theta_a = \\sum_{A_i=a} r_i u_i /
    \\sum_{A_i=a} r_i` with :math:`u_i = \\pi(A_i|X_i)\\{Y_i - \\hat\\mu(A_i, X_i)\\}`, and
    :math:`s^2_S` is the variance of the ratio's influence values
    :math:`\\tilde r_i (u_i - \\hat\\theta_{A_i})` (delta method). The difference matters when
    the outcome model is wrong: then :math:`\\theta_a \\ne 0` and the uncentred scores add
    about :math:`\\theta_a^2 \\mathrm{Var}(\\tilde r)/n_S` to the variance, which over-covers
    (the ``policy-overlap`` study's nonlinear design). ``Estimate.influence`` stacks the influence
    values of the source rows, then the target rows, scaled to the stacked size
    :math:`n = n_S + n_T` so that :func:`causalkit.inference.contrast` applies directly.

    ``inference="bootstrap"`` in :meth:`estimate` is the two-sample pipeline bootstrap: source
    rows are resampled within arms and target rows within the target, every nuisance is
    refitted, and the same policy is evaluated on each resample.

    Covariates that are constant or collinear on the stacked samples give a
    :class:`~causalkit.exceptions.RankDeficientWarning` naming them. The estimate depends on
    row order only through the random fold split.

    **Overlap checks.** Every fit runs three checks on the *unclipped* density ratio
    :math:`\\tilde w = (1-\\hat\\rho)/\\hat\\rho \\cdot n_S/n_T` (out of fold); failing any one is
    poor overlap (``on_poor_overlap``):

    1. *target-side support*: the share of target units with :math:`\\tilde w(X_j) >`
       ``causalkit.policy.value.MAX_DENSITY_RATIO`` (= 20: the source density there is under
       1/20 of the target's) or outside the source's range in some column
       (``causalkit.policy.value.SUPPORT_QUANTILES``) exceeds
       ``causalkit.policy.value.MAX_UNSUPPORTED_SHARE`` (= 5%);
    2. *mass*: the mean of :math:`\\tilde w` over the source lies outside
       ``causalkit.policy.value.MEAN_WEIGHT_RANGE`` (2/3, 3/2); its population value
       :math:`E_S[w(X)] = P_T(p_S(X) > 0)` is the target share inside the source support
       (one under overlap), so it falls as the target leaves the source;
    3. *effective sample size*: :math:`\\widehat{ESS}/n_S < 0.1`, with
       :math:`\\widehat{ESS} = (\\sum \\tilde w)^2 / \\sum \\tilde w^2` on the unclipped weights.

    The effective sample size alone goes silent under severe shift: when the target leaves the
    source support every source weight is near zero and the weights are nearly equal, so their
    ESS is large; the first two checks measure the target mass the source cannot represent and
    grow as the shift grows. The bounds were chosen on the ``"estimation"`` design of
    ``causalkit.policy.dgps`` (mean shifts of 0.5 to 3 SD in :math:`x_1`, seeds 100--119):
    with :math:`n_S = n_T = 2000` no fit was flagged at shifts up to 1 SD and every fit from 1.5 SD
    on (at :math:`n_S = n_T = 500`, 3 of 20 fits at 1 SD were flagged: with few units the
    estimated density ratio is noisier); the overlap-grid tests use other seeds and designs.

    What the checks cannot see is a wrong outcome model where the target lives. Inside the
    support the estimate then leans on the density-ratio weights, and its influence SE falls
    short. On draws no study uses (``simulations/policy_misspecified_outcome_check.py``, 400 per
    cell, n_S = n_T = 2000, ``simulations/results/policy/policy_misspecified_outcome_check.csv``)
    the ``"nonlinear"`` design shifted 1 SD, whose :math:`0.5 x_1^2` term the default linear
    outcome model misses, gave median SE/SD 0.865, coverage 0.9325 and 6 misses by more than
    3 SE. A correct (quadratic) outcome model gave 0.977, 0.9375 and 1 miss, with a smaller SD
    (0.085 against 0.117). Adding the term from estimating the logistic domain model (stacked
    M-estimation) raised the default's ratio only to 0.898, with 3 misses. The other unflagged
    cells (both designs unshifted, the linear one shifted 1 SD) had 0 or 1 miss each. Normal
    errors with SE = SD would give 1.08 per 400, so a few misses by more than 3 SE are
    expected in any large set of well-calibrated fits.

    With ``on_poor_overlap="trim"`` the overlap region is :math:`\\{x: \\tilde
    w(x) \\le 20\\} \\cap` the source's per-column 0.1%--99.9% quantile box
    (``causalkit.policy.value.TRIM_DENSITY_RATIO``, ``TRIM_QUANTILES``), and the estimand becomes
    :math:`E_T[\\sum_a \\pi(a|X)Y(a) \\mid X \\in R]` (Crump, Hotz, Imbens & Mitnik 2009,
    *Biometrika* 96(1), for trimming to the overlap region as a change of estimand). Its SE
    treats the region as fixed and falls short under strong shift, where the few source units
    near the region's edge carry the largest weights: with the target shifted 4 SD (80 draws
    no study uses, ``simulations/policy_trim_bound_check.py``) the mean SE is 0.85 of the SD
    on the ``"estimation"`` design and coverage 0.90. A tighter bound, which also shrinks the
    region, does not close the gap (bound 10: 0.86 and 0.89; bound 5: 0.91 and 0.925; on the
    ``"nonlinear"`` design coverage 0.86, 0.90 and 0.89 for bounds 20, 10 and 5, differences
    within the Monte Carlo error of 80 draws, about 0.03), so the bound stays at the support
    check's 20. A trimmed fit's default interval is therefore the two-sample pipeline bootstrap
    (percentile interval; every nuisance, and with them the region, refitted on each resample);
    ``inference="influence"`` still gives the influence interval. Coverage of the
    trimmed-population value on draws no study uses
    (``simulations/policy_trim_bootstrap_check.py``, n_S = n_T = 2000, 100 data sets per
    cell and 200 in the one cell whose coverage left the band after 100, 100 resamples each;
    ``simulations/results/policy/policy_trim_bootstrap_check.csv``), influence against
    bootstrap:

    =============================  =========  =========
    design, target                 influence  bootstrap
    =============================  =========  =========
    ``"estimation"``, 10% outside  0.93       0.93
    ``"estimation"``, 30% outside  0.92       0.95
    ``"nonlinear"``, 4 SD          0.83       0.94
    ``"nonlinear"``, 10% outside   0.94       0.93
    ``"nonlinear"``, 30% outside   0.935      0.985
    ``"estimation"``, 4 SD         0.87       0.96
    =============================  =========  =========

    The bootstrap repairs the influence interval where it fails, under strong shift (4 SD),
    where the edge weights are largest, and is conservative where 30% of the nonlinear design's
    target lies outside: 0.99 and 0.98 over the first and the second 100 data sets there, its
    SE 1.47 times the SD over the 200 (Monte Carlo SE of a coverage: about 0.02 over 100 data
    sets, 0.009 over 200 near 0.985). A bootstrap that holds the fitted region fixed (the
    region's units resampled within each sample and every nuisance refitted, not the region),
    whose target is the trimmed estimand itself, was tried on the same draws of the first
    three cells (``simulations/policy_trim_fixed_region_check.py``,
    ``simulations/results/policy/policy_trim_fixed_region_check.csv``): its SE follows the SD
    (0.95-1.07 of it) but it covered 0.92, 0.92 and 0.87, against 0.93, 0.95 and 0.94 above.
    On the ``"nonlinear"`` design shifted 4 SD the trimmed estimate is biased (-0.10, 3.4 MC SE,
    a third of its SD), which the default's wider interval absorbs; so the default refits the
    region.

    Examples
    --------
    >>> est = TargetPolicyValue(cv=2, random_state=0).fit(Xs, y, a, X_target=Xt)  # doctest: +SKIP
    >>> est.estimate(lambda X: (X[:, 0] > 0).astype(int)).conf_int()            # doctest: +SKIP
    >>> TargetPolicyValue().fit(df_source, y="y", treatment="a",                 # doctest: +SKIP
    ...                         X_target=df_target, covariates=["age", "educ"])
    """

    _nuisance_slots = {"outcome_model": "regressor", "propensity_model": "classifier",
                       "domain_model": "classifier"}
    _row_order_dependent = True
    _tests_null = False   # a policy value has no meaningful null of 0: no p-value
    _label = "Target policy value"
    _estimand = "target policy value"

    @property
    def _default_inference(self):
        """The pipeline bootstrap after ``on_poor_overlap="trim"`` dropped units (its influence
        interval treats the fitted overlap region as fixed; class Notes), else the influence
        function."""
        trimmed = getattr(self, "n_trimmed_source_", 0) or getattr(self, "n_trimmed_target_", 0)
        return "bootstrap" if trimmed else "influence"

    def __init__(self, outcome_model=None, propensity_model=None, domain_model=None, cv=5,
                 min_propensity=1e-3, domain_clip=1e-3, max_weight=None, normalize=True,
                 per_arm=True, on_poor_overlap="warn", n_jobs=None, random_state=None):
        self.outcome_model = outcome_model
        self.propensity_model = propensity_model
        self.domain_model = domain_model
        self.cv = cv
        self.min_propensity = min_propensity
        self.domain_clip = domain_clip
        self.max_weight = max_weight
        self.normalize = normalize
        self.per_arm = per_arm
        self.on_poor_overlap = on_poor_overlap
        self.n_jobs = n_jobs
        self.random_state = random_state

    # ------------------------------------------------------------------ fitting
    def _check_params(self):
        if isinstance(self.cv, numbers.Integral):
            check_positive_int(self.cv, "cv", minimum=2)
        elif not hasattr(self.cv, "split"):
            raise TypeError("cv must be an int >= 2 or a scikit-learn splitter (it is applied to "
                            f"the source and the target separately); got {type(self.cv).__name__}")
        if not 0.0 < float(self.min_propensity) < 0.5:
            raise ValueError(f"min_propensity must be in (0, 0.5); got {self.min_propensity!r}")
        if not 0.0 < float(self.domain_clip) < 0.5:
            raise ValueError(f"domain_clip must be in (0, 0.5); got {self.domain_clip!r}")
        if self.max_weight is not None and not float(self.max_weight) > 0:
            raise ValueError(f"max_weight must be positive or None; got {self.max_weight!r}")
        check_n_jobs(self.n_jobs)
        if not (isinstance(self.on_poor_overlap, str) and self.on_poor_overlap in ON_POOR_OVERLAP):
            raise ValueError(f"on_poor_overlap must be one of {ON_POOR_OVERLAP}; got "
                             f"{self.on_poor_overlap!r}")
        if isinstance(self.domain_model, str) and self.domain_model not in DOMAIN_MODELS:
            raise ValueError(f"domain_model must be a classifier or one of {DOMAIN_MODELS}; got "
                             f"{self.domain_model!r}")

    def _folds(self, data, a_idx):
        """Source folds stratified on the arm, target folds; the same number of each (copies
        of a unit in a bootstrap resample share a fold)."""
        n_target = data.Xt.shape[0]
        if isinstance(self.cv, numbers.Integral):
            cv = int(self.cv)
            if n_target < cv:
                raise ValueError(f"X_target needs at least cv={cv} rows; got {n_target}")
            counts = np.bincount(a_idx, minlength=self.arms_.size)
            if counts.min() < cv:
                raise ValueError(f"treatment: every arm needs at least cv={cv} source units; arm "
                                 f"{self.arms_[counts.argmin()].item()!r} has {counts.min()} "
                                 "(treatment must be a small set of arm labels)")
        source = make_folds(self.cv, a_idx.size, stratify=a_idx, groups=data.source_units,
                            random_state=self.seed_for("source_folds"))
        target = make_folds(self.cv, n_target, groups=data.target_units,
                            random_state=self.seed_for("target_folds"))
        if len(source) != len(target):
            raise ValueError(f"cv split the source into {len(source)} folds and the target into "
                             f"{len(target)}; it must give both the same number")
        return source, target

    def _outcome_fits(self, model, Xs, a_idx, y, train):
        """Outcome model(s) trained on the source rows ``train``."""
        K = self.arms_.size
        if self.per_arm:
            return [fit_clone(model, Xs[train[a_idx[train] == k]], y[train[a_idx[train] == k]])
                    for k in range(K)]
        design = np.column_stack([Xs[train], one_hot(a_idx[train], np.arange(K))])
        return fit_clone(model, design, y[train])

    def _outcome_predict(self, fits, Z):
        """(len(Z), K) predictions :math:`\\hat\\mu(a, Z)` of :meth:`_outcome_fits`' models."""
        K = self.arms_.size
        if self.per_arm:
            return np.column_stack([f.predict(Z) for f in fits])
        eye = np.eye(K)
        return np.column_stack([fits.predict(np.column_stack([Z, np.tile(eye[k], (len(Z), 1))]))
                                for k in range(K)])

    def _normalized(self, weights, a_idx):
        if not self.normalize:
            return weights
        means = np.bincount(a_idx, weights=weights, minlength=self.arms_.size) / a_idx.size
        return weights / means[a_idx]

    def fit(self, X, y=None, treatment=None, *args, X_target=None, covariates=None):
        """Cross-fit the outcome, propensity and domain models on both samples.

        Parameters
        ----------
        X : array-like or DataFrame of shape (n_S, p)
            Source covariates (with the DataFrame front end, the source table).
        y : array-like of shape (n_S,) or str
            Source outcomes (larger is better), or the name of a column of ``X``.
        treatment : array-like of shape (n_S,) or str
            Source treatment arms (numeric labels, booleans as 0/1; K >= 2), or a column name.
        X_target : array-like or DataFrame of shape (n_T, p)
            Target covariates: the same columns as ``X`` (for DataFrames, the covariate
            columns are selected from it by name).
        covariates : list of str, optional
            Covariate columns of a DataFrame ``X``; default: every column not used by a role.

        Returns
        -------
        self

        Raises
        ------
        TypeError
            Positional arguments after ``treatment`` (the order is
            ``fit(X, y, treatment, X_target=...)``), or non-numeric input (named).
        ValueError
            Bad input, named: missing or mismatched ``X_target``, NaN or infinite values,
            lengths, a single arm, an arm with fewer than ``cv`` units, an outcome-like
            ``treatment`` (likely swapped with ``y``).
        """
        self._check_params()
        return self._fit_data(policy_data(self, X, y, treatment, args, X_target, covariates))

    def _fit(self, data):
        self.support_box_, self.trim_box_ = np.split(
            np.quantile(data.Xs, SUPPORT_QUANTILES + TRIM_QUANTILES, axis=0), 2)
        self._fit_nuisances(data)
        self.support_models_ = list(zip(self.domain_models_, self.odds_factors_, strict=True))
        self.n_trimmed_source_ = self.n_trimmed_target_ = 0
        self.overlap_ = self.overlap_report()
        if not self.overlap_["poor_overlap"]:
            return
        message = self._overlap_message(self.overlap_)
        if self.on_poor_overlap == "raise":
            raise ValueError(f"on_poor_overlap='raise': {message}")
        if self.on_poor_overlap == "warn":
            warnings.warn(message, OverlapWarning, stacklevel=4)
            return
        keep_s = self._in_box(data.Xs, self.trim_box_) & (self.raw_weights_ <= TRIM_DENSITY_RATIO)
        keep_t = (self._in_box(data.Xt, self.trim_box_)
                  & (self.raw_weights_target_ <= TRIM_DENSITY_RATIO))
        if keep_t.sum() < 2:
            raise ValueError(f"on_poor_overlap='trim': {int(keep_t.sum())} of {keep_t.size} "
                             "target units lie in the overlap region; the target is outside "
                             "the source support and its value cannot be estimated")
        self._fit_nuisances(data.take(np.r_[np.flatnonzero(keep_s),
                                            data.n_source + np.flatnonzero(keep_t)]))
        self.n_trimmed_source_ = int(keep_s.size - keep_s.sum())
        self.n_trimmed_target_ = int(keep_t.size - keep_t.sum())
        self.overlap_ = self.overlap_report()

    def _fit_nuisances(self, data):
        """Cross-fit every nuisance on ``data`` and set the fitted arrays."""
        Xs, y, Xt = data.Xs, data.y, data.Xt
        self.arms_ = data.arms
        self.feature_names_in_ = np.array(data.feature_names, dtype=object)
        self.n_features_in_ = Xs.shape[1]
        a_idx = np.searchsorted(self.arms_, data.a)
        n_s, n_t, K = Xs.shape[0], Xt.shape[0], self.arms_.size
        folds_s, folds_t = self._folds(data, a_idx)
        self.score_units_ = data.units
        outcome = seeded(default_if_none(self.outcome_model, _default_regressor),
                         seed_int(self.seed_for("outcome")))
        propensity = seeded(default_if_none(self.propensity_model, _default_classifier),
                            seed_int(self.seed_for("propensity")))
        domain = seeded(_domain_classifier(self.domain_model), seed_int(self.seed_for("domain")))
        mu_s, mu_t = np.empty((n_s, K)), np.empty((n_t, K))
        e_raw, rho_s, rho_t = np.empty((n_s, K)), np.empty(n_s), np.empty(n_t)
        odds_factor_s, odds_factor_t = np.empty(n_s), np.empty(n_t)
        self.outcome_models_, self.propensity_models_ = [], []
        self.domain_models_, self.odds_factors_ = [], []
        self.source_folds_, self.target_folds_ = np.empty(n_s, dtype=int), np.empty(n_t, dtype=int)

        def fit_fold(tr_s, te_s, tr_t, te_t):
            """One fold's models, fitted on its training rows, and their predictions on its
            test rows (each fold writes only its own test rows)."""
            mu_fit = self._outcome_fits(outcome, Xs, a_idx, y, tr_s)
            mu_s[te_s], mu_t[te_t] = (self._outcome_predict(mu_fit, Xs[te_s]),
                                      self._outcome_predict(mu_fit, Xt[te_t]))
            e_fit = fit_clone(propensity, Xs[tr_s], a_idx[tr_s])
            if not np.array_equal(np.asarray(e_fit.classes_), np.arange(K)):
                raise ValueError("propensity_model must predict probabilities for every arm")
            e_raw[te_s] = e_fit.predict_proba(Xs[te_s])
            stacked = np.vstack([Xs[tr_s], Xt[tr_t]])
            g = np.r_[np.ones(tr_s.size), np.zeros(tr_t.size)]
            d_fit = fit_clone(domain, stacked, g)
            rho_s[te_s] = predict_positive_proba(d_fit, Xs[te_s])
            rho_t[te_t] = predict_positive_proba(d_fit, Xt[te_t])
            return mu_fit, e_fit, d_fit

        folds = list(zip(folds_s, folds_t, strict=True))
        fits = Parallel(n_jobs=self.n_jobs, prefer="threads")(
            delayed(fit_fold)(tr_s, te_s, tr_t, te_t) for (tr_s, te_s), (tr_t, te_t) in folds)
        for k, (((tr_s, te_s), (tr_t, te_t)), (mu_fit, e_fit, d_fit)) in enumerate(
                zip(folds, fits, strict=True)):
            self.source_folds_[te_s], self.target_folds_[te_t] = k, k
            factor = tr_s.size / tr_t.size
            odds_factor_s[te_s], odds_factor_t[te_t] = factor, factor
            self.outcome_models_.append(mu_fit)
            self.propensity_models_.append(e_fit)
            self.domain_models_.append(d_fit)
            self.odds_factors_.append(float(factor))
        self.folds_ = {"source": folds_s, "target": folds_t}
        lo = float(self.min_propensity)
        self.n_clipped_propensity_ = int(np.sum(e_raw[np.arange(n_s), a_idx] < lo))
        self.propensity_ = clip_probabilities(e_raw, (lo, 1.0), name="propensity")
        c = float(self.domain_clip)
        self.n_clipped_domain_ = int(np.sum((rho_s < c) | (rho_s > 1 - c)))
        self.domain_source_ = clip_probabilities(rho_s, (c, 1 - c), name="domain probability")
        self.domain_target_ = np.clip(rho_t, c, 1 - c)
        self.raw_weights_ = _raw_ratio(rho_s, odds_factor_s)
        self.raw_weights_target_ = _raw_ratio(rho_t, odds_factor_t)
        w = (1.0 - self.domain_source_) / self.domain_source_ * odds_factor_s
        self.n_capped_weights_ = 0
        if self.max_weight is not None:
            self.n_capped_weights_ = int(np.sum(w > self.max_weight))
            w = np.minimum(w, float(self.max_weight))
        self.weights_ = w
        self.mu_source_, self.mu_target_ = mu_s, mu_t
        self.X_source_, self.X_target_ = Xs, Xt
        self.treatment_index_, self.y_ = a_idx, y
        rows = np.arange(n_s)
        # residual term per source row, before multiplying by pi(A_i | X_i)
        inverse_e = 1.0 / self.propensity_[rows, a_idx]
        self.inverse_propensity_ = self._normalized(inverse_e, a_idx)
        self.residual_weights_ = self._normalized(w * inverse_e, a_idx)
        self.residuals_ = y - mu_s[rows, a_idx]

    # --------------------------------------------------------------- inference
    def policy_matrices(self, policy):
        """The policy's (n_S, K) and (n_T, K) probability matrices on the two fitted samples.

        The policy sees the covariates as they were given: a DataFrame with the covariate
        columns when ``X`` was one, else an array."""
        check_is_fitted(self, "data_")
        return (policy_matrix(policy, self.data_.frame(self.X_source_), self.arms_),
                policy_matrix(policy, self.data_.frame(self.X_target_), self.arms_))

    def _scores(self, P_s, P_t, method):
        """Per-row scores: (source part, its influence values, target part; ``None`` where a
        part is absent).

        The source part's mean is the estimate's source term. Its influence values are the
        scores themselves (up to centring) for unnormalised weights; with ``normalize`` the
        weighted term of arm :math:`a` is a ratio :math:`\\hat\\theta_a = \\sum_{A_i=a} r_i u_i /
        \\sum_{A_i=a} r_i` (raw weights :math:`r`, weighted quantity :math:`u`), whose
        influence values are :math:`\\tilde r_i (u_i - \\hat\\theta_{A_i})` with the
        normalised weights :math:`\\tilde r` (the delta method for a ratio)."""
        rows = np.arange(P_s.shape[0])
        a_idx = self.treatment_index_
        pi_a = P_s[rows, a_idx]

        def weighted(weights, u, plain=0.0):
            scores = plain + weights * u
            if not self.normalize:
                return scores, scores
            theta = (np.bincount(a_idx, weights=weights * u, minlength=self.arms_.size)
                     / np.bincount(a_idx, weights=weights, minlength=self.arms_.size))
            return scores, plain + weights * (u - theta[a_idx])

        if method == "dr":
            return (*weighted(self.residual_weights_, pi_a * self.residuals_),
                    np.sum(P_t * self.mu_target_, axis=1))
        if method == "direct":
            return None, None, np.sum(P_t * self.mu_target_, axis=1)
        if method == "ipw":
            return (*weighted(self.residual_weights_, pi_a * self.y_), None)
        if method == "source_only":
            return (*weighted(self.inverse_propensity_, pi_a * self.residuals_,
                              np.sum(P_s * self.mu_source_, axis=1)), None)
        raise ValueError(f"method must be one of {METHODS}; got {method!r}")

    def estimate_matrices(self, P_source, P_target, method="dr", *, name=None):
        """Estimate (influence-function SE) from probability matrices already evaluated on the
        two fitted samples.

        Used for policies that differ by row (e.g. cross-fitted learned policies); ``estimate``
        is the usual entry point. ``name`` defaults to :meth:`estimand_name`. For ``"direct"``
        and ``"ipw"`` the SE is conditional on the fitted nuisances, which the method label and
        the ``SE`` detail say.
        """
        check_is_fitted(self, "weights_")
        s_s, if_s, s_t = self._scores(np.asarray(P_source), np.asarray(P_target), method)
        n_s, n_t = self.weights_.size, self.mu_target_.shape[0]
        n = n_s + n_t
        phi = np.zeros(n)
        value = 0.0
        if s_s is not None:
            value += s_s.mean()
            phi[:n_s] = n / n_s * (if_s - if_s.mean())
        if s_t is not None:
            value += s_t.mean()
            phi[n_s:] = n / n_t * (s_t - s_t.mean())
        details = self._details()
        label = _METHOD_LABELS[method]
        if method in _CONDITIONAL:
            label = f"{label}, SE {_CONDITIONAL_NOTE}"
            details["SE"] = _CONDITIONAL_NOTE
        return Estimate.from_influence(value, phi, name=name or self.estimand_name(),
                                       method=label, details=details, null_value=None)

    def _details(self):
        out = {"n_source": int(self.weights_.size), "n_target": int(self.mu_target_.shape[0])}
        if self.n_trimmed_source_ or self.n_trimmed_target_:
            out.update(trimmed_source=self.n_trimmed_source_,
                       trimmed_target=self.n_trimmed_target_)
        if self.overlap_["poor_overlap"]:
            out["overlap"] = "poor: " + "; ".join(self.overlap_["problems"])
        return out

    def estimand_name(self):
        """``"target policy value"``, or ``causalkit.policy.value.TRIMMED_ESTIMAND`` after
        trimming."""
        check_is_fitted(self, "weights_")
        if self.n_trimmed_source_ or self.n_trimmed_target_:
            return TRIMMED_ESTIMAND
        return self._estimand

    def _influence_estimate(self, target=None):
        policy, method = target
        return self.estimate_matrices(*self.policy_matrices(policy), method)

    def _point_estimate(self, target=None):
        return self._influence_estimate(target).value

    def estimate(self, policy, method="dr", *, inference=None, alpha=0.05, n_boot=200, n_jobs=1,
                 random_state=None, progress=None):
        """Estimated target value of ``policy`` with its SE and CI.

        Parameters
        ----------
        policy : arm label, callable or object with ``predict_proba``
            See :mod:`causalkit.policy._policies`: an (n, K) probability matrix (columns in
            ``arms_`` order) or a vector of arm labels per row.
        method : {"dr", "direct", "ipw", "source_only"}
            ``"dr"``: the efficient target estimator (class Notes). ``"direct"``:
            :math:`n_T^{-1}\\sum_j \\sum_a \\pi \\hat\\mu` (influence SE conditional on
            :math:`\\hat\\mu`). ``"ipw"``: :math:`n_S^{-1}\\sum_i \\hat w \\pi(A_i|X_i) Y_i /
            \\hat e(A_i|X_i)` (Hajek-normalised when ``normalize``; influence SE conditional on
            the weights). ``"source_only"``: the usual AIPW value on the source sample, which
            estimates the *source* value :math:`V_S(\\pi)` and is biased for :math:`V_T` under
            shift. The ``"direct"`` and ``"ipw"`` influence intervals ignore the estimation of
            the nuisances and are labelled "SE conditional on the fitted nuisances" (method
            label and ``SE`` detail); ``inference="bootstrap"`` gives their unconditional
            pipeline interval.
        inference : {"influence", "bootstrap"}, optional
            ``"influence"``: normal interval from the two-sample influence function (the
            default, except after ``on_poor_overlap="trim"`` dropped units). ``"bootstrap"``:
            percentile interval of the two-sample pipeline bootstrap (class Notes; the default
            of a trimmed fit). Bootstrap results are cached per policy object (arm labels by
            value, other policies by identity) and method: pass a new object for a changed
            policy.
        alpha, n_boot, n_jobs, random_state, progress
            As in :meth:`causalkit._base.CausalEstimator.estimate`.

        Returns
        -------
        causalkit.Estimate
        """
        check_is_fitted(self, "data_")
        if method not in METHODS:
            raise ValueError(f"method must be one of {METHODS}; got {method!r}")
        out = self._estimate(inference, target=(policy, method),
                             target_key=_target_key(policy, method), alpha=alpha, n_boot=n_boot,
                             n_jobs=n_jobs, random_state=random_state, progress=progress,
                             name=self.estimand_name())
        if self._check_inference(inference) == "bootstrap":
            out.method = _METHOD_LABELS[method]
        return out

    def __getstate__(self):
        """Pickled without the bootstrap cache, whose keys hold the policies (often lambdas)."""
        state = super().__getstate__()
        if "_bootstrap_cache" in state:
            state["_bootstrap_cache"] = {}
        return state

    def contrast(self, policy_a, policy_b, method="dr"):
        """Difference of target values ``V(policy_a) - V(policy_b)``, paired within rows
        (influence-function SE)."""
        first = self.estimate(policy_a, method, inference="influence")
        second = self.estimate(policy_b, method, inference="influence")
        return contrast(first, second, name="target value difference")

    def _arm_estimates(self, method, estimate_kwargs):
        out = {}
        for arm in self.arms_:
            est = self.estimate(arm.item(), method, **estimate_kwargs)
            est.name = f"target value of arm {arm.item():g} for all"
            out[f"arm {arm.item():g} for all"] = est
        return out

    def summary(self, policy=None, method="dr", **estimate_kwargs):
        """Text summary of :meth:`estimate` for ``policy``; without one, of every "give arm
        ``a`` to everyone" policy (the target mean outcome under each arm)."""
        if policy is not None:
            return self.estimate(policy, method, **estimate_kwargs).summary()
        check_is_fitted(self, "data_")
        return "\n\n".join(e.summary() for e in self._arm_estimates(method,
                                                                    estimate_kwargs).values())

    def to_frame(self, policy=None, method="dr", **estimate_kwargs):
        """Table of :meth:`estimate` for ``policy`` (one row); without one, a row per "give arm
        ``a`` to everyone" policy."""
        if policy is not None:
            return self.estimate(policy, method, **estimate_kwargs).to_frame()
        check_is_fitted(self, "data_")
        estimates = self._arm_estimates(method, estimate_kwargs)
        frame = pd.concat([e.to_frame() for e in estimates.values()])
        frame.index = pd.Index(list(estimates), name="policy")
        return frame

    def score_matrix(self):
        """Stacked doubly robust score matrix :math:`\\Gamma` (n_S + n_T rows, K columns).

        Target rows: :math:`\\Gamma_{j,a} = (n/n_T)\\hat\\mu(a, X_j)`; source rows:
        :math:`\\Gamma_{i,a} = (n/n_S)\\hat w(X_i) 1\\{A_i=a\\}\\{Y_i-\\hat\\mu(a,X_i)\\}/
        \\hat e(a|X_i)` (with the normalised weights when ``normalize``). For every policy,
        ``estimate(policy).value`` equals the mean over rows of
        :math:`\\sum_a \\pi(a|X_r)\\Gamma_{r,a}`, so any welfare-maximisation solver fitted on
        :math:`(X, \\Gamma)` maximises the estimated *target* value.

        Returns
        -------
        X : ndarray of shape (n, p)
            Source rows first, then target rows.
        gamma : ndarray of shape (n, K)
        is_target : ndarray of bool, shape (n,)
        """
        check_is_fitted(self, "weights_")
        n_s, n_t = self.weights_.size, self.mu_target_.shape[0]
        n = n_s + n_t
        src = np.zeros((n_s, self.arms_.size))
        src[np.arange(n_s), self.treatment_index_] = (n / n_s * self.residual_weights_
                                                      * self.residuals_)
        gamma = np.vstack([src, n / n_t * self.mu_target_])
        return (np.vstack([self.X_source_, self.X_target_]), gamma,
                np.r_[np.zeros(n_s, dtype=bool), np.ones(n_t, dtype=bool)])

    def source_score_matrix(self):
        """Source-only AIPW score matrix (n_S rows, K columns), the *source* objective.

        :math:`\\Gamma^S_{i,a} = \\hat\\mu(a, X_i) + 1\\{A_i=a\\}\\{Y_i-\\hat\\mu(a,X_i)\\}/
        \\hat e(a|X_i)` (normalised within arms when ``normalize``): for every policy,
        ``estimate(policy, "source_only").value`` equals the mean over source rows of
        :math:`\\sum_a \\pi(a|X_i)\\Gamma^S_{i,a}` (Dudik, Langford & Li 2011, ICML, for the
        doubly robust policy score).

        Returns
        -------
        X : ndarray of shape (n_S, p)
        gamma : ndarray of shape (n_S, K)
        """
        check_is_fitted(self, "weights_")
        n_s = self.weights_.size
        gamma = self.mu_source_.copy()
        gamma[np.arange(n_s), self.treatment_index_] += self.inverse_propensity_ * self.residuals_
        return self.X_source_, gamma

    # -------------------------------------------------------------- diagnostics
    def _check_new_X(self, X):
        check_is_fitted(self, "weights_")
        X = check_array(X, "X")
        if X.shape[1] != self.n_features_in_:
            raise ValueError(f"X has {X.shape[1]} columns; the model was fitted with "
                             f"{self.n_features_in_}")
        return X

    @staticmethod
    def _fold_average(models, X, clip):
        """Mean over the fold models of the odds :math:`(1-\\hat\\rho_k)/\\hat\\rho_k \\cdot
        n_S^{(-k)}/n_T^{(-k)}`, with :math:`\\hat\\rho_k` clipped to ``[clip, 1 - clip]``."""
        w = np.zeros(X.shape[0])
        for model, factor in models:
            rho = np.clip(predict_positive_proba(model, X), clip, 1 - clip)
            w += (1 - rho) / rho * factor / len(models)
        return w

    def density_ratio(self, X):
        """Estimated :math:`\\hat w(x) = p_T(x)/p_S(x)` at new points.

        The average over the fold models of :math:`\\{(1-\\hat\\rho_k)/\\hat\\rho_k\\}\\, n_S^{(-k)}
        / n_T^{(-k)}`, with the same clipping and cap as the fitted weights.
        """
        X = self._check_new_X(X)
        w = self._fold_average(list(zip(self.domain_models_, self.odds_factors_, strict=True)),
                               X, float(self.domain_clip))
        return w if self.max_weight is None else np.minimum(w, float(self.max_weight))

    @staticmethod
    def _in_box(rows, box):
        lo, hi = box
        return np.all((rows >= lo) & (rows <= hi), axis=1)

    def overlap_region(self, X):
        """Whether each row of ``X`` lies in the overlap region :math:`R` (class Notes).

        :math:`R = \\{x: \\tilde w(x) \\le` ``causalkit.policy.value.TRIM_DENSITY_RATIO``
        :math:`\\} \\cap` the source's per-column ``causalkit.policy.value.TRIM_QUANTILES`` box
        (``trim_box_``), with :math:`\\tilde w` the unclipped density ratio of the first
        (untrimmed) fit, averaged over its fold models. With
        ``on_poor_overlap="trim"`` the fitted rows are kept by the same rule with their
        out-of-fold ratio; the trimmed estimand is the target value over :math:`R`.

        Returns
        -------
        ndarray of bool, shape (n,)
        """
        X = self._check_new_X(X)
        ratio = self._fold_average(self.support_models_, X, _TINY)
        return self._in_box(X, self.trim_box_) & (ratio <= TRIM_DENSITY_RATIO)

    def weight_summary(self):
        """Cheap subset of :meth:`overlap_report`: ESS, ESS fraction, mean and max of the
        unclipped density ratio over the source, and the weak-overlap flag (ESS below
        ``causalkit.policy.value.MIN_ESS_FRACTION`` of the source)."""
        check_is_fitted(self, "weights_")
        w = self.raw_weights_
        ess = _ess(w)
        return {"ess": ess, "ess_fraction": ess / w.size, "mean_weight": float(w.mean()),
                "max_weight": float(w.max()),
                "weak_overlap": bool(ess / w.size < MIN_ESS_FRACTION)}

    def overlap_report(self):
        """The overlap checks of the class Notes on the fitted samples.

        Returns
        -------
        dict
            ``n_source``, ``n_target``; ``ess``, ``ess_fraction``, ``mean_weight``,
            ``max_weight``, ``weak_overlap`` (:meth:`weight_summary`, on the unclipped ratio
            :math:`\\tilde w`); ``n_target_above_bound`` (target units with out-of-fold
            :math:`\\tilde w > 20`); ``outside_box`` (``{column name: target units outside the
            source's range of that column}``, columns with any); ``n_unsupported``
            and ``unsupported_share`` (target units failing either rule); ``problems`` (a list
            of the failed checks, in words) and ``poor_overlap`` (any failed).
        """
        check_is_fitted(self, "weights_")
        out = {"n_source": int(self.weights_.size), "n_target": int(self.mu_target_.shape[0]),
               **self.weight_summary()}
        Xt, (lo, hi) = self.X_target_, self.support_box_
        outside = (Xt < lo) | (Xt > hi)
        above = self.raw_weights_target_ > MAX_DENSITY_RATIO
        unsupported = above | outside.any(axis=1)
        counts = outside.sum(axis=0)
        out.update(n_target_above_bound=int(above.sum()),
                   outside_box={str(self.feature_names_in_[j]): int(counts[j])
                                for j in np.argsort(-counts, kind="stable") if counts[j] > 0},
                   n_unsupported=int(unsupported.sum()),
                   unsupported_share=float(unsupported.mean()))
        problems = []
        if out["unsupported_share"] > MAX_UNSUPPORTED_SHARE:
            problems.append("target units outside the source support")
        low, high = MEAN_WEIGHT_RANGE
        if not low <= out["mean_weight"] <= high:
            problems.append("mean density ratio far from 1")
        if out["weak_overlap"]:
            problems.append("small effective sample size")
        out.update(problems=problems, poor_overlap=bool(problems))
        return out

    @staticmethod
    def _overlap_message(report):
        """One paragraph naming the failed checks, the units and the columns."""
        n_t = report["n_target"]
        boxed = ", ".join(f"{name} ({count} units)" for name, count in
                          list(report["outside_box"].items())[:5]) or "none"
        return (f"poor overlap between source and target ({'; '.join(report['problems'])}): "
                f"{report['n_unsupported']} of {n_t} target units "
                f"({100 * report['unsupported_share']:.1f}%) lie outside the source support "
                f"({report['n_target_above_bound']} with an estimated density ratio above "
                f"{MAX_DENSITY_RATIO:g}; outside the source's range of {boxed}); the mean "
                f"density ratio over the source is "
                f"{report['mean_weight']:.3g} (about 1 when the samples overlap) and the "
                f"effective sample size of the weights is {report['ess']:.0f} "
                f"({100 * report['ess_fraction']:.1f}% of the source). The estimate "
                "extrapolates the outcome model there and its interval may not cover; "
                "on_poor_overlap='trim' restricts both samples to the overlap region (a "
                "different estimand)")

    def diagnostics(self, warn=True):
        """Overlap diagnostics of the fitted nuisances.

        Returns
        -------
        dict
            Everything in :meth:`overlap_report`, plus ``weight_q50/q90/q99`` (quantiles of
            the unclipped ratio over the source), ``domain_auc`` (out-of-fold AUC of the domain
            classifier; 0.5 means no detectable shift), ``min_propensity`` (smallest
            :math:`\\hat e(A_i|X_i)`), ``n_clipped_propensity``, ``n_clipped_domain``,
            ``n_capped_weights``, ``n_trimmed_source``, ``n_trimmed_target``. With
            ``warn=True`` an :class:`~causalkit.exceptions.OverlapWarning` flags poor overlap.
        """
        report = self.overlap_report()
        w = self.raw_weights_
        g = np.r_[np.ones(w.size), np.zeros(self.domain_target_.size)]
        out = {**report,
               **{f"weight_q{q}": float(np.quantile(w, q / 100)) for q in (50, 90, 99)},
               "domain_auc": float(roc_auc_score(g, np.r_[self.domain_source_,
                                                          self.domain_target_])),
               "min_propensity": float(self.propensity_[np.arange(w.size),
                                                        self.treatment_index_].min()),
               "n_clipped_propensity": self.n_clipped_propensity_,
               "n_clipped_domain": self.n_clipped_domain_,
               "n_capped_weights": self.n_capped_weights_,
               "n_trimmed_source": self.n_trimmed_source_,
               "n_trimmed_target": self.n_trimmed_target_}
        if warn and report["poor_overlap"]:
            warnings.warn(self._overlap_message(report), OverlapWarning, stacklevel=2)
        return out

    def plot(self, axes=None):
        """Overlap figure (:func:`causalkit.policy.plots.plot_overlap`): out-of-fold domain
        scores of both samples and the density-ratio weights. ``axes``: two matplotlib Axes,
        optional. Returns the matplotlib Figure."""
        from causalkit.policy.plots import plot_overlap

        return plot_overlap(self, axes=axes)[0].figure
