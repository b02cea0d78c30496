"""Conformance suite: every public statistical estimator follows one protocol.

The estimators are discovered automatically (every public subclass of
:class:`causalkit._base.CausalEstimator` in ``causalkit.borrowing``, ``causalkit.longterm`` and
``causalkit.policy``), in the spirit of scikit-learn's ``parametrize_with_checks``. Each is fitted
on a small simulated data set of its area and checked for:

* the scikit-learn parameter protocol (``get_params``/``set_params``/``clone``, constructor
  arguments stored unchanged, a docstring);
* scikit-learn's ``NotFittedError`` before ``fit``;
* determinism: the same ``random_state`` gives bit-identical estimates and intervals across two
  fits, across ``n_jobs=1`` and ``2`` in the bootstrap, and across two Python processes;
* refitting on a bootstrap resample, every cross-fitting split keeps the copies of a unit in
  one fold;
* the array and the DataFrame front end give identical results;
* permuting rows leaves the estimate unchanged (estimators whose cross-fitting folds depend on
  the row order, ``_row_order_dependent``, move by less than two standard errors: a new fold
  split is a new draw of the cross-fitting noise);
* scale: ``y`` times 100 multiplies the estimate and SE by 100; one column of ``X`` times 1e6
  changes nothing (unless the class declares ``_scale_free_X = False`` and says why);
* every nuisance slot (``_nuisance_slots``) accepts a random forest, gradient boosting and a
  scikit-learn Pipeline;
* ``summary()``, ``to_frame()`` and ``plot()`` run, and ``plot()`` returns a Figure;
* a grid of bad inputs: each ends in a ``ValueError``/``TypeError`` whose message names the
  argument (or a documented ``CausalkitWarning`` naming the column), never a silent number and
  never another exception.
"""

from __future__ import annotations

import importlib
import inspect
import json
import pkgutil
import re
import subprocess
import sys
import warnings
from dataclasses import dataclass, field

import matplotlib
import numpy as np
import pandas as pd
import pytest
from sklearn.base import BaseEstimator, clone
from sklearn.ensemble import (
    GradientBoostingClassifier,
    GradientBoostingRegressor,
    RandomForestClassifier,
    RandomForestRegressor,
)
from sklearn.exceptions import NotFittedError
from sklearn.linear_model import LinearRegression, LogisticRegression
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from causalkit._base import CausalEstimator
from causalkit.exceptions import CausalkitWarning

matplotlib.use("Agg")

AREAS = ("borrowing", "longterm", "policy")
#: Small constructor settings for estimators that are slow at their defaults (same protocol);
#: a subclass (e.g. the placebo ``RandomGroupPenalty``) takes its base class's settings.
CONFORMANCE_PARAMS = {
    "BalanceNet": dict(representation=(8,), head=(8,), max_epochs=5, batch_size=64,
                       alpha_grid=(0.1,), device="cpu"),
}
N_BOOT = 10


# ----------------------------------------------------------------------------- discovery
def _discover():
    found, stray = {}, []
    for area in AREAS:
        package = importlib.import_module(f"causalkit.{area}")
        names = [m.name for m in pkgutil.walk_packages(package.__path__, f"causalkit.{area}.")]
        for modname in [package.__name__, *names]:
            if modname.rsplit(".", 1)[-1].startswith("_") and modname != package.__name__:
                continue
            module = importlib.import_module(modname)
            for name, cls in inspect.getmembers(module, inspect.isclass):
                if (name.startswith("_") or not cls.__module__.startswith(f"causalkit.{area}")
                        or inspect.isabstract(cls)):
                    continue
                if issubclass(cls, CausalEstimator):
                    found[name] = (area, cls)
                elif hasattr(cls, "fit") and (hasattr(cls, "estimate")
                                              or hasattr(cls, "policy_value")):
                    stray.append(f"{cls.__module__}.{name}")
    return dict(sorted(found.items())), sorted(set(stray))


ESTIMATORS, STRAY = _discover()
NAMES = list(ESTIMATORS)


def test_every_estimator_is_on_the_core():
    """Every public class with ``fit`` and ``estimate`` inherits the core (so it is checked)."""
    assert not STRAY, f"estimators outside the core: {STRAY}"
    assert len(ESTIMATORS) >= 16, sorted(ESTIMATORS)
    assert {a for a, _ in ESTIMATORS.values()} == set(AREAS)


# ----------------------------------------------------------------------------- data
@dataclass
class Case:
    """Arguments of ``fit``: ``X`` and keyword roles, plus what ``estimate`` needs."""

    X: object
    roles: dict
    estimate_kwargs: dict = field(default_factory=dict)

    def fit(self, est):
        return est.fit(self.X, **self.roles)


def _policy(X):
    return (np.asarray(X, dtype=float)[:, 0] > 0).astype(int)


def borrowing_data(seed=0, n_trial=120, n_ext=150, p=3):
    rng = np.random.default_rng(seed)
    Xt = rng.normal(size=(n_trial, p))
    Xe = rng.normal(0.3, 1.0, size=(n_ext, p))
    a = np.r_[rng.permutation(np.repeat([0, 1], n_trial // 2)), np.zeros(n_ext, int)]
    s = np.r_[np.ones(n_trial, int), np.zeros(n_ext, int)]
    X = np.vstack([Xt, Xe])
    y = 1.0 + X @ np.linspace(1, 0.5, p) + 1.5 * a + rng.normal(size=a.size)
    return X, {"y": y, "treatment": a, "trial": s}


def longterm_data(seed=0, n=300, p=3):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, p))
    a = rng.binomial(1, 1 / (1 + np.exp(-0.4 * X[:, 0])))
    s1 = X[:, 0] + a + rng.normal(size=n)
    y = 0.5 * X[:, 1] + s1 + 2.0 * a + rng.normal(size=n)
    r1 = rng.random(n) < 1 / (1 + np.exp(-(1.5 + 0.3 * X[:, 1])))
    r2 = r1 & (rng.random(n) < 1 / (1 + np.exp(-(1.5 + 0.2 * s1))))
    s1 = np.where(r1, s1, np.nan)
    y = np.where(r2, y, np.nan)
    return X, {"y": y, "treatment": a, "short": s1[:, None]}


def policy_data(seed=0, n_s=300, n_t=300, p=3):
    rng = np.random.default_rng(seed)
    Xs = rng.normal(size=(n_s, p))
    Xt = rng.normal(0.5, 1.0, size=(n_t, p))
    a = rng.binomial(1, 1 / (1 + np.exp(-0.5 * Xs[:, 1])))
    y = Xs[:, 1] + a * (Xs[:, 0] - 0.2) + rng.normal(size=n_s)
    return Xs, {"y": y, "treatment": a, "X_target": Xt}


DATA = {"borrowing": borrowing_data, "longterm": longterm_data, "policy": policy_data}


def make_case(area, name, seed=0) -> Case:
    X, roles = DATA[area](seed)
    kwargs = {"policy": _policy} if name == "TargetPolicyValue" else {}
    return Case(X, roles, kwargs)


def as_frame(case: Case, area: str) -> Case:
    """The same data through the DataFrame front end (roles as column names)."""
    p = np.shape(case.X)[1]
    cols = [f"x{j}" for j in range(p)]
    df = pd.DataFrame(np.asarray(case.X), columns=cols)
    df["outcome"] = case.roles["y"]
    df["arm"] = case.roles["treatment"]
    roles = {"y": "outcome", "treatment": "arm"}
    if area == "borrowing":
        df["in_trial"] = case.roles["trial"]
        roles["trial"] = "in_trial"
    elif area == "longterm":
        df["s1"] = case.roles["short"][:, 0]
        roles["short"] = ["s1"]
    else:
        roles["X_target"] = pd.DataFrame(case.roles["X_target"], columns=cols)
    return Case(df, roles, case.estimate_kwargs)


def new(name, **params):
    _, cls = ESTIMATORS[name]
    small = next((CONFORMANCE_PARAMS[c.__name__] for c in cls.__mro__
                  if c.__name__ in CONFORMANCE_PARAMS), {})
    params = {**small, **params}
    if "random_state" in inspect.signature(cls).parameters:
        params.setdefault("random_state", 0)
    return cls(**params)


def quiet_fit(est, case):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", CausalkitWarning)
        return case.fit(est)


def quiet_estimate(est, case, **kwargs):
    kwargs = {**case.estimate_kwargs, **kwargs}
    if (kwargs.get("inference") or est._default_inference) == "bootstrap":
        kwargs.setdefault("n_boot", N_BOOT)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", CausalkitWarning)
        return est.estimate(**kwargs)


def numbers(res):
    lo, hi = res.conf_int()
    return np.array([res.value, res.std_error, lo, hi])


def fitted(name, seed=0, **params):
    area, _ = ESTIMATORS[name]
    case = make_case(area, name, seed)
    return quiet_fit(new(name, **params), case), case


# ----------------------------------------------------------------------------- protocol
@pytest.mark.parametrize("name", NAMES)
def test_parameter_protocol(name):
    _, cls = ESTIMATORS[name]
    assert issubclass(cls, BaseEstimator)
    assert (cls.__doc__ or "").strip(), "no docstring"
    est = cls()
    params = est.get_params(deep=False)
    for p in inspect.signature(cls.__init__).parameters.values():
        if p.name == "self" or p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            continue
        assert p.name in params, f"constructor argument {p.name!r} not in get_params"
        assert params[p.name] is p.default or params[p.name] == p.default
    twin = clone(est)
    assert twin.get_params(deep=False).keys() == params.keys()
    first = next(iter(params))
    assert est.set_params(**{first: params[first]}) is est


@pytest.mark.parametrize("name", NAMES)
def test_not_fitted_error(name):
    est = new(name)
    area, _ = ESTIMATORS[name]
    case = make_case(area, name)
    with pytest.raises(NotFittedError):
        est.estimate(**case.estimate_kwargs)


# ----------------------------------------------------------------------------- determinism
def _inferences(est):
    return tuple(est._inferences)


@pytest.mark.parametrize("name", NAMES)
def test_same_seed_same_numbers(name):
    first, case = fitted(name)
    second, _ = fitted(name)
    for inference in _inferences(first):
        a = numbers(quiet_estimate(first, case, inference=inference))
        b = numbers(quiet_estimate(second, case, inference=inference))
        np.testing.assert_array_equal(a, b, err_msg=inference)


@pytest.mark.parametrize("name", NAMES)
def test_bootstrap_does_not_depend_on_n_jobs(name):
    est, case = fitted(name)
    if "bootstrap" not in _inferences(est):
        pytest.skip(f"{name} offers no bootstrap")
    one = numbers(quiet_estimate(est, case, inference="bootstrap", n_jobs=1))
    fresh, _ = fitted(name)           # a fresh fit: the first result is cached on ``est``
    two = numbers(quiet_estimate(fresh, case, inference="bootstrap", n_jobs=2))
    np.testing.assert_array_equal(one, two)


_CHILD = """
import json, sys, warnings
import numpy as np
sys.path.insert(0, {tests!r})
import test_conformance as t
out = {{}}
for name in {names!r}:
    est, case = t.fitted(name)
    out[name] = [t.numbers(t.quiet_estimate(est, case, inference=i)).tolist()
                 for i in est._inferences]
print(json.dumps(out))
"""


@pytest.fixture(scope="module")
def other_process():
    """Every estimator's numbers computed in a fresh Python process."""
    import os
    tests = os.path.dirname(os.path.abspath(__file__))
    code = _CHILD.format(tests=tests, names=NAMES)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=900, env={**os.environ, "MPLBACKEND": "Agg"})
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("name", NAMES)
def test_same_numbers_in_another_process(name, other_process):
    est, case = fitted(name)
    here = [numbers(quiet_estimate(est, case, inference=i)).tolist() for i in _inferences(est)]
    assert here == other_process[name]


@pytest.mark.parametrize("name", NAMES)
def test_folds_of_a_bootstrap_resample_keep_each_units_copies_together(name, monkeypatch):
    """Refitting on a resample (as the pipeline bootstrap does): every cross-fitting split
    receives the units the rows copy and puts all copies of a unit in one test fold, so no
    unit is both trained on and predicted (``make_folds(groups=...)``)."""
    import causalkit.nuisance as nuisance
    from causalkit.inference import _stratified_indices

    est, _ = fitted(name)
    if est.get_params().get("cv") == "auto":
        est = fitted(name, cv=5)[0]                # the cross-fitted form of the estimator
    data = est.data_
    idx = _stratified_indices(np.random.default_rng(11), data.strata, data.n_rows)
    resample = data.take(idx)
    np.testing.assert_array_equal(np.sort(resample.units), idx)
    calls = []

    def spy(cv, n, *, groups=None, **kwargs):
        folds = nuisance.make_folds(cv, n, groups=groups, **kwargs)
        calls.append((groups, folds))
        return folds

    for module in [m for key, m in sys.modules.items() if key.startswith("causalkit.")
                   and key != "causalkit.nuisance" and hasattr(m, "make_folds")]:
        monkeypatch.setattr(module, "make_folds", spy)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", CausalkitWarning)
        clone(est)._fit_data(resample)
    if not calls:
        pytest.skip(f"{name} does not cross-fit")
    for groups, folds in calls:
        assert groups is not None and np.unique(groups).size < groups.size
        fold = np.empty(groups.size, dtype=int)
        for k, (_, test) in enumerate(folds):
            fold[test] = k
        split = [u for u in np.unique(groups) if np.unique(fold[groups == u]).size > 1]
        assert not split, f"{name}: copies of units {split[:5]} in different folds"


# ----------------------------------------------------------------------------- front ends
@pytest.mark.parametrize("name", NAMES)
def test_dataframe_front_end_matches_arrays(name):
    area, _ = ESTIMATORS[name]
    case = make_case(area, name)
    frame = as_frame(case, area)
    a = quiet_fit(new(name), case)
    b = quiet_fit(new(name), frame)
    assert list(b.feature_names_in_) == ["x0", "x1", "x2"]
    for inference in _inferences(a):
        np.testing.assert_array_equal(numbers(quiet_estimate(a, case, inference=inference)),
                                      numbers(quiet_estimate(b, frame, inference=inference)))


def _permuted(case: Case, area: str, perm) -> Case:
    roles = dict(case.roles)
    for key in ("y", "treatment", "trial", "short"):
        if key in roles:
            roles[key] = np.asarray(roles[key])[perm]
    return Case(np.asarray(case.X)[perm], roles, case.estimate_kwargs)


@pytest.mark.parametrize("name", NAMES)
def test_row_permutation(name):
    area, cls = ESTIMATORS[name]
    case = make_case(area, name)
    perm = np.random.default_rng(5).permutation(np.shape(case.X)[0])
    a = quiet_fit(new(name), case)
    b = quiet_fit(new(name), _permuted(case, area, perm))
    inference = "influence" if "influence" in _inferences(a) else "bootstrap"
    ra = quiet_estimate(a, case, inference=inference)
    rb = quiet_estimate(b, case, inference=inference)
    if getattr(cls, "_row_order_dependent", False):
        # another fold split: the estimate moves within its sampling noise (for a learned
        # policy's held-out value the split-to-split SD is about 0.6 SE on this design)
        assert abs(ra.value - rb.value) < 2 * ra.std_error, (ra, rb)
    else:
        np.testing.assert_allclose(rb.value, ra.value, rtol=1e-8, atol=1e-10)


# ----------------------------------------------------------------------------- scale
@pytest.mark.parametrize("name", NAMES)
def test_outcome_units(name):
    area, cls = ESTIMATORS[name]
    if not getattr(cls, "_scale_free_y", True):
        pytest.skip(f"{name} declares it is not scale-free in y (see its docstring)")
    case = make_case(area, name)
    scaled = Case(case.X, {**case.roles, "y": np.asarray(case.roles["y"]) * 100.0},
                  case.estimate_kwargs)
    a, b = quiet_fit(new(name), case), quiet_fit(new(name), scaled)
    for inference in _inferences(a):
        ra = numbers(quiet_estimate(a, case, inference=inference))
        rb = numbers(quiet_estimate(b, scaled, inference=inference))
        np.testing.assert_allclose(rb, 100.0 * ra, rtol=1e-6, atol=1e-9, err_msg=inference)


@pytest.mark.parametrize("name", NAMES)
def test_covariate_units(name):
    area, cls = ESTIMATORS[name]
    if not getattr(cls, "_scale_free_X", True):
        pytest.skip(f"{name} declares it is not scale-free in X (see its docstring)")
    case = make_case(area, name)
    X = np.asarray(case.X, dtype=float).copy()
    X[:, 1] *= 1e6
    roles = dict(case.roles)
    if "X_target" in roles:
        roles["X_target"] = np.asarray(roles["X_target"], dtype=float).copy()
        roles["X_target"][:, 1] *= 1e6
    scaled = Case(X, roles, case.estimate_kwargs)
    a, b = quiet_fit(new(name), case), quiet_fit(new(name), scaled)
    for inference in _inferences(a):
        np.testing.assert_allclose(numbers(quiet_estimate(b, scaled, inference=inference)),
                                   numbers(quiet_estimate(a, case, inference=inference)),
                                   rtol=1e-6, atol=1e-9, err_msg=inference)


# ----------------------------------------------------------------------------- nuisance slots
LEARNERS = {
    "regressor": {
        "random_forest": lambda: RandomForestRegressor(n_estimators=20, max_depth=4),
        "gradient_boosting": lambda: GradientBoostingRegressor(n_estimators=20, max_depth=2),
        "pipeline": lambda: make_pipeline(StandardScaler(), LinearRegression()),
    },
    "classifier": {
        "random_forest": lambda: RandomForestClassifier(n_estimators=20, max_depth=4),
        "gradient_boosting": lambda: GradientBoostingClassifier(n_estimators=20, max_depth=2),
        "pipeline": lambda: make_pipeline(StandardScaler(), LogisticRegression()),
    },
}
SLOT_CASES = [(name, slot, kind, learner)
              for name, (_, cls) in ESTIMATORS.items()
              for slot, kind in getattr(cls, "_nuisance_slots", {}).items()
              for learner in LEARNERS[kind]]


def test_every_estimator_declares_its_nuisance_slots():
    for name, (_, cls) in ESTIMATORS.items():
        assert isinstance(getattr(cls, "_nuisance_slots", None), dict), name
        params = inspect.signature(cls).parameters
        for slot in cls._nuisance_slots:
            assert slot in params, f"{name}: slot {slot!r} is not a constructor parameter"


@pytest.mark.parametrize("name, slot, kind, learner", SLOT_CASES,
                         ids=[f"{n}-{s}-{lr}" for n, s, _, lr in SLOT_CASES])
def test_nuisance_slots_accept_any_learner(name, slot, kind, learner):
    area, _ = ESTIMATORS[name]
    case = make_case(area, name)
    est = quiet_fit(new(name, **{slot: LEARNERS[kind][learner]()}), case)
    inference = "influence" if "influence" in _inferences(est) else "bootstrap"
    res = quiet_estimate(est, case, inference=inference, n_boot=5)
    assert np.isfinite(res.value) and np.isfinite(res.std_error)
    twin = quiet_fit(new(name, **{slot: LEARNERS[kind][learner]()}), case)
    assert quiet_estimate(twin, case, inference=inference, n_boot=5).value == res.value


# ----------------------------------------------------------------------------- reports
@pytest.mark.parametrize("name", NAMES)
def test_summary_table_and_plot(name):
    import matplotlib.pyplot as plt
    from matplotlib.figure import Figure

    est, case = fitted(name)
    kwargs = {**case.estimate_kwargs}
    if est._default_inference == "bootstrap":
        kwargs["n_boot"] = N_BOOT
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", CausalkitWarning)
        text = est.summary(**kwargs)
        table = est.to_frame(**kwargs)
        takes_kwargs = any(p.kind is p.VAR_KEYWORD
                           for p in inspect.signature(est.plot).parameters.values())
        fig = est.plot(**kwargs) if takes_kwargs else est.plot()
    assert isinstance(text, str) and len(text.splitlines()) > 3
    assert isinstance(table, pd.DataFrame) and len(table) >= 1
    assert isinstance(fig, Figure)
    plt.close("all")


# ----------------------------------------------------------------------------- bad inputs
def _names_argument(message: str, names) -> bool:
    return any(re.search(rf"(?<![A-Za-z0-9_]){re.escape(n)}(?![A-Za-z0-9_])", message)
               for n in names)


def _set(case: Case, **changes) -> Case:
    roles = {**case.roles, **{k: v for k, v in changes.items() if k != "X"}}
    return Case(changes.get("X", case.X), roles, case.estimate_kwargs)


def _with_cell(values, value, row=0, col=None):
    arr = np.array(values, dtype=float, copy=True)
    if arr.ndim == 2:
        arr[row, 0 if col is None else col] = value
    else:
        arr[row] = value
    return arr


def _frame(case, area):
    return as_frame(case, area)


def common_bad_inputs(area):
    """(id, builder(case) -> Case, expectation, argument names); expectation is "error" (a
    clear ValueError/TypeError naming one of the names), "ok" (a finite estimate) or
    "error_or_warning" (either, the warning being a CausalkitWarning naming the column)."""
    n_role = {"borrowing": "trial", "longterm": "short", "policy": "X_target"}[area]
    y_missing_ok = area == "longterm"

    def one_arm(c):
        a = np.zeros_like(np.asarray(c.roles["treatment"]))
        return _set(c, treatment=a)

    def single_row(c):
        roles = {k: (np.asarray(v)[:1] if k != "X_target" else v) for k, v in c.roles.items()}
        return Case(np.asarray(c.X)[:1], roles, c.estimate_kwargs)

    def empty(c):
        roles = {k: (np.asarray(v)[:0] if k != "X_target" else v) for k, v in c.roles.items()}
        return Case(np.asarray(c.X)[:0], roles, c.estimate_kwargs)

    def string_column(c):
        f = _frame(c, area)
        f.X["x2"] = np.where(np.asarray(f.X["x2"]) > 0, "high", "low")
        if "X_target" in f.roles:
            f.roles["X_target"]["x2"] = "low"
        return f

    def duplicate_columns(c):
        f = _frame(c, area)
        X = f.X.copy()
        X.columns = ["x0", "x0", *X.columns[2:]]
        return Case(X, f.roles, f.estimate_kwargs)

    def permuted_series(c):
        f = _frame(c, area)
        X = f.X.drop(columns=[v for v in (f.roles["y"], f.roles["treatment"])])
        roles = dict(f.roles)
        perm = np.random.default_rng(1).permutation(len(X))
        for key in ("y", "treatment"):
            roles[key] = f.X[f.roles[key]].iloc[perm]
        for key in ("trial", "short"):
            if key in roles:
                cols = roles[key]
                roles[key] = f.X[cols].iloc[perm]
                X = X.drop(columns=cols)
        return Case(X, roles, f.estimate_kwargs)

    def misaligned_series(c):
        f = permuted_series(c)
        y = f.roles["y"].copy()
        y.index = y.index + 10_000
        return _set(f, y=y)

    def collinear(c):
        X = np.asarray(c.X, dtype=float)
        X = np.column_stack([X, 2.0 * X[:, 0]])
        roles = dict(c.roles)
        if "X_target" in roles:
            Xt = np.asarray(roles["X_target"], dtype=float)
            roles["X_target"] = np.column_stack([Xt, 2.0 * Xt[:, 0]])
        return Case(X, roles, c.estimate_kwargs)

    def constant(c):
        X = np.asarray(c.X, dtype=float)
        X = np.column_stack([X, np.ones(X.shape[0])])
        roles = dict(c.roles)
        if "X_target" in roles:
            Xt = np.asarray(roles["X_target"], dtype=float)
            roles["X_target"] = np.column_stack([Xt, np.ones(Xt.shape[0])])
        return Case(X, roles, c.estimate_kwargs)

    def missing_column(c):
        f = _frame(c, area)
        return _set(f, y="no_such_column")

    def column_twice(c):
        f = _frame(c, area)
        return _set(f, treatment=f.roles["y"])

    def covariates_include_y(c):
        f = _frame(c, area)
        roles = dict(f.roles)
        roles["covariates"] = ["x0", "x1", f.roles["y"]]
        return Case(f.X, roles, f.estimate_kwargs)

    def lists(c):
        roles = {k: np.asarray(v).tolist() for k, v in c.roles.items()}
        return Case(np.asarray(c.X).tolist(), roles, c.estimate_kwargs)

    def boolean_treatment(c):
        return _set(c, treatment=np.asarray(c.roles["treatment"]).astype(bool))

    def yes_no_treatment(c):
        return _set(c, treatment=np.where(np.asarray(c.roles["treatment"]) == 1, "yes", "no"))

    n = np.shape(DATA[area]()[0])[0]
    cases = [
        ("X_nan", lambda c: _set(c, X=_with_cell(c.X, np.nan)), "error", ["X"]),
        ("X_inf", lambda c: _set(c, X=_with_cell(c.X, np.inf)), "error", ["X"]),
        ("X_1e300", lambda c: _set(c, X=_with_cell(c.X, 1e300)), "error", ["X"]),
        ("y_inf", lambda c: _set(c, y=_with_cell(c.roles["y"], np.inf)), "error", ["y"]),
        ("y_1e300", lambda c: _set(c, y=_with_cell(c.roles["y"], 1e300)), "error", ["y"]),
        ("treatment_nan", lambda c: _set(c, treatment=_with_cell(c.roles["treatment"], np.nan)),
         "error", ["treatment"]),
        ("treatment_inf", lambda c: _set(c, treatment=_with_cell(c.roles["treatment"], np.inf)),
         "error", ["treatment"]),
        ("treatment_fraction",
         lambda c: _set(c, treatment=_with_cell(c.roles["treatment"], 0.5, row=1)),
         "error", ["treatment"]),
        ("y_short", lambda c: _set(c, y=np.asarray(c.roles["y"])[:-3]), "error", ["y"]),
        ("treatment_short", lambda c: _set(c, treatment=np.asarray(c.roles["treatment"])[:-3]),
         "error", ["treatment"]),
        ("X_empty", empty, "error", ["X", "y", "treatment", n_role]),
        ("single_row", single_row, "error", ["X", "y", "treatment", n_role]),
        ("one_arm", one_arm, "error", ["treatment"]),
        ("string_column", string_column, "error", ["X", "x2"]),
        ("string_y", lambda c: _set(c, y=np.array(["a"] * len(c.roles["y"]))), "error", ["y"]),
        ("yes_no_treatment", yes_no_treatment, "error", ["treatment"]),
        ("boolean_treatment", boolean_treatment, "ok", []),
        ("lists", lists, "ok", []),
        ("duplicate_columns", duplicate_columns, "error", ["X", "x0"]),
        ("permuted_series", permuted_series, "ok", []),
        ("misaligned_series", misaligned_series, "error", ["y"]),
        ("collinear_covariate", collinear, "error_or_warning", ["X", "x3"]),
        ("constant_covariate", constant, "error_or_warning", ["X", "x3"]),
        ("X_3d", lambda c: _set(c, X=np.asarray(c.X)[:, :, None]), "error", ["X"]),
        ("X_no_columns", lambda c: _set(c, X=np.empty((n, 0))), "error", ["X"]),
        ("missing_column", missing_column, "error", ["y", "no_such_column"]),
        ("column_twice", column_twice, "error", ["outcome", "treatment", "y"]),
        ("covariates_include_y", covariates_include_y, "error", ["covariates", "outcome"]),
        ("X_none", lambda c: _set(c, X=None), "error", ["X"]),
        ("y_none", lambda c: _set(c, y=None), "error", ["y"]),
        ("treatment_none", lambda c: _set(c, treatment=None), "error", ["treatment"]),
        ("X_string", lambda c: _set(c, X="data.csv"), "error", ["X"]),
        ("treatment_2d", lambda c: _set(c, treatment=np.column_stack(
            [c.roles["treatment"], c.roles["treatment"]])), "error", ["treatment"]),
    ]
    if not y_missing_ok:
        cases.append(("y_nan", lambda c: _set(c, y=_with_cell(c.roles["y"], np.nan)), "error",
                      ["y"]))
    if area != "policy":
        cases.append(("treatment_three_levels",
                      lambda c: _set(c, treatment=_with_cell(c.roles["treatment"], 2, row=1)),
                      "error", ["treatment"]))
    return cases


def area_bad_inputs(area):
    if area == "borrowing":
        def trial_arm_of_one(c):
            a, s = np.asarray(c.roles["treatment"]).copy(), np.asarray(c.roles["trial"])
            treated = np.flatnonzero((s == 1) & (a == 1))
            a[treated[1:]] = 0
            return _set(c, treatment=a)

        def external_treated(c):
            a, s = np.asarray(c.roles["treatment"]).copy(), np.asarray(c.roles["trial"])
            a[np.flatnonzero(s == 0)[0]] = 1
            return _set(c, treatment=a)

        return [
            ("trial_nonbinary", lambda c: _set(c, trial=_with_cell(c.roles["trial"], 3)),
             "error", ["trial"]),
            ("trial_all_zero", lambda c: _set(c, trial=np.zeros_like(c.roles["trial"])),
             "error", ["trial"]),
            ("trial_none", lambda c: _set(c, trial=None), "error", ["trial"]),
            ("trial_short", lambda c: _set(c, trial=np.asarray(c.roles["trial"])[:-2]),
             "error", ["trial"]),
            ("external_treated", external_treated, "error", ["treatment"]),
            ("trial_arm_of_one", trial_arm_of_one, "error", ["treatment"]),
            ("old_positional_order",
             lambda c: Case(c.X, {"_positional": (c.roles["y"], c.roles["treatment"],
                                                  c.roles["trial"])}, c.estimate_kwargs),
             "error", ["trial"]),
        ]
    if area == "longterm":
        def non_monotone(c):
            S, y = np.asarray(c.roles["short"]).copy(), np.asarray(c.roles["y"]).copy()
            row = np.flatnonzero(np.isnan(S[:, 0]))[0]
            y[row] = 1.0
            return _set(c, y=y)

        def arm_drops_out(c):
            y, a = np.asarray(c.roles["y"]).copy(), np.asarray(c.roles["treatment"])
            y[a == 1] = np.nan
            return _set(c, y=y)

        def missing_short_column(c):
            f = _frame(c, area)
            return _set(f, short=["s1", "s9"])

        return [
            ("short_rows", lambda c: _set(c, short=np.asarray(c.roles["short"])[:-4]), "error",
             ["short"]),
            ("non_monotone", non_monotone, "error", ["monotone", "y", "short"]),
            ("observed_shape", lambda c: _set(c, observed=np.ones((len(c.roles["y"]), 5))),
             "error", ["observed"]),
            ("observed_nonbinary", lambda c: _set(c, observed=np.full(
                (len(c.roles["y"]), 2), 2.0)), "error", ["observed"]),
            ("arm_drops_out", arm_drops_out, "error", ["treatment", "y"]),
            ("missing_short_column", missing_short_column, "error", ["short", "s9"]),
            ("old_positional_order",
             lambda c: Case(c.X, {"_positional": (c.roles["treatment"], c.roles["short"],
                                                  c.roles["y"])}, c.estimate_kwargs),
             "error", ["short", "y", "treatment"]),
        ]
    return [
        ("X_target_none", lambda c: _set(c, X_target=None), "error", ["X_target"]),
        ("X_target_columns", lambda c: _set(c, X_target=np.asarray(c.roles["X_target"])[:, :2]),
         "error", ["X_target"]),
        ("X_target_names", lambda c: _set(_frame(c, area), X_target=_frame(
            c, area).roles["X_target"].rename(columns={"x1": "z1"})), "error",
         ["X_target", "x1"]),
        ("X_target_nan", lambda c: _set(c, X_target=_with_cell(c.roles["X_target"], np.nan)),
         "error", ["X_target"]),
        ("X_target_empty", lambda c: _set(c, X_target=np.asarray(c.roles["X_target"])[:0]),
         "error", ["X_target"]),
        ("treatment_continuous", lambda c: _set(c, treatment=np.asarray(c.roles["y"])), "error",
         ["treatment"]),
        ("old_positional_order",
         lambda c: Case(c.X, {"_positional": (c.roles["treatment"], c.roles["y"],
                                              c.roles["X_target"])}, c.estimate_kwargs),
         "error", ["X_target"]),
    ]


BAD_CASES = [(name, cid, build, expect, names)
             for name, (area, _) in ESTIMATORS.items()
             for cid, build, expect, names in common_bad_inputs(area) + area_bad_inputs(area)]


def _fit_bad(est, case):
    roles = dict(case.roles)
    positional = roles.pop("_positional", ())
    return est.fit(case.X, *positional, **roles)


@pytest.mark.parametrize("name, cid, build, expect, names", BAD_CASES,
                         ids=[f"{n}-{c}" for n, c, *_ in BAD_CASES])
def test_bad_input(name, cid, build, expect, names):
    area, _ = ESTIMATORS[name]
    case = build(make_case(area, name))
    est = new(name)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            _fit_bad(est, case)
            res = quiet_estimate(est, case, inference="influence"
                                 if "influence" in _inferences(est) else "bootstrap", n_boot=5)
        except (ValueError, TypeError) as exc:
            if expect == "ok":
                pytest.fail(f"valid input rejected: {exc!r}")
            assert _names_argument(str(exc), names), f"error does not name {names}: {exc!r}"
            return
    if expect == "error":
        pytest.fail(f"silent number: {res!r} for bad input {cid}")
    assert np.isfinite(res.value) and np.isfinite(res.std_error)
    if expect == "error_or_warning":
        ours = [str(w.message) for w in caught if issubclass(w.category, CausalkitWarning)]
        assert any(_names_argument(m, names) for m in ours), (
            f"fitted without an error or a warning naming {names}: {ours}")


def test_permuted_series_is_aligned_not_matched_by_position():
    """A Series whose index is a permutation of X's is aligned on the index."""
    name = "TrialOnly"
    area, _ = ESTIMATORS[name]
    case = make_case(area, name)
    frame = as_frame(case, area)
    X = frame.X[["x0", "x1", "x2"]]
    perm = np.random.default_rng(2).permutation(len(X))
    y = frame.X["outcome"].iloc[perm]
    a = frame.X["arm"].iloc[perm]
    s = frame.X["in_trial"].iloc[perm]
    aligned = quiet_fit(new(name), Case(X, {"y": frame.X["outcome"], "treatment":
                                            frame.X["arm"], "trial": frame.X["in_trial"]}))
    shuffled = quiet_fit(new(name), Case(X, {"y": y, "treatment": a, "trial": s}))
    assert quiet_estimate(shuffled, case).value == quiet_estimate(aligned, case).value
