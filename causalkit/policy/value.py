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
the within-arm normalisation of the weights (``normalize=True``) is a finite-sample choice that
leaves its first-order behaviour unchanged.

Reference: Liu, Yang, Tian, Guo & Wu (2025), "Optimal Policy Adaptation under Covariate Shift",
IJCAI 2025 (arXiv:2501.08067); Uehara, Kato & Yasui (2020), "Off-Policy Evaluation and Learning
for External Validity under a Covariate Shift", NeurIPS 2020.
"""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
from sklearn.base import BaseEstimator
from sklearn.linear_model import LinearRegression, LogisticRegression
from sklearn.metrics import roc_auc_score
from sklearn.model_selection import KFold, StratifiedKFold
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from causalkit._validation import (
    check_array,
    check_positive_int,
    check_random_state,
    check_vector,
    feature_names_of,
)
from causalkit.exceptions import OverlapWarning
from causalkit.inference import Estimate, contrast
from causalkit.nuisance import clip_probabilities, fit_clone, predict_positive_proba
from causalkit.policy._policies import one_hot, policy_matrix

__all__ = ["TargetPolicyValue", "METHODS"]

#: Estimators offered by :meth:`TargetPolicyValue.estimate`.
METHODS = ("dr", "direct", "ipw", "source_only")

_METHOD_LABELS = {"dr": "Target DR (efficient)", "direct": "Direct (outcome regression)",
                  "ipw": "IPW (density ratio x propensity)",
                  "source_only": "Source-only AIPW (ignores shift)"}

#: Share of the source sample below which the weights' effective sample size is "weak overlap".
MIN_ESS_FRACTION = 0.1


def _validate_samples(X_source, treatment, y, X_target):
    """Validate the two samples; return arrays, the sorted arms and the feature names."""
    Xs = check_array(X_source, "X_source")
    Xt = check_array(X_target, "X_target")
    if Xt.shape[1] != Xs.shape[1]:
        raise ValueError(f"X_target has {Xt.shape[1]} columns but X_source has {Xs.shape[1]}; "
                         "both samples need the same covariates")
    names = feature_names_of(X_source, Xs.shape[1])
    both_frames = isinstance(X_source, pd.DataFrame) and isinstance(X_target, pd.DataFrame)
    if both_frames and list(map(str, X_target.columns)) != names:
        raise ValueError(f"X_target columns {list(map(str, X_target.columns))} differ from "
                             f"X_source columns {names}")
    a = check_vector(treatment, "treatment", n=Xs.shape[0])
    y = check_vector(y, "y", n=Xs.shape[0])
    arms = np.unique(a)
    if arms.size < 2:
        raise ValueError(f"treatment must contain at least 2 arms in the source; "
                         f"got {arms.tolist()}")
    return Xs, a, y, Xt, arms, names


def _default_classifier():
    return make_pipeline(StandardScaler(), LogisticRegression(max_iter=1000))


class TargetPolicyValue(BaseEstimator):
    """Doubly robust, efficient estimator of a policy's value in a covariate-shifted target.

    Parameters
    ----------
    outcome_model : sklearn regressor, optional
        Source outcome regression :math:`\\mu(a, x)`; default ``LinearRegression()``.
    propensity_model : sklearn classifier, optional
        Source propensity :math:`e(a \\mid x)` (multi-class for K arms); default
        ``make_pipeline(StandardScaler(), LogisticRegression(max_iter=1000))``.
    domain_model : sklearn classifier, optional
        Domain classifier :math:`\\rho(x) = P(\\text{source} \\mid x)` on the stacked samples;
        default: the same standardised logistic regression. Use calibrated probabilities (logistic
        models, or calibrated boosting): the density ratio is their odds.
    cv : int
        Number of cross-fitting folds; both samples are split, so no source or target row is
        scored by a model that saw it.
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
    random_state : int, optional
        Seed of the fold split.

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
    source_folds_, target_folds_ : ndarray of int
        Fold of each row.

    Notes
    -----
    With out-of-fold nuisances, the target-DR ("SE") estimate is

    .. math:: \\hat V(\\pi) = \\frac{1}{n_T}\\sum_{j} \\sum_a \\pi(a|X_j)\\hat\\mu(a, X_j)
              + \\frac{1}{n_S}\\sum_i \\hat w(X_i) \\frac{\\pi(A_i|X_i)}{\\hat e(A_i|X_i)}
              \\{Y_i - \\hat\\mu(A_i, X_i)\\},

    unbiased to first order when :math:`\\hat\\mu` is correct or when both :math:`\\hat w` and
    :math:`\\hat e` are. Its two-sample influence function gives
    :math:`\\widehat{se}^2 = s^2_T/n_T + s^2_S/n_S` (variances of the two summands), which
    attains the semiparametric efficiency bound. ``Estimate.influence`` stacks the influence
    values of the source rows, then the target rows, scaled to the stacked size
    :math:`n = n_S + n_T` so that :func:`causalkit.inference.contrast` applies directly.

    Weak overlap (:math:`\\widehat{ESS}/n_S < 0.1`, :math:`\\widehat{ESS} = (\\sum \\hat w)^2 /
    \\sum \\hat w^2`) raises an :class:`~causalkit.exceptions.OverlapWarning`; intervals then
    tend to under-cover.

    Examples
    --------
    >>> est = TargetPolicyValue(cv=2, random_state=0).fit(Xs, a, y, Xt)   # doctest: +SKIP
    >>> est.estimate(lambda X: (X[:, 0] > 0).astype(int)).conf_int()       # doctest: +SKIP
    """

    def __init__(self, outcome_model=None, propensity_model=None, domain_model=None, cv=5,
                 min_propensity=1e-3, domain_clip=1e-3, max_weight=None, normalize=True,
                 per_arm=True, random_state=None):
        self.outcome_model = outcome_model
        self.propensity_model = propensity_model
        self.domain_model = domain_model
        self.cv = cv
        self.min_propensity = min_propensity
        self.domain_clip = domain_clip
        self.max_weight = max_weight
        self.normalize = normalize
        self.per_arm = per_arm
        self.random_state = random_state

    # ------------------------------------------------------------------ fitting
    def _check_params(self):
        cv = check_positive_int(self.cv, "cv", minimum=2)
        if not 0.0 < float(self.min_propensity) < 0.5:
            raise ValueError(f"min_propensity must be in (0, 0.5); got {self.min_propensity!r}")
        if not 0.0 < float(self.domain_clip) < 0.5:
            raise ValueError(f"domain_clip must be in (0, 0.5); got {self.domain_clip!r}")
        if self.max_weight is not None and not float(self.max_weight) > 0:
            raise ValueError(f"max_weight must be positive or None; got {self.max_weight!r}")
        return cv

    def _folds(self, a, n_target, cv):
        rng = check_random_state(self.random_state)
        seeds = rng.integers(0, 2**31 - 1, size=2)
        source = np.empty(a.size, dtype=int)
        for k, (_, test) in enumerate(StratifiedKFold(cv, shuffle=True, random_state=seeds[0])
                                      .split(np.zeros(a.size), a)):
            source[test] = k
        target = np.empty(n_target, dtype=int)
        for k, (_, test) in enumerate(KFold(cv, shuffle=True, random_state=seeds[1])
                                      .split(np.zeros(n_target))):
            target[test] = k
        return source, target

    def _outcome_predictions(self, model, Xs, a_idx, y, train, X_eval):
        """Per-arm predictions of the outcome model trained on the source rows ``train``."""
        K = self.arms_.size
        if self.per_arm:
            fits = [fit_clone(model, Xs[train & (a_idx == k)], y[train & (a_idx == k)])
                    for k in range(K)]
            return [np.column_stack([f.predict(Z) for f in fits]) for Z in X_eval]
        design = np.column_stack([Xs[train], one_hot(a_idx[train], np.arange(K))])
        fit = fit_clone(model, design, y[train])
        eye = np.eye(K)
        return [np.column_stack([fit.predict(np.column_stack([Z, np.tile(eye[k], (len(Z), 1))]))
                                 for k in range(K)]) for Z in X_eval]

    def _normalized(self, weights, a_idx):
        if not self.normalize:
            return weights
        means = np.bincount(a_idx, weights=weights, minlength=self.arms_.size) / a_idx.size
        return weights / means[a_idx]

    def fit(self, X_source, treatment, y, X_target):
        """Cross-fit the outcome, propensity and domain models on both samples.

        Parameters
        ----------
        X_source : array-like of shape (n_S, p)
        treatment : array-like of shape (n_S,)
            Source treatment arms (any numeric labels; K >= 2).
        y : array-like of shape (n_S,)
            Source outcomes (larger is better).
        X_target : array-like of shape (n_T, p)
            Target covariates, same columns as ``X_source``.

        Returns
        -------
        self
        """
        cv = self._check_params()
        Xs, a, y, Xt, arms, names = _validate_samples(X_source, treatment, y, X_target)
        n_s, n_t = Xs.shape[0], Xt.shape[0]
        if n_t < cv:
            raise ValueError(f"X_target needs at least cv={cv} rows; got {n_t}")
        counts = np.array([np.sum(a == arm) for arm in arms])
        if counts.min() < cv:
            raise ValueError(f"every treatment arm needs at least cv={cv} source units; arm "
                             f"{arms[counts.argmin()].item()!r} has {counts.min()}")
        self.arms_ = arms
        self.feature_names_in_ = np.array(names, dtype=object)
        self.n_features_in_ = Xs.shape[1]
        self.input_is_frame_ = isinstance(X_source, pd.DataFrame)
        a_idx = np.searchsorted(arms, a)
        K = arms.size
        outcome = self.outcome_model if self.outcome_model is not None else LinearRegression()
        propensity = (self.propensity_model if self.propensity_model is not None
                      else _default_classifier())
        domain = self.domain_model if self.domain_model is not None else _default_classifier()
        folds_s, folds_t = self._folds(a_idx, n_t, cv)
        mu_s, mu_t = np.empty((n_s, K)), np.empty((n_t, K))
        e_raw, rho_s, rho_t = np.empty((n_s, K)), np.empty(n_s), np.empty(n_t)
        odds_factor_s = np.empty(n_s)
        self.domain_models_, self.odds_factors_ = [], []
        for k in range(cv):
            tr_s, te_s = folds_s != k, folds_s == k
            tr_t, te_t = folds_t != k, folds_t == k
            mu_s[te_s], mu_t[te_t] = self._outcome_predictions(outcome, Xs, a_idx, y, tr_s,
                                                               [Xs[te_s], Xt[te_t]])
            e_fit = fit_clone(propensity, Xs[tr_s], a_idx[tr_s])
            classes = np.asarray(e_fit.classes_)
            if not np.array_equal(classes, np.arange(K)):
                raise ValueError("propensity_model must predict probabilities for every arm")
            e_raw[te_s] = e_fit.predict_proba(Xs[te_s])
            stacked = np.vstack([Xs[tr_s], Xt[tr_t]])
            g = np.r_[np.ones(tr_s.sum()), np.zeros(tr_t.sum())]
            d_fit = fit_clone(domain, stacked, g)
            rho_s[te_s] = predict_positive_proba(d_fit, Xs[te_s])
            rho_t[te_t] = predict_positive_proba(d_fit, Xt[te_t])
            factor = tr_s.sum() / tr_t.sum()
            odds_factor_s[te_s] = factor
            self.domain_models_.append(d_fit)
            self.odds_factors_.append(float(factor))
        lo = float(self.min_propensity)
        self.n_clipped_propensity_ = int(np.sum(e_raw[np.arange(n_s), a_idx] < lo))
        self.propensity_ = clip_probabilities(e_raw, (lo, 1.0), name="propensity")
        c = float(self.domain_clip)
        self.n_clipped_domain_ = int(np.sum((rho_s < c) | (rho_s > 1 - c)))
        self.domain_source_ = clip_probabilities(rho_s, (c, 1 - c), name="domain probability")
        self.domain_target_ = np.clip(rho_t, c, 1 - c)
        w = (1.0 - self.domain_source_) / self.domain_source_ * odds_factor_s
        self.n_capped_weights_ = 0
        if self.max_weight is not None:
            self.n_capped_weights_ = int(np.sum(w > self.max_weight))
            w = np.minimum(w, float(self.max_weight))
        self.weights_ = w
        self.mu_source_, self.mu_target_ = mu_s, mu_t
        self.source_folds_, self.target_folds_ = folds_s, folds_t
        self.X_source_, self.X_target_ = Xs, Xt
        self.treatment_index_, self.y_ = a_idx, y
        rows = np.arange(n_s)
        # residual term per source row, before multiplying by pi(A_i | X_i)
        inverse_e = 1.0 / self.propensity_[rows, a_idx]
        self.inverse_propensity_ = self._normalized(inverse_e, a_idx)
        self.residual_weights_ = self._normalized(w * inverse_e, a_idx)
        self.residuals_ = y - mu_s[rows, a_idx]
        self._overlap_warning(self.weight_summary())
        return self

    # --------------------------------------------------------------- inference
    def _check_fitted(self):
        if not hasattr(self, "weights_"):
            raise ValueError("this TargetPolicyValue is not fitted yet; call fit(...) first")

    def _frame(self, X):
        return pd.DataFrame(X, columns=list(self.feature_names_in_)) if self.input_is_frame_ else X

    def policy_matrices(self, policy):
        """The policy's (n_S, K) and (n_T, K) probability matrices on the two fitted samples."""
        self._check_fitted()
        return (policy_matrix(policy, self._frame(self.X_source_), self.arms_),
                policy_matrix(policy, self._frame(self.X_target_), self.arms_))

    def _scores(self, P_s, P_t, method):
        """Per-row scores (source part, target part; ``None`` where a part is absent)."""
        rows = np.arange(P_s.shape[0])
        pi_a = P_s[rows, self.treatment_index_]
        if method == "dr":
            return (self.residual_weights_ * pi_a * self.residuals_,
                    np.sum(P_t * self.mu_target_, axis=1))
        if method == "direct":
            return None, np.sum(P_t * self.mu_target_, axis=1)
        if method == "ipw":
            return self.residual_weights_ * pi_a * self.y_, None
        if method == "source_only":
            return (np.sum(P_s * self.mu_source_, axis=1)
                    + self.inverse_propensity_ * pi_a * self.residuals_, None)
        raise ValueError(f"method must be one of {METHODS}; got {method!r}")

    def estimate_matrices(self, P_source, P_target, method="dr", *, name="target policy value"):
        """Estimate from probability matrices already evaluated on the two fitted samples.

        Used for policies that differ by row (e.g. cross-fitted learned policies); ``estimate``
        is the usual entry point.
        """
        self._check_fitted()
        s_s, s_t = self._scores(np.asarray(P_source), np.asarray(P_target), method)
        n_s, n_t = self.weights_.size, self.mu_target_.shape[0]
        n = n_s + n_t
        phi = np.zeros(n)
        value = 0.0
        if s_s is not None:
            value += s_s.mean()
            phi[:n_s] = n / n_s * (s_s - s_s.mean())
        if s_t is not None:
            value += s_t.mean()
            phi[n_s:] = n / n_t * (s_t - s_t.mean())
        details = {"n_source": n_s, "n_target": n_t}
        return Estimate.from_influence(value, phi, name=name, method=_METHOD_LABELS[method],
                                       details=details)

    def estimate(self, policy, method="dr"):
        """Estimated target value of ``policy`` with its SE and normal CI.

        Parameters
        ----------
        policy : arm label, callable or object with ``predict_proba``
            See :mod:`causalkit.policy._policies`: an (n, K) probability matrix (columns in
            ``arms_`` order) or a vector of arm labels per row.
        method : {"dr", "direct", "ipw", "source_only"}
            ``"dr"``: the efficient target estimator (class Notes). ``"direct"``:
            :math:`n_T^{-1}\\sum_j \\sum_a \\pi \\hat\\mu` (SE conditional on
            :math:`\\hat\\mu`). ``"ipw"``: :math:`n_S^{-1}\\sum_i \\hat w \\pi(A_i|X_i) Y_i /
            \\hat e(A_i|X_i)` (Hajek-normalised when ``normalize``; SE conditional on the
            weights). ``"source_only"``: the usual
            AIPW value on the source sample, which estimates the *source* value
            :math:`V_S(\\pi)` and is biased for :math:`V_T` under shift.

        Returns
        -------
        causalkit.Estimate
        """
        if method not in METHODS:
            raise ValueError(f"method must be one of {METHODS}; got {method!r}")
        P_s, P_t = self.policy_matrices(policy)
        return self.estimate_matrices(P_s, P_t, method)

    def contrast(self, policy_a, policy_b, method="dr"):
        """Difference of target values ``V(policy_a) - V(policy_b)``, paired within rows."""
        first, second = self.estimate(policy_a, method), self.estimate(policy_b, method)
        return contrast(first, second, name="target value difference")

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
        self._check_fitted()
        n_s, n_t = self.weights_.size, self.mu_target_.shape[0]
        n = n_s + n_t
        src = np.zeros((n_s, self.arms_.size))
        src[np.arange(n_s), self.treatment_index_] = (n / n_s * self.residual_weights_
                                                      * self.residuals_)
        gamma = np.vstack([src, n / n_t * self.mu_target_])
        return (np.vstack([self.X_source_, self.X_target_]), gamma,
                np.r_[np.zeros(n_s, dtype=bool), np.ones(n_t, dtype=bool)])

    # -------------------------------------------------------------- diagnostics
    def density_ratio(self, X):
        """Estimated :math:`\\hat w(x) = p_T(x)/p_S(x)` at new points.

        The average over the fold models of :math:`\\{(1-\\hat\\rho_k)/\\hat\\rho_k\\}\\, n_S^{(-k)}
        / n_T^{(-k)}`, with the same clipping and cap as the fitted weights.
        """
        self._check_fitted()
        X = check_array(X, "X")
        if X.shape[1] != self.n_features_in_:
            raise ValueError(f"X has {X.shape[1]} columns; the model was fitted with "
                             f"{self.n_features_in_}")
        c = float(self.domain_clip)
        w = np.zeros(X.shape[0])
        for model, factor in zip(self.domain_models_, self.odds_factors_, strict=True):
            rho = np.clip(predict_positive_proba(model, X), c, 1 - c)
            w += (1 - rho) / rho * factor / len(self.domain_models_)
        return w if self.max_weight is None else np.minimum(w, float(self.max_weight))

    def weight_summary(self):
        """Cheap subset of :meth:`diagnostics`: ESS, ESS fraction, max weight, weak-overlap flag."""
        self._check_fitted()
        w = self.weights_
        ess = float(w.sum() ** 2 / np.sum(w ** 2))
        return {"ess": ess, "ess_fraction": ess / w.size, "max_weight": float(w.max()),
                "weak_overlap": bool(ess / w.size < MIN_ESS_FRACTION)}

    def diagnostics(self, warn=True):
        """Overlap diagnostics of the fitted nuisances.

        Returns
        -------
        dict
            ``ess`` (:math:`(\\sum\\hat w)^2/\\sum\\hat w^2`), ``ess_fraction`` (ESS / n_S),
            ``mean_weight`` (close to 1 when the domain model is calibrated, since
            :math:`E_S[w] = 1`), ``max_weight``, ``weight_q50/q90/q99``, ``domain_auc``
            (out-of-fold AUC of the domain classifier; 0.5 means no detectable shift),
            ``min_propensity`` (smallest :math:`\\hat e(A_i|X_i)`), ``n_clipped_propensity``,
            ``n_clipped_domain``, ``n_capped_weights``, ``weak_overlap`` (ESS below 10% of n_S).
            With ``warn=True`` an :class:`~causalkit.exceptions.OverlapWarning` flags weak overlap.
        """
        self._check_fitted()
        w = self.weights_
        g = np.r_[np.ones(w.size), np.zeros(self.domain_target_.size)]
        out = {"n_source": int(w.size), "n_target": int(self.domain_target_.size),
               **self.weight_summary(), "mean_weight": float(w.mean()),
               **{f"weight_q{q}": float(np.quantile(w, q / 100)) for q in (50, 90, 99)},
               "domain_auc": float(roc_auc_score(g, np.r_[self.domain_source_,
                                                          self.domain_target_])),
               "min_propensity": float(self.propensity_[np.arange(w.size),
                                                        self.treatment_index_].min()),
               "n_clipped_propensity": self.n_clipped_propensity_,
               "n_clipped_domain": self.n_clipped_domain_,
               "n_capped_weights": self.n_capped_weights_}
        if warn:
            self._overlap_warning(out)
        return out

    @staticmethod
    def _overlap_warning(diag):
        if diag["weak_overlap"]:
            warnings.warn(f"weak overlap between source and target: the density-ratio weights "
                          f"have an effective sample size of {diag['ess']:.0f} "
                          f"({100 * diag['ess_fraction']:.1f}% of the source sample; max weight "
                          f"{diag['max_weight']:.3g}); intervals may under-cover",
                          OverlapWarning, stacklevel=3)

    def plot(self, ax=None):
        """Overlap figure: out-of-fold domain scores of both samples and the weight tail."""
        from causalkit.policy.plots import plot_overlap
        return plot_overlap(self, ax=ax)
