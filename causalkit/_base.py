"""The estimator core every statistical estimator of causalkit inherits.

One protocol for the three areas (borrowing, long-term, policy):

* ``fit(X, y, treatment, *, <area roles>)`` with arrays, or the DataFrame front end
  ``fit(df, y="re78", treatment="treat", trial="trial", covariates=[...])``: string roles name
  columns of ``X`` (:func:`resolve_roles`). pandas inputs are aligned on their index, never
  matched by position when the indexes disagree. Extra positional arguments (an old argument
  order) raise a ``TypeError`` that names the keyword to use.
* ``estimate(inference=None, *, alpha, n_boot, n_jobs, random_state, progress)`` returns a
  :class:`causalkit.Estimate`. ``inference`` is ``"influence"`` (the influence-function interval
  of the estimator) or ``"bootstrap"`` (the pipeline bootstrap: every nuisance fit, selection and
  calibration is redone on each resample, drawn within the strata of the data container, and
  its cross-fitting folds keep the copies of a unit together); each estimator states its
  default. Bootstrap results are cached on the estimator.
* Seeds: ``random_state`` (None, an int or a ``numpy.random.SeedSequence``) seeds everything
  through :meth:`CausalEstimator.seed_for`, which derives an independent stream per named use
  (folds, nested models, bootstrap) from one ``SeedSequence``, so adding a use never shifts
  another's numbers.
* ``check_is_fitted`` (scikit-learn's ``NotFittedError``) everywhere; ``summary()``,
  ``to_frame()`` and ``plot()`` on every estimator.

The anchors are econml's ``BaseCateEstimator`` (one base for fit/inference) and DoubleML's data
container plus resampling (Bach et al. 2022, *JMLR* 23(53)).
"""

from __future__ import annotations

import contextlib
import functools
import sys
import warnings
import zlib
from abc import ABCMeta, abstractmethod
from collections.abc import Mapping

import numpy as np
import pandas as pd
from sklearn.base import BaseEstimator, clone
from sklearn.utils.validation import check_is_fitted
from threadpoolctl import ThreadpoolController

from causalkit._validation import (
    as_seed_sequence,
    check_alpha,
    check_n_jobs,
    check_positive_int,
    child_seed,
)
from causalkit.exceptions import CausalkitWarning
from causalkit.inference import Estimate, bootstrap

__all__ = ["CausalEstimator", "INFERENCE", "resolve_roles", "reject_positional_roles"]

#: The interval vocabulary of every estimator.
INFERENCE = ("influence", "bootstrap")


# ------------------------------------------------------------------- the DataFrame front end
def reject_positional_roles(estimator, extra: tuple, keywords: str) -> None:
    """Raise a clear ``TypeError`` for positional arguments beyond ``X, y, treatment``.

    ``keywords`` names the area's keyword roles, e.g. ``"trial="``.
    """
    if extra:
        name = type(estimator).__name__
        raise TypeError(
            f"{name}.fit takes X, y and treatment positionally and {keywords} by keyword; got "
            f"{3 + len(extra)} positional arguments. Write {name}().fit(X, y, treatment, "
            f"{keywords.split(',')[0].strip()}...)")


def _is_column_spec(value) -> bool:
    if isinstance(value, str):
        return True
    return (isinstance(value, (list, tuple)) and len(value) > 0
            and all(isinstance(v, str) for v in value))


def _align(value, index: pd.Index, name: str):
    """A pandas role aligned on ``index`` (X's index); other inputs pass through unchanged."""
    if not isinstance(value, (pd.Series, pd.DataFrame)):
        return value
    if value.index.equals(index):
        return value
    if len(value.index) != len(index):
        return value                    # the length check of the validators names it
    if not (value.index.is_unique and index.is_unique) or not value.index.sort_values().equals(
            index.sort_values()):
        raise ValueError(f"{name} and X have different indexes (first differing labels: "
                         f"{list(value.index.difference(index)[:3])} vs "
                         f"{list(index.difference(value.index)[:3])}); align them or pass arrays")
    return value.loc[index]


def resolve_roles(X, roles: Mapping, *, covariates=None, frames: tuple = ()):
    """Turn the DataFrame front end into arrays and covariate frames.

    Parameters
    ----------
    X : DataFrame or array-like
        The (source) data. When a role is a column name, ``X`` must be a DataFrame holding it.
    roles : mapping name -> value
        ``y``, ``treatment`` and the area roles. A string (or a list of strings, for
        multi-column roles such as ``short``) names columns of ``X``; a pandas object is aligned
        on ``X``'s index; anything else is passed through.
    covariates : list of str, optional
        Covariate columns. Default: every column of ``X`` not used by a role. Given with
        array input it is an error.
    frames : tuple of str
        Names of roles that are other samples' covariate frames (``X_target``); their
        covariates are the same columns.

    Returns
    -------
    X : DataFrame or array
        The covariates only.
    roles : dict
        The resolved roles (pandas objects aligned, column names replaced by columns).

    Raises
    ------
    ValueError
        A named column that ``X`` lacks, a column used twice, covariates with array input, or
        pandas roles whose index disagrees with ``X``'s.
    TypeError
        Non-numeric covariate columns (named) — encode them first.
    """
    roles = dict(roles)
    named = {k: v for k, v in roles.items() if k not in frames and _is_column_spec(v)}
    if not isinstance(X, pd.DataFrame):
        if named:
            first = next(iter(named))
            raise TypeError(f"{first}={named[first]!r} names a column, which needs X to be a "
                            f"pandas DataFrame; got {type(X).__name__}")
        if covariates is not None:
            raise TypeError("covariates= selects DataFrame columns; X is not a DataFrame")
        return X, roles
    if not X.columns.is_unique:
        dup = sorted({str(c) for c in X.columns[X.columns.duplicated()]})
        raise ValueError(f"X has duplicate column names {dup}")
    used = []
    for key, spec in named.items():
        cols = [spec] if isinstance(spec, str) else list(spec)
        missing = [c for c in cols if c not in X.columns]
        if missing:
            raise ValueError(f"{key}: column(s) {missing} not in X; columns: "
                             f"{list(map(str, X.columns))}")
        roles[key] = X[spec] if isinstance(spec, str) else X[cols]
        used += cols
    clash = sorted({c for c in used if used.count(c) > 1})
    if clash:
        raise ValueError(f"column(s) {clash} are given to more than one role")
    if covariates is None:
        cov = [c for c in X.columns if c not in used]
    else:
        cov = [covariates] if isinstance(covariates, str) else list(covariates)
        missing = [c for c in cov if c not in X.columns]
        if missing:
            raise ValueError(f"covariates: column(s) {missing} not in X")
        overlap = [c for c in cov if c in used]
        if overlap:
            raise ValueError(f"covariates: column(s) {overlap} are also role columns (y, "
                             "treatment or an area role); a column has one role")
    if not cov:
        raise ValueError("X has no covariate columns left after removing the role columns")
    for key, value in list(roles.items()):
        if key in frames:
            if isinstance(value, pd.DataFrame):
                missing = [c for c in cov if c not in value.columns]
                if missing:
                    raise ValueError(f"{key} lacks the covariate column(s) {missing}")
                roles[key] = value[cov]
        else:
            roles[key] = _align(value, X.index, key)
    return X[cov], roles


# ------------------------------------------------------------------------ the base class
@functools.cache
def _threadpools() -> ThreadpoolController:
    """The process's BLAS/OpenMP thread pools, inspected once (building a controller scans the
    loaded libraries, which cost 25 ms per bootstrap replicate when done each time)."""
    return ThreadpoolController()


@contextlib.contextmanager
def fit_blas_threads(n_threads):
    """Inside the block, every estimator fits with ``n_threads`` BLAS threads (None: the
    process's pool as it is) instead of its ``_fit_blas_threads``; the benchmarks time the
    default both ways with it."""
    saved, CausalEstimator._fit_blas_threads = CausalEstimator._fit_blas_threads, n_threads
    try:
        yield
    finally:
        CausalEstimator._fit_blas_threads = saved


class _Refit:
    """Picklable bootstrap replicate: refit a clone on resampled data, return its point value.

    A replicate runs on one thread: its BLAS and OpenMP pools are limited to one thread (the
    refits are many small fits, where OpenBLAS threads spin more than they compute) and an
    estimator with an ``n_jobs`` parameter refits with ``n_jobs=1``; the bootstrap's own
    ``n_jobs`` spreads the replicates over the cores.
    """

    def __init__(self, estimator, target):
        self.estimator = estimator
        self.target = target

    def __call__(self, data) -> float:
        est = clone(self.estimator)
        if "n_jobs" in est.get_params(deep=False):
            est.set_params(n_jobs=1)
        with warnings.catch_warnings(), _threadpools().limit(limits=1):
            warnings.simplefilter("ignore", CausalkitWarning)
            est._fit_data(data)
            return self._value(est)

    def _value(self, est) -> float:
        """The replicate's value from the refitted clone (override to evaluate otherwise)."""
        return est._point_estimate(self.target)


class CausalEstimator(BaseEstimator, metaclass=ABCMeta):
    """Base class of every statistical estimator.

    Subclasses define ``fit`` (validating into a data container, then calling
    :meth:`_fit_data`), ``_fit(data)`` (learning; sets fitted attributes),
    ``_point_estimate(target)`` (the point value, cheap after ``_fit``) and
    ``_influence_estimate(target)`` (an :class:`Estimate` with the influence-function SE).

    A data container has ``n_rows``, ``strata`` (labels the bootstrap resamples within, or
    ``None``) and ``take(idx)`` returning the same kind of container on rows ``idx``, whose
    ``units`` give the row each copies (cross-fitting passes them to
    ``causalkit.nuisance.make_folds(groups=...)``).

    Class attributes: ``_default_inference`` (``"influence"`` or ``"bootstrap"``),
    ``_inferences`` (the kinds it supports), ``_bootstrap_ci`` (the interval the bootstrap
    reports: ``"percentile"`` or ``"normal"``), ``_tests_null`` (``False`` where a null of 0 means
    nothing, as for a policy value: results then carry no z or p-value), ``_label`` (shown in
    summaries), ``_estimand``, ``_fit_blas_threads`` (BLAS threads while fitting; None leaves
    the process's pool as it is).
    ``_replicate(target)`` returns the bootstrap's ``fit_fn`` (default: refit a clone of the
    whole estimator).

    Fits run with one BLAS thread by default: they are many small fits (cross-fitted nuisances,
    stage regressions, policies, some beside threads of their own), where BLAS threads spin more
    than they compute. ``benchmarks/policy.py`` and ``benchmarks/longterm.py`` time the default
    fits both ways (:func:`fit_blas_threads`); OpenMP pools (histogram gradient boosting) are
    left as they are, and the simulation engine and the bootstrap replicates already ran with
    one thread.
    """

    _default_inference = "influence"
    _inferences = INFERENCE
    _bootstrap_ci = "percentile"
    _tests_null = True
    _label = "Estimator"
    _estimand = "ATE"
    _fit_blas_threads = 1

    # -- seeds
    def seed_for(self, purpose: str) -> np.random.SeedSequence:
        """Independent ``SeedSequence`` for one named use (e.g. ``"folds"``, ``"bootstrap"``),
        derived from ``random_state`` (with ``None``, from fresh entropy drawn at ``fit``)."""
        root = getattr(self, "_seed_root", None)
        if root is None:
            root = as_seed_sequence(getattr(self, "random_state", None))
        return child_seed(root, zlib.crc32(purpose.encode()))

    def _fit_data(self, data) -> CausalEstimator:
        """Fit on a validated data container; store it for the bootstrap."""
        self._seed_root = as_seed_sequence(getattr(self, "random_state", None))
        self._bootstrap_cache = {}
        if self._fit_blas_threads is None:
            self._fit(data)
        else:
            with _threadpools().limit(limits=self._fit_blas_threads, user_api="blas"):
                self._fit(data)
        self.data_ = data
        return self

    @abstractmethod
    def _fit(self, data) -> None:
        """Learn from a validated data container; set the fitted attributes."""

    @abstractmethod
    def _point_estimate(self, target=None) -> float:
        """The point value (cheap after ``_fit``; the bootstrap calls it on every refit)."""

    @abstractmethod
    def _influence_estimate(self, target=None) -> Estimate:
        """The :class:`Estimate` with the influence-function standard error."""

    # -- inference
    def _analytic_estimate(self, inference: str, target=None) -> Estimate:
        """The :class:`Estimate` of an ``inference`` other than the bootstrap (default: the
        influence function's; estimators with another analytic interval override this)."""
        return self._influence_estimate(target)

    def _replicate(self, target):
        """Picklable ``fit_fn`` of the bootstrap: the point value from a resampled container."""
        return _Refit(self, target)

    def _check_inference(self, inference):
        inference = self._default_inference if inference is None else inference
        if inference not in self._inferences:
            raise ValueError(f"inference must be one of {self._inferences} for "
                             f"{type(self).__name__}; got {inference!r}")
        return inference

    def _estimate(self, inference, *, target=None, target_key=None, alpha=0.05, n_boot=200,
                  n_jobs=1, random_state=None, progress=None, name=None) -> Estimate:
        check_is_fitted(self, "data_")
        inference = self._check_inference(inference)
        alpha = check_alpha(alpha)
        if inference != "bootstrap":
            out = self._analytic_estimate(inference, target)
        else:
            n_boot = check_positive_int(n_boot, "n_boot", minimum=2)
            n_jobs = 1 if check_n_jobs(n_jobs) is None else n_jobs
            seq = (self.seed_for("bootstrap") if random_state is None
                   else as_seed_sequence(random_state))
            # entropy is an int or, for SeedSequence([a, b]), a list: key it as a tuple
            key = (n_boot, tuple(np.atleast_1d(seq.entropy).tolist()), seq.spawn_key,
                   target_key)
            out = self._bootstrap_cache.get(key)
            if out is None:
                show = sys.stderr.isatty() if progress is None else bool(progress)
                data = self.data_
                out = bootstrap(self._replicate(target), data, n_boot=n_boot,
                                random_state=seq, n_jobs=n_jobs, strata=data.strata,
                                ci_method=self._bootstrap_ci,
                                method=self._label, name=name or self._estimand, progress=show,
                                point=self._point_estimate(target))
                out.details.update(self._details())
                self._bootstrap_cache[key] = out
            out = out.copy()
        out.alpha = alpha
        if name is not None:
            out.name = name
        if not self._tests_null:
            out.null_value = None
        return out

    def estimate(self, inference=None, *, alpha=0.05, n_boot=200, n_jobs=1, random_state=None,
                 progress=None) -> Estimate:
        """The estimand with its standard error and confidence interval.

        Parameters
        ----------
        inference : {"influence", "bootstrap"} or another kind the estimator lists, optional
            ``"influence"``: normal interval from the estimator's influence function.
            ``"bootstrap"``: refit the whole pipeline on ``n_boot`` resamples drawn within the
            data's strata and report the percentile interval of the replicates or, where the
            class docstring says so, the normal interval with their SD as the SE (cached: a
            second call with the same ``n_boot`` and seed returns the stored result; the other
            interval is ``conf_int(method=...)``). Default: the estimator's own
            choice (see its class docstring; e.g. ``"fab"`` for
            :class:`~causalkit.borrowing.AdaptiveBorrowing`).
        alpha : float
            Level of the interval the result reports by default (0.05: 95%).
        n_boot : int
            Bootstrap resamples.
        n_jobs : int
            joblib workers for the bootstrap (results do not depend on it).
        random_state : None, int or SeedSequence
            Seed of the bootstrap; default: derived from the estimator's ``random_state``.
        progress : bool, optional
            tqdm progress bar for the bootstrap; default on when standard error is a terminal.

        Returns
        -------
        causalkit.Estimate
        """
        return self._estimate(inference, alpha=alpha, n_boot=n_boot, n_jobs=n_jobs,
                              random_state=random_state, progress=progress)

    def _details(self) -> dict:
        """Scalar diagnostics shown in summaries (override)."""
        return {}

    # -- reporting
    def summary(self, **estimate_kwargs) -> str:
        """Text summary of :meth:`estimate` (keyword arguments are passed on)."""
        return self.estimate(**estimate_kwargs).summary()

    def to_frame(self, **estimate_kwargs) -> pd.DataFrame:
        """One-row table of :meth:`estimate` (keyword arguments are passed on)."""
        return self.estimate(**estimate_kwargs).to_frame()

    def plot(self, ax=None, **estimate_kwargs):
        """The estimate and its interval; estimators with richer diagnostics override this.
        Returns the matplotlib Figure."""
        from causalkit.plotting import plot_estimates

        est = self.estimate(**estimate_kwargs)
        return plot_estimates({est.method or self._label: est}, ax=ax).figure
