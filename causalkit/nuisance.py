"""Nuisance-model helpers: clone-and-fit, K-fold cross-fitting, probability clipping.

Nuisance models are scikit-learn estimators passed in by the user; they are always cloned, never
fitted in place, so the user's object is left untouched.
"""

from __future__ import annotations

import warnings

import numpy as np
from sklearn.base import clone, is_classifier
from sklearn.model_selection import KFold, StratifiedKFold

from causalkit._validation import check_positive_int
from causalkit.exceptions import ClippingWarning

__all__ = ["fit_clone", "cross_fit", "clip_probabilities", "predict_positive_proba"]


def fit_clone(model, X, y, sample_weight=None):
    """Fit a fresh clone of ``model`` on ``(X, y)`` and return it.

    ``sample_weight`` is passed to ``fit`` only when given.
    """
    fitted = clone(model)
    if sample_weight is None:
        return fitted.fit(X, y)
    return fitted.fit(X, y, sample_weight=sample_weight)


def predict_positive_proba(model, X) -> np.ndarray:
    """Probability of class 1 from a fitted binary classifier (column of ``classes_ == 1``)."""
    proba = model.predict_proba(X)
    classes = list(getattr(model, "classes_", [0, 1]))
    if 1 not in classes:
        raise ValueError("the classifier was fitted without class 1; cannot predict P(class=1)")
    return proba[:, classes.index(1)]


def cross_fit(model, X, y, *, cv: int = 5, method: str = "predict", stratify=None,
              random_state=None, sample_weight=None, predict_X=None):
    """Out-of-fold predictions by K-fold cross-fitting.

    For each fold :math:`k`, a clone of ``model`` is fitted on the other folds and predicts the
    units of fold :math:`k`, so no unit's prediction uses its own outcome (Chernozhukov et al.
    2018, *Econometrics Journal* 21(1), "Double/debiased machine learning").

    Parameters
    ----------
    model : sklearn estimator
    X : ndarray of shape (n, p)
    y : ndarray of shape (n,)
    cv : int
        Number of folds (>= 2).
    method : {"predict", "predict_proba"}
        "predict_proba" returns P(y = 1) of a binary classifier.
    stratify : array-like, optional
        Labels to stratify folds on (defaults to ``y`` for classifiers).
    random_state : int or None
        Seed of the fold split.
    sample_weight : array-like, optional
    predict_X : ndarray of shape (m, p), optional
        Extra points to predict: the average over the ``cv`` fold models is returned for them.

    Returns
    -------
    ndarray of shape (n,), or a tuple ``(oof, extra)`` when ``predict_X`` is given.
    """
    cv = check_positive_int(cv, "cv", minimum=2)
    if method not in ("predict", "predict_proba"):
        raise ValueError(f"method must be 'predict' or 'predict_proba'; got {method!r}")
    X = np.asarray(X, dtype=float)
    y = np.asarray(y)
    n = X.shape[0]
    if cv > n:
        raise ValueError(f"cv={cv} folds need at least {cv} rows; got {n}")
    if stratify is None and (method == "predict_proba" or is_classifier(model)):
        stratify = y
    if stratify is not None:
        splitter = StratifiedKFold(cv, shuffle=True, random_state=random_state)
        splits = splitter.split(X, stratify)
    else:
        splits = KFold(cv, shuffle=True, random_state=random_state).split(X)
    predict = predict_positive_proba if method == "predict_proba" else (lambda m, Z: m.predict(Z))
    oof = np.empty(n, dtype=float)
    extra = None if predict_X is None else np.zeros(np.shape(predict_X)[0])
    for train, test in splits:
        w = None if sample_weight is None else np.asarray(sample_weight)[train]
        fitted = fit_clone(model, X[train], y[train], sample_weight=w)
        oof[test] = predict(fitted, X[test])
        if extra is not None:
            extra += predict(fitted, predict_X) / cv
    return oof if extra is None else (oof, extra)


def clip_probabilities(p, bounds=(0.01, 0.99), *, name: str = "propensity") -> np.ndarray:
    """Clip estimated probabilities to ``[lower, upper]``, warning when clipping binds.

    Clipping bounds inverse-probability weights by ``1/lower`` and ``1/(1-upper)``; it trades a
    small bias for bounded variance (Crump et al. 2009, *Biometrika* 96(1)).
    """
    lower, upper = bounds
    if not 0.0 <= lower < upper <= 1.0:
        raise ValueError(f"bounds must satisfy 0 <= lower < upper <= 1; got {bounds!r}")
    p = np.asarray(p, dtype=float)
    n_low = int(np.sum(p < lower))
    n_high = int(np.sum(p > upper))
    if n_low or n_high:
        warnings.warn(f"{name}: {n_low} value(s) clipped up to {lower} and {n_high} down to "
                      f"{upper} (of {p.size})", ClippingWarning, stacklevel=2)
    return np.clip(p, lower, upper)
