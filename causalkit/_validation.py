"""Input validation: the one place where bad input is turned into a clear error.

Every public entry point of causalkit calls these helpers before doing any work, so that errors are
raised early and name the offending argument.
"""

from __future__ import annotations

import numbers
from collections.abc import Sequence

import numpy as np
import pandas as pd

__all__ = [
    "check_array",
    "check_vector",
    "check_consistent_length",
    "check_binary",
    "check_both_arms",
    "check_trial_indicator",
    "check_external_controls",
    "check_alpha",
    "check_positive_int",
    "check_fraction",
    "check_random_state",
    "as_seed_sequence",
    "child_seed",
    "seed_int",
    "feature_names_of",
]


def feature_names_of(X, n_features: int | None = None) -> list[str]:
    """Column names of a DataFrame, else ``x0, x1, ...``."""
    if isinstance(X, pd.DataFrame):
        return [str(c) for c in X.columns]
    if n_features is None:
        n_features = 1 if np.ndim(X) < 2 else np.shape(X)[1]
    return [f"x{j}" for j in range(n_features)]


def _as_float_array(values, name: str) -> np.ndarray:
    if isinstance(values, (pd.DataFrame, pd.Series)):
        non_numeric = [
            str(c)
            for c, dt in (values.dtypes.items() if isinstance(values, pd.DataFrame)
                          else [(values.name, values.dtype)])
            if not (pd.api.types.is_numeric_dtype(dt) or pd.api.types.is_bool_dtype(dt))
        ]
        if non_numeric:
            raise TypeError(
                f"{name} must be numeric; non-numeric columns: {non_numeric}. "
                "Encode categorical columns first (e.g. pandas.get_dummies)."
            )
        values = values.to_numpy(dtype=float, na_value=np.nan)
    try:
        return np.asarray(values, dtype=float)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"{name} must be numeric array-like; got {type(values).__name__}") from exc


def _check_finite(arr: np.ndarray, name: str, allow_nan: bool, columns=None) -> None:
    if np.isinf(arr).any():
        raise ValueError(f"{name} contains infinite values")
    if arr.size:
        # sums of squares (variances, Gram matrices) overflow beyond this magnitude
        limit = np.sqrt(np.finfo(float).max / arr.shape[0]) / 10
        big = np.nanmax(np.abs(arr.reshape(arr.shape[0], -1)), axis=0, initial=0.0) > limit
        if big.any():
            where = (f" (column(s) {[columns[j] for j in np.flatnonzero(big)]})"
                     if columns is not None else "")
            raise ValueError(f"{name} has values larger than {limit:.3g} in magnitude{where}; "
                             "their squares overflow: rescale them")
    if not allow_nan and np.isnan(arr).any():
        bad = np.unique(np.argwhere(np.isnan(arr))[:, 0])
        shown = ", ".join(map(str, bad[:10])) + (" ..." if bad.size > 10 else "")
        raise ValueError(f"{name} contains NaN (rows {shown}); impute or drop them first")


def check_array(X, name: str = "X", *, allow_nan: bool = False, min_rows: int = 1) -> np.ndarray:
    """Validate a 2-D numeric design matrix.

    Parameters
    ----------
    X : array-like or pandas.DataFrame of shape (n, p)
        A 1-D input is read as a single feature (n, 1).
    name : str
        Argument name used in error messages.
    allow_nan : bool
        Whether NaN entries are allowed (infinite values never are).
    min_rows : int
        Minimum number of rows.

    Returns
    -------
    numpy.ndarray of float, shape (n, p), C-contiguous
    """
    if X is None:
        raise ValueError(f"{name} is required; got None")
    columns = feature_names_of(X) if isinstance(X, pd.DataFrame) else None
    arr = _as_float_array(X, name)
    if arr.ndim == 1:
        arr = arr.reshape(-1, 1)
    if arr.ndim != 2:
        raise ValueError(f"{name} must be 2-dimensional (n, p); got shape {arr.shape}")
    if arr.shape[0] < min_rows:
        raise ValueError(f"{name} must have at least {min_rows} row(s); got {arr.shape[0]}")
    if arr.shape[1] == 0:
        raise ValueError(f"{name} has no columns")
    _check_finite(arr, name, allow_nan, columns)
    # one memory layout whatever the input (a DataFrame converts column-major), so that sums
    # run in the same order and array and DataFrame input give bit-identical numbers
    return np.ascontiguousarray(arr)


def check_vector(y, name: str = "y", *, n: int | None = None,
                 allow_nan: bool = False) -> np.ndarray:
    """Validate a 1-D numeric vector, optionally of a required length ``n``."""
    if y is None:
        raise ValueError(f"{name} is required; got None")
    arr = _as_float_array(y, name)
    if arr.ndim == 2 and arr.shape[1] == 1:
        arr = arr[:, 0]
    if arr.ndim != 1:
        raise ValueError(f"{name} must be 1-dimensional; got shape {arr.shape}")
    if n is not None and arr.shape[0] != n:
        raise ValueError(f"{name} has length {arr.shape[0]} but X has {n} rows")
    _check_finite(arr, name, allow_nan)
    return arr


def check_consistent_length(**arrays) -> int:
    """Check that all named arrays have the same number of rows; return it.

    Examples
    --------
    >>> check_consistent_length(X=np.zeros((3, 2)), y=np.zeros(3))
    3
    """
    lengths = {name: len(a) for name, a in arrays.items() if a is not None}
    if len(set(lengths.values())) > 1:
        desc = ", ".join(f"{k}={v}" for k, v in lengths.items())
        raise ValueError(f"inconsistent numbers of rows: {desc}")
    return next(iter(lengths.values())) if lengths else 0


def check_binary(a, name: str = "treatment", *, n: int | None = None) -> np.ndarray:
    """Validate a 0/1 indicator (bool, int or float with values in {0, 1}); return int array."""
    arr = check_vector(a, name, n=n)
    values = np.unique(arr)
    if not np.isin(values, (0.0, 1.0)).all():
        shown = values[~np.isin(values, (0.0, 1.0))][:5]
        raise ValueError(f"{name} must be binary (0/1); found values {shown.tolist()}")
    return arr.astype(int)


def check_both_arms(a: np.ndarray, name: str = "treatment", *, where: str = "") -> None:
    """Raise if a binary indicator has only one level (in the subset described by ``where``)."""
    n1 = int(np.sum(a == 1))
    n0 = int(np.sum(a == 0))
    if n1 == 0 or n0 == 0:
        loc = f" {where}" if where else ""
        raise ValueError(
            f"{name} must contain both arms{loc}; got {n1} treated and {n0} control units"
        )


def check_trial_indicator(trial, *, n: int, name: str = "trial") -> np.ndarray:
    """Validate the trial/external indicator (1 = trial unit, 0 = external control)."""
    s = check_binary(trial, name, n=n)
    if not (s == 1).any():
        raise ValueError(f"{name} marks no trial units (all zero)")
    return s


def check_external_controls(treatment: np.ndarray, trial: np.ndarray) -> None:
    """External units (trial == 0) must be controls (treatment == 0); the trial needs both arms."""
    bad = np.flatnonzero((trial == 0) & (treatment == 1))
    if bad.size:
        shown = ", ".join(map(str, bad[:10])) + (" ..." if bad.size > 10 else "")
        raise ValueError(
            f"treatment must be 0 for external controls (trial == 0); rows {shown} have treatment 1"
        )
    check_both_arms(treatment[trial == 1], "treatment", where="within the trial (trial == 1)")


def check_alpha(alpha: float) -> float:
    """Significance level strictly between 0 and 1."""
    if not isinstance(alpha, numbers.Real) or not 0.0 < float(alpha) < 1.0:
        raise ValueError(f"alpha must be a number in (0, 1); got {alpha!r}")
    return float(alpha)


def check_positive_int(value, name: str, *, minimum: int = 1) -> int:
    """Integer not smaller than ``minimum``."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}; got {value!r}")
    return int(value)


def check_n_jobs(value, name: str = "n_jobs") -> int | None:
    """joblib's ``n_jobs``: None or a nonzero integer (negative counts back from every core)."""
    if value is not None and (isinstance(value, bool) or not isinstance(value, numbers.Integral)
                              or value == 0):
        raise ValueError(f"{name} must be None or a nonzero integer; got {value!r}")
    return value


def check_fraction(value, name: str, *, closed: bool = True) -> float:
    """Number in [0, 1] (``closed``) or (0, 1)."""
    ok = isinstance(value, numbers.Real) and (
        0.0 <= value <= 1.0 if closed else 0.0 < value < 1.0
    )
    if not ok:
        bounds = "[0, 1]" if closed else "(0, 1)"
        raise ValueError(f"{name} must be a number in {bounds}; got {value!r}")
    return float(value)


def check_random_state(random_state) -> np.random.Generator:
    """Turn ``None``, an int, a SeedSequence or a Generator into a ``numpy.random.Generator``."""
    if isinstance(random_state, np.random.Generator):
        return random_state
    if random_state is None or isinstance(random_state, (numbers.Integral, np.random.SeedSequence)):
        return np.random.default_rng(random_state)
    if isinstance(random_state, Sequence) and not isinstance(random_state, (str, bytes)):
        return np.random.default_rng(list(random_state))
    raise TypeError(
        f"random_state must be None, an int or a numpy Generator; got {type(random_state).__name__}"
    )


def as_seed_sequence(random_state) -> np.random.SeedSequence:
    """``None`` (fresh entropy), a non-negative int, a ``SeedSequence`` or a ``Generator`` (one
    draw from it) as a ``numpy.random.SeedSequence``."""
    if isinstance(random_state, np.random.SeedSequence):
        return random_state
    if isinstance(random_state, np.random.Generator):
        return np.random.SeedSequence(int(random_state.integers(2**63)))
    if random_state is None or (isinstance(random_state, numbers.Integral)
                                and not isinstance(random_state, bool) and random_state >= 0):
        return np.random.SeedSequence(None if random_state is None else int(random_state))
    raise TypeError(f"random_state must be None, a non-negative int, a numpy SeedSequence or "
                    f"Generator; got {random_state!r}")


def child_seed(seq: np.random.SeedSequence, key: int) -> np.random.SeedSequence:
    """The child ``key`` of ``seq``: independent of its other children, and the same on every
    call (unlike ``SeedSequence.spawn``, which advances a counter)."""
    return np.random.SeedSequence(seq.entropy, spawn_key=(*seq.spawn_key, int(key)))


def seed_int(random_state) -> int | None:
    """An integer seed (for scikit-learn, torch) from ``random_state``: an int is kept, a
    ``SeedSequence`` gives a 31-bit draw; None stays None."""
    if random_state is None:
        return None
    if isinstance(random_state, numbers.Integral) and not isinstance(random_state, bool):
        return int(random_state)
    seq = as_seed_sequence(random_state)
    return int(seq.generate_state(1, dtype=np.uint32)[0] >> 1)
