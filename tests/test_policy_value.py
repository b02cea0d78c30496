"""TargetPolicyValue: exact identities, nuisance bookkeeping, diagnostics and input errors."""

import warnings

import numpy as np
import pandas as pd
import pytest
from sklearn.base import clone
from sklearn.dummy import DummyClassifier
from sklearn.exceptions import NotFittedError
from sklearn.linear_model import LinearRegression, LogisticRegression

from causalkit import Estimate
from causalkit.exceptions import OverlapWarning
from causalkit.inference import contrast
from causalkit.policy import TargetPolicyValue, dgps


def _data(seed=0, n_source=800, n_target=600, shift=(0.5, 0.5, 0.0), design="estimation"):
    return dgps.simulate(design, np.random.default_rng(seed), n_source=n_source,
                         n_target=n_target, shift=shift)


def _fit(data, **kwargs):
    kwargs.setdefault("cv", 3)
    kwargs.setdefault("random_state", 0)
    return TargetPolicyValue(**kwargs).fit(data["X_source"], data["y"], data["treatment"],
                                           X_target=data["X_target"])


OPTIMAL = dgps.optimal_policy("estimation")
SOFT = dgps.soft_policy("estimation")


@pytest.mark.parametrize("normalize", [True, False])
def test_score_matrix_identity_and_two_sample_se(normalize):
    data = _data()
    est = _fit(data, normalize=normalize)
    X, gamma, is_target = est.score_matrix()
    assert X.shape == (1400, 3) and gamma.shape == (1400, 2) and is_target.sum() == 600
    a = data["treatment"]
    omega = est.weights_ / est.propensity_[np.arange(800), a]
    if normalize:  # Hajek: residual weights average one within each arm
        omega = omega / np.array([omega[a == k].sum() / 800 for k in (0, 1)])[a]
        assert [est.residual_weights_[a == k].sum() / 800 for k in (0, 1)] == pytest.approx([1, 1])
    for policy in (OPTIMAL, SOFT, 1, 0):
        P = np.vstack(est.policy_matrices(policy))
        res = est.estimate(policy)
        assert res.value == pytest.approx(np.mean(np.sum(P * gamma, axis=1)), abs=1e-12)
        # SE^2 = s_T^2 / n_T + s_S^2 / n_S from the two summands, computed by hand
        P_s, P_t = est.policy_matrices(policy)
        rows = np.arange(800)
        m_t = np.sum(P_t * est.mu_target_, axis=1)
        u = P_s[rows, a] * (data["y"] - est.mu_source_[rows, a])
        c_s = omega * u
        assert res.value == pytest.approx(m_t.mean() + c_s.mean(), abs=1e-12)
        if normalize:  # ratio estimator per arm: the delta method centres u at its arm's ratio
            theta = np.array([c_s[a == k].sum() / omega[a == k].sum() for k in (0, 1)])
            c_s = omega * (u - theta[a])
        se = np.sqrt(m_t.var() / 600 + c_s.var() / 800)
        assert res.std_error == pytest.approx(se, rel=1e-10)
        assert isinstance(res, Estimate) and res.influence.shape == (1400,)


@pytest.mark.parametrize("method", ["dr", "ipw", "source_only"])
def test_normalised_influence_is_the_derivative_of_the_estimator(method):
    """With the nuisances held fixed, the estimate is a smooth function of per-row case
    weights; the influence value of a source row is n_S times the estimate's derivative in that
    row's case weight (here by central differences of a hand-written weighted estimator).
    The outcome model is wrong (x1 only), so the weighted residuals do not average zero and the
    ratio's centring matters."""
    data = _data(seed=11)
    wrong = _fit(data, outcome_model=_FirstColumnOLS())
    a, y = data["treatment"], data["y"]
    rows = np.arange(800)
    P_s, P_t = wrong.policy_matrices(SOFT)
    raw = (wrong.weights_ if method != "source_only" else 1.0) / wrong.propensity_[rows, a]
    pi_a = P_s[rows, a]
    u = pi_a * (y if method == "ipw" else y - wrong.mu_source_[rows, a])
    plain = np.sum(P_s * wrong.mu_source_, axis=1) if method == "source_only" else 0.0

    def source_term(c):
        per_arm = [np.sum((c * raw * u)[a == k]) / np.sum((c * raw)[a == k]) for k in (0, 1)]
        return np.sum(c * plain) / np.sum(c) + np.sum(per_arm)

    res = wrong.estimate(SOFT, method)
    phi_s = res.influence[:800] * 800 / 1400
    h = 1e-6
    for i in (0, 17, 400, 799):
        up, down = np.ones(800), np.ones(800)
        up[i], down[i] = 1 + h, 1 - h
        derivative = (source_term(up) - source_term(down)) / (2 * h)
        assert 800 * derivative == pytest.approx(phi_s[i], rel=1e-5, abs=1e-7)


class _FirstColumnOLS(LinearRegression):
    """OLS on the first covariate only: a wrong outcome model."""

    def fit(self, X, y, sample_weight=None):
        return super().fit(np.asarray(X)[:, :1], y, sample_weight)

    def predict(self, X):
        return super().predict(np.asarray(X)[:, :1])


def test_no_shift_equals_standard_aipw_on_pooled_covariates():
    """No shift: the target is the pooled covariate sample (source rows plus unlabelled rows of
    the same population), the correct domain model is a constant, so w = 1 exactly, and the DR
    value is the standard AIPW policy value whose regression part averages over the pooled
    covariates. The reference recomputes every nuisance with plain scikit-learn."""
    data = _data(seed=3, shift=(0, 0, 0))
    Xs, a, y = data["X_source"], data["treatment"], data["y"]
    pooled = np.vstack([Xs, data["X_target"]])
    est = TargetPolicyValue(propensity_model=LogisticRegression(max_iter=1000),
                            domain_model=DummyClassifier(strategy="prior"), cv=4,
                            normalize=False, random_state=1).fit(Xs, y, a, X_target=pooled)
    assert np.allclose(est.weights_, 1.0, atol=1e-12)
    mu_s, mu_p, e_s = np.empty((800, 2)), np.empty((pooled.shape[0], 2)), np.empty((800, 2))
    for k in range(4):
        tr, te, tp = est.source_folds_ != k, est.source_folds_ == k, est.target_folds_ == k
        for arm in (0, 1):
            fit = LinearRegression().fit(Xs[tr & (a == arm)], y[tr & (a == arm)])
            mu_s[te, arm], mu_p[tp, arm] = fit.predict(Xs[te]), fit.predict(pooled[tp])
        e_s[te] = LogisticRegression(max_iter=1000).fit(Xs[tr], a[tr]).predict_proba(Xs[te])
    for policy in (OPTIMAL, SOFT):
        P_s, P_p = policy(Xs), policy(pooled)
        rows = np.arange(800)
        aipw = (np.mean(np.sum(P_p * mu_p, axis=1))
                + np.mean(P_s[rows, a] * (y - mu_s[rows, a]) / e_s[rows, a]))
        assert est.estimate(policy).value == pytest.approx(aipw, abs=1e-10)


def test_density_ratio_recovers_truth_with_unequal_sample_sizes():
    """The n_S/n_T odds factor: with n_S = 4 n_T the weights still average one (E_S[w] = 1)
    and track the true ratio exp(m'x - |m|^2/2)."""
    m = np.array([0.5, 0.5, 0.0])
    data = _data(seed=5, n_source=4000, n_target=1000, shift=m)
    est = _fit(data)
    true_w = np.exp(data["X_source"] @ m - m @ m / 2)
    assert est.weights_.mean() == pytest.approx(1.0, abs=0.05)
    assert np.corrcoef(np.log(est.weights_), np.log(true_w))[0, 1] > 0.97
    assert np.median(np.abs(est.weights_ / true_w - 1)) < 0.15
    new = np.random.default_rng(9).normal(size=(500, 3))
    w_new = est.density_ratio(new)
    assert np.median(np.abs(w_new / np.exp(new @ m - m @ m / 2) - 1)) < 0.15
    diag = est.diagnostics()
    assert diag["n_source"] == 4000 and diag["n_target"] == 1000
    assert 0.5 < diag["domain_auc"] < 0.8 and not diag["weak_overlap"]
    assert diag["ess"] == pytest.approx(est.weights_.sum() ** 2 / np.sum(est.weights_ ** 2))


def test_methods_and_contrast():
    data = _data(seed=2)
    est = _fit(data)
    values = {m: est.estimate(OPTIMAL, m) for m in ("dr", "direct", "ipw", "source_only")}
    assert all(np.isfinite(v.std_error) and v.std_error > 0 for v in values.values())
    # source-only estimates the source value (about 1.85), not the target value (about 2.95)
    assert values["source_only"].value < values["dr"].value - 0.6
    diff = est.contrast(1, 0)
    assert diff.value == pytest.approx(est.estimate(1).value - est.estimate(0).value)
    ref = contrast(est.estimate(1), est.estimate(0))
    assert diff.std_error == pytest.approx(ref.std_error)
    # the transported ATE is 0.5 + m1 - m3 = 1.0
    lo, hi = diff.conf_int(0.001)
    assert lo < 1.0 < hi
    with pytest.raises(ValueError, match="method"):
        est.estimate(OPTIMAL, "dm")


def test_three_arms_labels_and_dataframes():
    data = _data(seed=4, design="estimation3")
    labels = np.array([10.0, 20.0, 30.0])[data["treatment"]]
    cols = ["age", "dose", "score"]
    Xs = pd.DataFrame(data["X_source"], columns=cols)
    Xt = pd.DataFrame(data["X_target"], columns=cols)
    est = TargetPolicyValue(cv=3, random_state=0).fit(Xs, data["y"], labels, X_target=Xt)
    assert est.arms_.tolist() == [10.0, 20.0, 30.0]
    assert est.propensity_.shape == (800, 3)
    by_name = est.estimate(lambda X: np.where(X["age"] > 0, 20.0, 10.0))
    by_matrix = est.estimate(lambda X: np.eye(3)[np.where(np.asarray(X)[:, 0] > 0, 1, 0)])
    assert by_name.value == pytest.approx(by_matrix.value)
    assert est.estimate(30.0).value == pytest.approx(est.estimate(lambda X: np.full(len(X), 30.0))
                                                     .value)


def test_weak_overlap_warns_and_cap_counts():
    data = _data(seed=6, shift=(3.0, 0.0, 0.0))
    with pytest.warns(OverlapWarning, match="effective sample size"):
        est = _fit(data)
    with pytest.warns(OverlapWarning):
        diag = est.diagnostics()
    assert diag["weak_overlap"] and diag["ess_fraction"] < 0.1
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", OverlapWarning)
        capped = _fit(data, max_weight=20.0)
    assert capped.weights_.max() <= 20.0 and capped.diagnostics(warn=False)["n_capped_weights"] > 0


def test_sklearn_protocol():
    est = TargetPolicyValue(cv=4, min_propensity=0.01)
    assert clone(est).get_params() == est.get_params()
    with pytest.raises(NotFittedError):
        est.estimate(1)


class _BadProba:
    def __init__(self, out):
        self.out = out

    def predict_proba(self, X):
        return self.out(len(X))


@pytest.fixture(scope="module")
def fitted():
    data = _data(seed=8, n_source=300, n_target=200)
    return data, _fit(data)


def test_bad_samples_raise(fitted):
    data, _ = fitted
    Xs, a, y, Xt = data["X_source"], data["treatment"], data["y"], data["X_target"]
    est = TargetPolicyValue(cv=3)
    with pytest.raises(ValueError, match="X_target must have at least 1 row"):
        est.fit(Xs, y, a, X_target=Xt[:0])
    with pytest.raises(ValueError, match="X_target needs at least cv=3 rows"):
        est.fit(Xs, y, a, X_target=Xt[:2])
    with pytest.raises(ValueError, match="X_target has 2 columns"):
        est.fit(Xs, y, a, X_target=Xt[:, :2])
    with pytest.raises(ValueError, match="X_target lacks the covariate column"):
        est.fit(pd.DataFrame(Xs, columns=list("abc")), y, a,
                X_target=pd.DataFrame(Xt, columns=list("abd")))
    with pytest.raises(ValueError, match="at least 2 arms"):
        est.fit(Xs, y, np.zeros(300), X_target=Xt)
    with pytest.raises(ValueError, match="treatment has length"):
        est.fit(Xs, y, a[:-1], X_target=Xt)
    with pytest.raises(ValueError, match="y contains NaN"):
        est.fit(Xs, np.where(np.arange(300) == 4, np.nan, y), a, X_target=Xt)
    with pytest.raises(ValueError, match="arm 2.0 has 1"):
        est.fit(Xs, y, np.where(np.arange(300) == 0, 2, a), X_target=Xt)
    with pytest.raises(ValueError, match="cv must be"):
        TargetPolicyValue(cv=1).fit(Xs, y, a, X_target=Xt)
    with pytest.raises(ValueError, match="min_propensity"):
        TargetPolicyValue(min_propensity=0.7).fit(Xs, y, a, X_target=Xt)


def test_bad_policies_raise(fitted):
    _, est = fitted
    with pytest.raises(ValueError, match=r"arm\(s\) \[2.0\] that are not among"):
        est.estimate(2)
    with pytest.raises(ValueError, match="not among the treatment arms"):
        est.estimate(lambda X: np.full(len(X), 3))
    with pytest.raises(ValueError, match="outside"):
        est.estimate(_BadProba(lambda n: np.tile([-0.2, 1.2], (n, 1))))
    with pytest.raises(ValueError, match="do not sum to 1"):
        est.estimate(_BadProba(lambda n: np.tile([0.3, 0.3], (n, 1))))
    with pytest.raises(ValueError, match=r"\(300, 2\) probability matrix"):
        est.estimate(lambda X: np.full((len(X), 3), 1 / 3))
    with pytest.raises(ValueError, match="non-finite"):
        est.estimate(lambda X: np.full((len(X), 2), np.nan))
    with pytest.raises(ValueError, match="labels for"):
        est.estimate(lambda X: np.zeros(5))
    with pytest.raises(TypeError, match="policy must be"):
        est.estimate("treat everyone")
    with pytest.raises(ValueError, match="columns"):
        est.density_ratio(np.zeros((3, 2)))
