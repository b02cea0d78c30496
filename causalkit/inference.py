"""Inference core: the :class:`~causalkit.inference.Estimate` every estimator returns, the
nonparametric bootstrap, and helpers that combine estimates through their influence functions.

Conventions
-----------
An asymptotically linear estimator :math:`\\hat\\theta` of :math:`\\theta` satisfies

.. math:: \\hat\\theta - \\theta = \\frac{1}{n} \\sum_{i=1}^n \\varphi_i + o_p(n^{-1/2}),

with influence values :math:`\\varphi_i` of mean zero. ``Estimate.influence`` stores
:math:`\\varphi_i` (one per unit of the sample the estimator was fitted on), and
:meth:`Estimate.from_influence` sets the standard error to
:math:`\\sqrt{\\sum_i (\\varphi_i - \\bar\\varphi)^2} / n`.
Reference: Tsiatis (2006), *Semiparametric Theory and Missing Data*, ch. 3.
"""

from __future__ import annotations

import html
import warnings
from collections.abc import Callable, Mapping, Sequence

import numpy as np
import pandas as pd
from joblib import Parallel, delayed
from scipy.special import ndtr, ndtri

from causalkit._validation import (
    check_alpha,
    check_binary,
    check_both_arms,
    check_positive_int,
    check_vector,
)
from causalkit.exceptions import BootstrapFailureWarning

__all__ = ["Estimate", "bootstrap", "difference_in_means", "contrast", "inverse_variance_pool"]

_CI_METHODS = ("normal", "percentile", "fab")


class Estimate:
    """A point estimate with its standard error, confidence interval and diagnostics.

    Parameters
    ----------
    value : float
        The point estimate.
    std_error : float
        Its estimated standard error (must be finite and >= 0).
    influence : array-like of shape (n,), optional
        Influence values :math:`\\varphi_i` (see the module docstring).
    name : str
        What is estimated, e.g. ``"ATE"`` or ``"policy value"``.
    method : str, optional
        The estimator that produced it (shown in summaries).
    n_obs : int, optional
        Number of observations used; defaults to ``len(influence)``.
    replicates : array-like, optional
        Bootstrap replicates of the estimate, enabling percentile intervals.
    ci_method : {"normal", "percentile", "fab"}
        Default interval type of :meth:`conf_int`; ``"fab"`` needs ``interval``.
    interval : causalkit.fab.FABInterval, optional
        An interval built from a direct and an independent indirect estimate
        (:mod:`causalkit.fab`); with ``ci_method="fab"`` it gives the interval, and the p-value
        (and the z statistic, its normal equivalent) come from inverting the same tests.
    details : mapping, optional
        Extra scalar diagnostics (e.g. ``{"n_borrowed": 120}``), shown by :meth:`summary` and
        :meth:`to_frame`.
    alpha : float
        Default level of :meth:`conf_int`, :meth:`summary` and :meth:`to_frame` (0.05: 95%).
    null_value : float or None
        The value :math:`\\theta_0` of the null hypothesis tested by :attr:`zstat` and
        :attr:`pvalue` (default 0: no effect). ``None`` where no null is meaningful (a policy
        value, a mean outcome): the z statistic and p-value are then NaN and left out of
        :meth:`summary`, :meth:`to_frame` and the HTML view.

    Notes
    -----
    Normal-theory quantities: :math:`z = (\\hat\\theta - \\theta_0) / \\widehat{se}`, two-sided
    p-value :math:`2\\{1 - \\Phi(|z|)\\}`,
    interval :math:`\\hat\\theta \\pm z_{1-\\alpha/2}\\,\\widehat{se}`.
    The percentile interval is :math:`[q_{\\alpha/2}, q_{1-\\alpha/2}]` of the replicates
    (Efron & Tibshirani 1993, ch. 13).

    Reports show the estimate, its standard error and interval with the decimals that give the
    larger of :math:`|\\hat\\theta|` and :math:`\\widehat{se}` four significant digits (none from
    1000 up), so dollars read ``[685, 3022]`` and small effects keep their digits.

    Examples
    --------
    >>> est = Estimate(1853.4, 596.2, name="ATE", method="AIB")
    >>> est
    Estimate(AIB, ATE=1853, se=596, 95% CI=[685, 3022])
    >>> round(est.pvalue, 4)
    0.0019
    >>> Estimate(0.61, 0.02, name="policy value", null_value=None).to_frame().columns.tolist()
    ['estimate', 'std_error', 'ci_lower', 'ci_upper']
    """

    def __init__(self, value, std_error, *, influence=None, name="ATE", method=None, n_obs=None,
                 replicates=None, ci_method="normal", details=None, alpha=0.05,
                 null_value=0.0, interval=None):
        value = float(value)
        std_error = float(std_error)
        if not np.isfinite(value):
            raise ValueError(f"value must be finite; got {value}")
        if not (np.isfinite(std_error) and std_error >= 0):
            raise ValueError(f"std_error must be finite and >= 0; got {std_error}")
        if ci_method not in _CI_METHODS:
            raise ValueError(f"ci_method must be one of {_CI_METHODS}; got {ci_method!r}")
        if ci_method == "percentile" and replicates is None:
            raise ValueError("ci_method='percentile' needs bootstrap replicates")
        if ci_method == "fab" and interval is None:
            raise ValueError("ci_method='fab' needs interval (a causalkit.fab.FABInterval)")
        self.interval = interval
        self.value = value
        self.std_error = std_error
        self.influence = None if influence is None else np.asarray(influence, dtype=float)
        self.name = str(name)
        self.method = method
        self.n_obs = int(n_obs) if n_obs is not None else (
            None if self.influence is None else self.influence.shape[0])
        self.replicates = None if replicates is None else np.asarray(replicates, dtype=float)
        self.ci_method = ci_method
        self.details = dict(details or {})
        self.alpha = check_alpha(alpha)
        if null_value is not None:
            null_value = float(null_value)
            if not np.isfinite(null_value):
                raise ValueError(f"null_value must be a finite number or None; got {null_value}")
        self.null_value = null_value

    def copy(self) -> Estimate:
        """A copy whose ``details`` (and label attributes) can be changed independently."""
        new = object.__new__(Estimate)
        new.__dict__.update(self.__dict__)
        new.details = dict(self.details)
        return new

    @classmethod
    def from_influence(cls, value, influence, **kwargs) -> Estimate:
        """Build an estimate whose SE is :math:`\\sqrt{\\sum_i(\\varphi_i-\\bar\\varphi)^2}/n`."""
        phi = check_vector(influence, "influence")
        if phi.size < 2:
            raise ValueError("influence needs at least 2 values to estimate a standard error")
        se = float(np.sqrt(np.sum((phi - phi.mean()) ** 2)) / phi.size)
        return cls(value, se, influence=phi, **kwargs)

    @property
    def zstat(self) -> float:
        """Wald statistic for H0: value = ``null_value`` (``inf`` when the SE is zero and the
        value differs from the null; NaN when ``null_value`` is None)."""
        if self.null_value is None:
            return float("nan")
        diff = self.value - self.null_value
        if self.ci_method == "fab":
            return float(-np.sign(diff) * ndtri(self.pvalue / 2))
        if self.std_error == 0:
            return 0.0 if diff == 0 else float(np.sign(diff) * np.inf)
        return diff / self.std_error

    @property
    def pvalue(self) -> float:
        """Two-sided p-value for H0: value = ``null_value`` (NaN when it is None): normal, or
        with ``ci_method="fab"`` that of the FAB tests behind the interval."""
        if self.null_value is not None and self.ci_method == "fab":
            return self.interval.pvalue(self.null_value)
        return float(2.0 * ndtr(-abs(self.zstat)))

    def conf_int(self, alpha: float | None = None,
                 method: str | None = None) -> tuple[float, float]:
        """Two-sided :math:`1-\\alpha` confidence interval ``(lower, upper)``.

        Parameters
        ----------
        alpha : float, optional
            Level; 0.05 gives a 95% interval. Default ``self.alpha``.
        method : {"normal", "percentile", "fab"}, optional
            Defaults to ``self.ci_method``; "percentile" needs bootstrap replicates, "fab" an
            ``interval``.
        """
        alpha = self.alpha if alpha is None else check_alpha(alpha)
        method = self.ci_method if method is None else method
        if method == "normal":
            half = ndtri(1 - alpha / 2) * self.std_error
            return (self.value - half, self.value + half)
        if method == "percentile":
            if self.replicates is None:
                raise ValueError("method='percentile' needs bootstrap replicates")
            lo, hi = np.quantile(self.replicates, [alpha / 2, 1 - alpha / 2])
            return (float(lo), float(hi))
        if method == "fab":
            if self.interval is None:
                raise ValueError("method='fab' needs an interval (causalkit.fab.FABInterval)")
            return self.interval.conf_int(alpha)
        raise ValueError(f"method must be one of {_CI_METHODS}; got {method!r}")

    def _tested(self) -> bool:
        return self.null_value is not None

    def to_frame(self, alpha: float | None = None) -> pd.DataFrame:
        """One-row DataFrame: estimate, std_error, z, p_value, ci_lower, ci_upper, details.

        The numbers are kept at full precision; ``z`` and ``p_value`` are left out when
        ``null_value`` is None. The row label is ``method`` (else ``name``).
        """
        lo, hi = self.conf_int(alpha)
        row = {"estimate": self.value, "std_error": self.std_error}
        if self._tested():
            row.update(z=self.zstat, p_value=self.pvalue)
        row.update(ci_lower=lo, ci_upper=hi)
        row.update(self.details)
        index = pd.Index([self.method or self.name], name="method")
        return pd.DataFrame([row], index=index)

    def summary(self, alpha: float | None = None) -> str:
        """A statsmodels-style text table (numbers formatted by magnitude, labels in full)."""
        alpha = self.alpha if alpha is None else check_alpha(alpha)
        lo, hi = self.conf_int(alpha)
        level = f"{100 * (1 - alpha):g}%"
        digits = _decimals(self.value, self.std_error)
        cells = {"coef": _fixed(self.value, digits), "std err": _fixed(self.std_error, digits)}
        if self._tested():
            cells.update({"z": f"{self.zstat:.2f}", "P>|z|": _format_pvalue(self.pvalue)})
        cells.update({"[" + level: _fixed(lo, digits), "CI]": _fixed(hi, digits)})
        label_width = max(14, len(self.name) + 2)
        widths = {k: max(len(k), len(v)) + 3 for k, v in cells.items()}
        head = f"{'':<{label_width}}" + "".join(f"{k:>{w}}" for k, w in widths.items())
        line = f"{self.name:<{label_width}}" + "".join(
            f"{v:>{widths[k]}}" for k, v in cells.items())
        title = f"{self.method or 'Estimate'}: {self.name}"
        meta = {"No. observations": self.n_obs, "Interval": self.ci_method}
        if self._tested() and self.null_value != 0:
            meta["Null value"] = self.null_value
        meta.update(self.details)
        shown = {key: _format_scalar(val) for key, val in meta.items() if val is not None}
        width = max([len(head), len(title)] + [len(k) + len(v) + 3 for k, v in shown.items()])
        rows = [title.center(width), "=" * width]
        rows += [f"{key + ':':<{width - len(val)}}{val}" for key, val in shown.items()]
        rows += ["-" * width, head, "-" * width, line, "=" * width]
        return "\n".join(rows)

    def __repr__(self) -> str:
        lo, hi = self.conf_int()
        digits = _decimals(self.value, self.std_error)
        method = f"{self.method}, " if self.method else ""
        level = f"{100 * (1 - self.alpha):g}%"
        return (f"Estimate({method}{self.name}={_fixed(self.value, digits)}, "
                f"se={_fixed(self.std_error, digits)}, "
                f"{level} CI=[{_fixed(lo, digits)}, {_fixed(hi, digits)}])")

    def _repr_html_(self) -> str:
        caption = html.escape(f"{self.method or 'Estimate'}: {self.name}")
        frame = self.to_frame()
        digits = _decimals(self.value, self.std_error)
        formatters = {col: _format_scalar for col in frame.columns}
        formatters.update({col: (lambda v: _fixed(v, digits))
                           for col in ("estimate", "std_error", "ci_lower", "ci_upper")})
        if self._tested():
            formatters.update(z=lambda v: f"{v:.2f}", p_value=_format_pvalue)
        table = frame.to_html(formatters=formatters)
        return f"<div class='causalkit-estimate'><strong>{caption}</strong>{table}</div>"


def _decimals(*values: float) -> int:
    """Decimals that give the largest ``|value|`` four significant digits (0 from 1000 up)."""
    finite = [abs(v) for v in values if np.isfinite(v) and v != 0]
    if not finite:
        return 4
    return int(np.clip(3 - np.floor(np.log10(max(finite))), 0, 12))


def _fixed(value: float, digits: int) -> str:
    return f"{value:.{digits}f}" if np.isfinite(value) else str(value)


def _format_scalar(value) -> str:
    """A detail value: integers as they are, floats by their own magnitude."""
    if isinstance(value, (float, np.floating)):
        return _fixed(float(value), _decimals(float(value)))
    return str(value)


def _format_pvalue(p: float) -> str:
    return "<0.001" if p < 0.001 else f"{p:.3f}"


def difference_in_means(y, treatment, *, name: str = "ATE") -> Estimate:
    """Difference in means with the Neyman (unequal-variance) standard error.

    .. math:: \\hat\\tau = \\bar y_1 - \\bar y_0, \\qquad
              \\widehat{se} = \\sqrt{s_1^2/n_1 + s_0^2/n_0},

    with :math:`s_a^2` the sample variances (``ddof=1``). Influence values are
    :math:`\\varphi_i = n\\{A_i (y_i-\\bar y_1)/n_1 - (1-A_i)(y_i-\\bar y_0)/n_0\\}`.
    Reference: Imbens & Rubin (2015), *Causal Inference*, eq. 6.18.
    """
    a = check_binary(treatment, "treatment")
    y = check_vector(y, "y", n=a.size)
    check_both_arms(a, "treatment")
    y1, y0 = y[a == 1], y[a == 0]
    if min(y1.size, y0.size) < 2:
        raise ValueError("difference_in_means needs at least 2 units in each arm")
    mu1, mu0 = y1.mean(), y0.mean()
    se = np.sqrt(y1.var(ddof=1) / y1.size + y0.var(ddof=1) / y0.size)
    n = y.size
    phi = n * (a * (y - mu1) / y1.size - (1 - a) * (y - mu0) / y0.size)
    return Estimate(mu1 - mu0, se, influence=phi, name=name, method="Difference in means")


def contrast(first: Estimate, second: Estimate, *, name: str | None = None) -> Estimate:
    """Difference ``first - second`` of two estimates on the same sample.

    The SE uses the difference of influence values, so the correlation between the two estimates
    is accounted for: :math:`se = \\sqrt{\\sum_i(\\varphi^{(1)}_i-\\varphi^{(2)}_i)^2}/n`.
    """
    if first.influence is None or second.influence is None:
        raise ValueError("contrast needs influence values on both estimates")
    if first.influence.shape != second.influence.shape:
        raise ValueError("contrast needs estimates on the same sample (influence lengths differ)")
    return Estimate.from_influence(first.value - second.value, first.influence - second.influence,
                                   name=name or f"{first.name} - {second.name}", method="Contrast")


def inverse_variance_pool(estimates: Sequence[Estimate], *, name: str | None = None) -> Estimate:
    """Fixed-effect pooling of independent estimates, weights :math:`w_k \\propto 1/se_k^2`.

    .. math:: \\hat\\theta = \\sum_k w_k \\hat\\theta_k, \\qquad
              se = (\\sum_k se_k^{-2})^{-1/2}.
    """
    if len(estimates) == 0:
        raise ValueError("estimates must not be empty")
    se = np.array([e.std_error for e in estimates])
    if np.any(se <= 0):
        raise ValueError("inverse_variance_pool needs strictly positive standard errors")
    w = se ** -2.0
    value = float(np.sum(w * [e.value for e in estimates]) / w.sum())
    return Estimate(value, float(w.sum() ** -0.5), name=name or estimates[0].name,
                    method="Inverse-variance pool")


def _resample(data, idx):
    if hasattr(data, "take") and hasattr(data, "n_rows"):
        return data.take(idx)
    if isinstance(data, pd.DataFrame):
        return data.iloc[idx].reset_index(drop=True)
    if isinstance(data, Mapping):
        return {k: _resample(v, idx) for k, v in data.items()}
    if isinstance(data, tuple):
        return tuple(_resample(v, idx) for v in data)
    if isinstance(data, (pd.Series,)):
        return data.iloc[idx].reset_index(drop=True)
    return np.asarray(data)[idx]


def _n_rows(data) -> int:
    if hasattr(data, "take") and hasattr(data, "n_rows"):
        return data.n_rows
    if isinstance(data, Mapping):
        lengths = {k: len(v) for k, v in data.items()}
    elif isinstance(data, tuple):
        lengths = {f"data[{i}]": len(v) for i, v in enumerate(data)}
    else:
        return len(data)
    if len(set(lengths.values())) != 1:
        raise ValueError(f"bootstrap data parts differ in length: {lengths}")
    return next(iter(lengths.values()))


def _stratified_indices(rng: np.random.Generator, strata: np.ndarray | None, n: int) -> np.ndarray:
    if strata is None:
        return rng.integers(0, n, size=n)
    parts = [rng.choice(members, size=members.size, replace=True)
             for members in (np.flatnonzero(strata == level) for level in np.unique(strata))]
    return np.sort(np.concatenate(parts))


def _one_replicate(fit_fn, data, strata, n, seed):
    rng = np.random.default_rng(seed)
    try:
        return float(fit_fn(_resample(data, _stratified_indices(rng, strata, n))))
    except (ValueError, np.linalg.LinAlgError, FloatingPointError) as exc:
        return exc


def bootstrap(fit_fn: Callable, data, n_boot: int = 500, random_state=None, n_jobs: int = 1, *,
              strata=None, ci_method: str = "percentile", name: str = "ATE",
              method: str | None = None, progress: bool = False, point=None) -> Estimate:
    """Nonparametric bootstrap of a whole estimation pipeline.

    ``fit_fn(data)`` must return the point estimate (a float, or an :class:`Estimate`) computed
    from ``data``. Each replicate draws ``n`` rows with replacement (within each stratum when
    ``strata`` is given, e.g. trial and external samples separately), refits everything (model
    selection included) and records the estimate. The SE is the standard deviation of the
    replicates; the interval is the percentile interval by default.

    Parameters
    ----------
    fit_fn : callable
        Maps data of the same structure as ``data`` to an estimate.
    data : DataFrame, ndarray, tuple or dict of equal-length arrays, or a data container
        Rows are resampled jointly across all parts. A container (an object with ``n_rows``
        and ``take(idx)``, as the estimators' validated data) resamples itself.
    n_boot : int
        Number of replicates.
    random_state : int, SeedSequence or None
        Replicate ``b`` uses the seed ``SeedSequence(random_state).spawn`` child ``b``, so results
        do not depend on ``n_jobs``.
    n_jobs : int
        Parallel workers (joblib).
    strata : array-like, optional
        Stratum labels; each replicate keeps every stratum's size.
    ci_method : {"percentile", "normal"}
    progress : bool
        Show a tqdm progress bar.
    point : float, optional
        The full-sample estimate when already computed (``fit_fn(data)`` is then not called).

    Returns
    -------
    Estimate
        ``value`` from ``fit_fn(data)``, ``std_error`` the replicate SD (ddof=1), ``replicates``.

    Notes
    -----
    Replicates that raise ``ValueError``/``LinAlgError`` (e.g. a resample with one arm) are
    dropped with a :class:`~causalkit.exceptions.BootstrapFailureWarning`; more than 10%
    failures is an error. Reference: Efron & Tibshirani (1993), *An Introduction to the
    Bootstrap*.
    """
    n_boot = check_positive_int(n_boot, "n_boot", minimum=2)
    if not callable(fit_fn):
        raise TypeError("fit_fn must be callable")
    n = _n_rows(data)
    if strata is not None:
        strata = np.asarray(strata)
        if strata.shape != (n,):
            raise ValueError(f"strata must have length {n}; got shape {strata.shape}")
    if point is None:
        point = fit_fn(data)
    point = point.value if isinstance(point, Estimate) else float(point)
    root = (np.random.SeedSequence(random_state.entropy, spawn_key=random_state.spawn_key)
            if isinstance(random_state, np.random.SeedSequence)
            else np.random.SeedSequence(random_state))
    seeds = root.spawn(n_boot)
    jobs = (delayed(_one_replicate)(_as_float_fn(fit_fn), data, strata, n, s) for s in seeds)
    results = Parallel(n_jobs=n_jobs, return_as="generator")(jobs)
    if progress:
        from tqdm.auto import tqdm
        results = tqdm(results, total=n_boot, desc="bootstrap")
    results = list(results)
    failures = [r for r in results if isinstance(r, Exception)]
    reps = np.array([r for r in results if not isinstance(r, Exception)])
    if len(failures) > 0.1 * n_boot:
        raise RuntimeError(f"{len(failures)} of {n_boot} bootstrap replicates failed; "
                           f"first error: {failures[0]!r}")
    if failures:
        warnings.warn(f"{len(failures)} of {n_boot} bootstrap replicates failed and were dropped "
                      f"(first: {failures[0]!r})", BootstrapFailureWarning, stacklevel=2)
    return Estimate(point, float(reps.std(ddof=1)), name=name, method=method, n_obs=n,
                    replicates=reps, ci_method=ci_method, details={"n_boot": int(reps.size)})


class _as_float_fn:
    """Wrap ``fit_fn`` so replicates return floats whether it returns floats or Estimates."""

    def __init__(self, fit_fn):
        self.fit_fn = fit_fn

    def __call__(self, data):
        out = self.fit_fn(data)
        return out.value if isinstance(out, Estimate) else out
