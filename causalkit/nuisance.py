"""Nuisance-model helpers: clone-and-fit, the one cross-fitter, seeding, probability clipping.

Nuisance models are scikit-learn estimators (any regressor, classifier or Pipeline, ensembles
included) passed in by the user; they are always cloned, never fitted in place, so the user's
object is left untouched, and ``None`` means the estimator's documented default. Every area
builds its folds with :func:`make_folds` (an int, a splitter or precomputed folds, as in
DoubleML's resampling) and stores them with the fitted fold models on the estimator.
"""

from __future__ import annotations

import numbers
import warnings

import numpy as np
from sklearn.base import clone, is_classifier
from sklearn.model_selection import KFold, StratifiedKFold
from sklearn.pipeline import Pipeline

from causalkit._validation import as_seed_sequence, check_positive_int, child_seed, seed_int
from causalkit.exceptions import ClippingWarning

__all__ = ["fit_clone", "make_folds", "cross_fit", "seeded", "default_if_none",
           "clip_probabilities", "predict_positive_proba"]


def fit_clone(model, X, y, sample_weight=None):
    """Fit a fresh clone of ``model`` on ``(X, y)`` and return it.

    ``sample_weight`` is passed to ``fit`` only when given; a Pipeline passes it to its final
    step (the preprocessing steps are fitted unweighted).
    """
    fitted = clone(model)
    if sample_weight is None:
        return fitted.fit(X, y)
    if isinstance(fitted, Pipeline):
        return fitted.fit(X, y, **{f"{fitted.steps[-1][0]}__sample_weight": sample_weight})
    return fitted.fit(X, y, sample_weight=sample_weight)


def predict_positive_proba(model, X) -> np.ndarray:
    """Probability of class 1 from a fitted binary classifier (column of ``classes_ == 1``)."""
    proba = model.predict_proba(X)
    classes = list(getattr(model, "classes_", [0, 1]))
    if 1 not in classes:
        raise ValueError("the classifier was fitted without class 1; cannot predict P(class=1)")
    return proba[:, classes.index(1)]


def make_folds(cv, n: int, *, stratify=None, groups=None, random_state=None) -> list:
    """The cross-fitting folds: a list of ``(train, test)`` index arrays.

    Parameters
    ----------
    cv : int, scikit-learn splitter, or precomputed folds
        * an int ``K >= 2``: shuffled ``StratifiedKFold`` on ``stratify`` when it is given and
          every level has at least ``K`` rows, else shuffled ``KFold``;
        * an object with ``split(X, y)`` (``KFold``, ``GroupKFold`` with fixed groups, ...);
        * a sequence of ``(train, test)`` index pairs, or an array of ``n`` fold labels.
    n : int
        Number of rows.
    stratify : array-like of shape (n,), optional
        Labels to stratify an int ``cv`` on (a binary target, a treatment, a sample indicator).
    groups : array-like of shape (n,), optional
        The unit each row belongs to: rows of one unit share a test fold. The data containers
        pass the original row of each row, which repeats only in a bootstrap resample; there
        an int ``cv`` splits the distinct units (stratified on each unit's ``stratify`` label)
        and every copy follows its unit, so no unit is both trained on and predicted. Without
        repeats the folds are those without ``groups``. A splitter receives ``groups`` in its
        ``split``; precomputed folds ignore it.
    random_state : None, int or SeedSequence
        Seed of the shuffle for an int ``cv``.

    Returns
    -------
    list of (ndarray, ndarray)
        Every row appears in exactly one test fold.
    """
    if groups is not None:
        groups = np.asarray(groups)
        if groups.shape != (n,):
            raise ValueError(f"groups must have length {n}; got shape {groups.shape}")
    if isinstance(cv, numbers.Integral) and not isinstance(cv, bool):
        cv = check_positive_int(cv, "cv", minimum=2)
        if groups is not None:
            units, first, unit_of_row = np.unique(groups, return_index=True,
                                                  return_inverse=True)
            if units.size < n:
                return _unit_folds(cv, unit_of_row, first, stratify, random_state)
        if cv > n:
            raise ValueError(f"cv={cv} folds need at least {cv} rows; got {n}")
        seed = seed_int(random_state)
        if stratify is not None:
            levels, counts = np.unique(np.asarray(stratify), return_counts=True)
            if levels.size > 1 and counts.min() >= cv:
                splitter = StratifiedKFold(cv, shuffle=True, random_state=seed)
                return list(splitter.split(np.zeros(n), np.asarray(stratify)))
        return list(KFold(cv, shuffle=True, random_state=seed).split(np.zeros(n)))
    if hasattr(cv, "split"):
        y = np.zeros(n) if stratify is None else np.asarray(stratify)
        folds = list(cv.split(np.zeros((n, 1)), y, groups))
    elif (isinstance(cv, np.ndarray) and cv.ndim == 1 and np.issubdtype(cv.dtype, np.integer)) \
            or (isinstance(cv, (list, tuple)) and len(cv) == n
                and all(isinstance(v, numbers.Integral) for v in cv)):
        labels = np.asarray(cv)
        folds = [(np.flatnonzero(labels != k), np.flatnonzero(labels == k))
                 for k in np.unique(labels)]
    else:
        try:
            folds = [(np.asarray(tr, dtype=int), np.asarray(te, dtype=int)) for tr, te in cv]
        except (TypeError, ValueError) as exc:
            raise TypeError("cv must be an int >= 2, a scikit-learn splitter, a list of "
                            f"(train, test) index pairs or {n} fold labels; got "
                            f"{type(cv).__name__}") from exc
    tested = np.concatenate([te for _, te in folds]) if folds else np.array([], dtype=int)
    if len(folds) < 2 or tested.size != n or np.unique(tested).size != n:
        raise ValueError(f"cv must give at least 2 folds whose test sets cover each of the {n} "
                         "rows exactly once")
    return folds


def _unit_folds(cv: int, unit_of_row, first, stratify, random_state) -> list:
    """Folds of an int ``cv`` over the distinct units, expanded to their rows (see
    :func:`make_folds`: ``unit_of_row`` indexes the units, ``first`` is each unit's first row)."""
    if cv > first.size:
        raise ValueError(f"cv={cv} folds need at least {cv} distinct units; got {first.size}")
    unit_strata = None if stratify is None else np.asarray(stratify)[first]
    fold_of_unit = np.empty(first.size, dtype=int)
    for k, (_, test) in enumerate(make_folds(cv, first.size, stratify=unit_strata,
                                             random_state=random_state)):
        fold_of_unit[test] = k
    fold = fold_of_unit[unit_of_row]
    return [(np.flatnonzero(fold != k), np.flatnonzero(fold == k)) for k in range(cv)]


def cross_fit(model, X, y, *, cv=5, method: str = "predict", stratify=None,
              random_state=None, sample_weight=None, predict_X=None,
              return_models: bool = False):
    """Out-of-fold predictions by K-fold cross-fitting.

    For each fold :math:`k`, a clone of ``model`` is fitted on the other folds and predicts the
    units of fold :math:`k`, so no unit's prediction uses its own outcome (Chernozhukov et al.
    2018, *Econometrics Journal* 21(1), "Double/debiased machine learning").

    Parameters
    ----------
    model : sklearn estimator (any regressor, classifier or Pipeline)
    X : ndarray of shape (n, p)
    y : ndarray of shape (n,)
    cv : int, splitter or precomputed folds
        See :func:`make_folds`.
    method : {"predict", "predict_proba"}
        "predict_proba" returns P(y = 1) of a binary classifier.
    stratify : array-like, optional
        Labels to stratify an int ``cv`` on (defaults to ``y`` for classifiers).
    random_state : None, int or SeedSequence
        Seed of the fold split; models with an unset ``random_state`` get one derived from it.
    sample_weight : array-like, optional
    predict_X : ndarray of shape (m, p), optional
        Extra points to predict: the average over the fold models is returned for them.
    return_models : bool
        Also return ``(folds, fitted_models)``.

    Returns
    -------
    ndarray of shape (n,); with ``predict_X`` a tuple ``(oof, extra)``; with ``return_models``
    the tuple gains ``folds`` and the list of fitted fold models.
    """
    if method not in ("predict", "predict_proba"):
        raise ValueError(f"method must be 'predict' or 'predict_proba'; got {method!r}")
    X = np.asarray(X, dtype=float)
    y = np.asarray(y)
    n = X.shape[0]
    if stratify is None and (method == "predict_proba" or is_classifier(model)):
        stratify = y
    folds = make_folds(cv, n, stratify=stratify, random_state=random_state)
    if random_state is not None:
        model = seeded(model, seed_int(child_seed(as_seed_sequence(random_state), 1)))
    predict = predict_positive_proba if method == "predict_proba" else (lambda m, Z: m.predict(Z))
    oof = np.empty(n, dtype=float)
    extra = None if predict_X is None else np.zeros(np.shape(predict_X)[0])
    models = []
    for train, test in folds:
        w = None if sample_weight is None else np.asarray(sample_weight)[train]
        fitted = fit_clone(model, X[train], y[train], sample_weight=w)
        oof[test] = predict(fitted, X[test])
        if extra is not None:
            extra += predict(fitted, predict_X) / len(folds)
        models.append(fitted)
    out = (oof,) if extra is None else (oof, extra)
    if return_models:
        out = (*out, folds, models)
    return out[0] if len(out) == 1 else out


def seeded(model, seed: int | None):
    """An unfitted clone of ``model`` whose unset ``random_state`` parameters (also inside a
    Pipeline or meta-estimator) are ``seed``; a ``random_state`` the user set is kept."""
    model = clone(model)
    if seed is None:
        return model
    params = model.get_params(deep=True)
    fixed = {k: int(seed) for k, v in params.items()
             if (k == "random_state" or k.endswith("__random_state")) and v is None}
    return model.set_params(**fixed) if fixed else model


def default_if_none(model, default):
    """``model`` unless it is ``None``, then ``default()``. Never calls ``bool()`` on the model
    (an unfitted scikit-learn ensemble raises on it)."""
    return default() if model is None else model


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
