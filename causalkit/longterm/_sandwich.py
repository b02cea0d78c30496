"""Stacked estimating-equation (sandwich) influence functions of the least-squares outcome chain.

For arm ``a`` the sequential regression estimator solves, stage by stage backwards, the
(weighted) least-squares equations and then the mean equation

.. math::

    \\psi_t(\\beta_t, \\beta_{t+1}) &= I(A = a) R_t w_t \\tilde H_t
        \\{\\tilde Y_t(\\beta_{t+1}) - \\tilde H_t^\\top \\beta_t\\}, \\qquad t = T, \\dots, 1,\\\\
    \\psi_\\mu &= \\tilde H_1(a)^\\top \\beta_1 - \\mu_a,

where ``H~_t = (1, H_t)``, ``Y~_T = Y`` and, below ``T``, ``Y~_t = Y~_{t+1}`` when
``R_{t+1} = 1`` and ``H~_{t+1}' beta_{t+1}`` otherwise (``"impute_missing"``) or
``H~_{t+1}' beta_{t+1}`` always (``"replace_all"``). The system is block-triangular, so the
M-estimation sandwich ``A^{-1} B A^{-T}`` (Stefanski & Boos 2002, *Amer. Statist.* 56(1))
reduces to the backward recursion of influence functions

.. math::

    \\mathrm{IF}_{\\beta_t} = M_t^{-1}\\{\\psi_t + C_t\\, \\mathrm{IF}_{\\beta_{t+1}}\\}, \\quad
    M_t = P_n[I(A=a) R_t w_t \\tilde H_t \\tilde H_t^\\top], \\quad
    C_t = P_n[I(A=a) R_t w_t\\, d_t\\, \\tilde H_t \\tilde H_{t+1}^\\top],

with ``d_t = 1 - R_{t+1}`` (``"impute_missing"``) or ``1`` (``"replace_all"``), and
``IF_mu = m_1(X, a) - mu_a + P_n[H~_1]' IF_beta_1``. Each stage's residuals enter ``psi_t``
divided by ``sqrt(1 - h_ii)``, ``h_ii`` the unit's leverage in that stage's (weighted) least
squares: for one stage ``M^{-1} psi`` is then the HC2 influence of ``beta`` (MacKinnon & White
1985, *J. Econometrics* 29(3)), whose covariance is unbiased under homoskedasticity, where HC0
(White 1980) is biased down by the leverage. That matters when an arm is small beside the
number of covariates: on IHDP (139 treated, 25 covariates; 150 replications, seeds
300000-300149) HC0 gave SequentialRegression SE/SD 0.92 and coverage 0.91 at 15% drop-out per
stage and 0.84 and 0.86 at 30%; HC2 gave 1.04 and 0.95, 0.98 and 0.91 (HC3, dividing by
``1 - h_ii``, 1.20 and 0.99, 1.16 and 0.96). Weights ``w_t`` (the marginal structural model) are
treated as known: the term from estimating them is ``P_n[I R_t H~_t (Y~_t - H~_t' beta_t)
dw_t/dgamma]``, which vanishes in the limit when the stage regressions are correctly specified
(then the residual has mean zero given ``H_t``), so the sandwich is then first-order exact.
Columns are centred and scaled (the fitted values of least squares do not depend on it) and the
aliased ones dropped with :func:`causalkit._linalg.independent_columns`.
"""

from __future__ import annotations

import numpy as np
from sklearn.dummy import DummyRegressor
from sklearn.linear_model import LinearRegression

from causalkit._linalg import independent_columns
from causalkit.longterm._data import MonotoneData
from causalkit.longterm._models import unscaled

__all__ = ["Design", "ols_influence", "leverage", "hc2_residual", "loo_residual",
           "stage_designs", "chain_leverage", "chain_influence", "chain_estimation_term",
           "least_squares_kind"]


class Design:
    """``H -> (1, (H - center) / scale)[:, keep]``, learnt on the rows a stage is fitted on
    (``keep = [0]``, the intercept alone, for a mean-only model)."""

    def __init__(self, H: np.ndarray, intercept_only: bool = False):
        self.center = H.mean(axis=0)
        scale = H.std(axis=0)
        self.scale = np.where(scale > 0, scale, 1.0)
        self.keep = np.array([0]) if intercept_only else independent_columns(self._full(H))

    def _full(self, H):
        return np.column_stack([np.ones(H.shape[0]), (H - self.center) / self.scale])

    def __call__(self, H: np.ndarray) -> np.ndarray:
        return self._full(H)[:, self.keep]


def leverage(design: np.ndarray, weight: np.ndarray | None = None) -> np.ndarray:
    """Diagonal of the (weighted) hat matrix, ``h_ii = w_i x_i' (X' W X)^{-1} x_i``, in
    ``[0, 1]`` (``design`` of full column rank)."""
    w = np.ones(design.shape[0]) if weight is None else weight
    gram = design.T @ (design * w[:, None])
    h = w * np.einsum("ij,ji->i", design, np.linalg.solve(gram, design.T))
    return np.clip(h, 0.0, 1.0)


def hc2_residual(residual: np.ndarray, h: np.ndarray) -> np.ndarray:
    """``e_i / sqrt(1 - h_ii)``; a unit fitted exactly (``h_ii = 1``, its residual 0) keeps 0."""
    room = 1.0 - h
    return np.where(room > 1e-12, residual / np.sqrt(np.maximum(room, 1e-12)), 0.0)


def loo_residual(residual: np.ndarray, h: np.ndarray) -> np.ndarray:
    """``e_i / (1 - h_ii)``, the leave-one-out (prediction) residual of least squares, whose
    square is the HC3 term (MacKinnon & White 1985); a unit fitted exactly keeps 0."""
    room = 1.0 - h
    return np.where(room > 1e-12, residual / np.maximum(room, 1e-12), 0.0)


def ols_influence(design: np.ndarray, residual: np.ndarray, weight: np.ndarray,
                  rows: np.ndarray, extra: np.ndarray | None = None) -> np.ndarray:
    """Influence of (weighted) least-squares coefficients: ``M^{-1} (I_i w_i h_i e~_i +
    extra_i)`` with ``M = sum_{i in rows} w_i h_i h_i' / n`` and ``e~_i`` the residual divided
    by ``sqrt(1 - h_ii)`` (module docstring).

    With ``extra=None``, ``sum_i IF_i IF_i' / n^2`` is the HC2 covariance of the coefficients
    (MacKinnon & White 1985).

    Parameters
    ----------
    design : ndarray (m, p)
        Design rows of the fitted units.
    residual, weight : ndarray (m,)
        Their residuals and weights.
    rows : ndarray of bool (n,)
        Which of the ``n`` units were fitted (``m`` of them).
    extra : ndarray (n, p), optional
        Further terms of the linearised estimating equation (the later stages of a chain).

    Returns
    -------
    ndarray (n, p)
    """
    n = rows.size
    score = np.zeros((n, design.shape[1])) if extra is None else extra.copy()
    residual = hc2_residual(residual, leverage(design, weight))
    score[rows] += design * (weight * residual)[:, None]
    bread = design.T @ (design * weight[:, None]) / n
    return np.linalg.solve(bread, score.T).T


def stage_designs(data: MonotoneData, chain) -> list:
    """Per arm, the :class:`Design` of each stage's least squares (``{k: Design}``), learnt on
    the arm's stage-``k`` responders."""
    intercept_only = least_squares_kind(chain.model) == "mean"
    return [{k: Design(data.history(k, (data.a == arm) & data.responders(k)), intercept_only)
             for k in range(data.n_stages)} for arm in (0, 1)]


def _stage_influences(data: MonotoneData, chain, mode: str, weights=None,
                      designs: list | None = None) -> list:
    """Per arm, ``(influence, designs)``: the influence (n, p_k) of each stage's coefficients
    ``beta_k`` (in the stage design's coordinates) and each stage's :class:`Design`
    (``designs``, or :func:`stage_designs`), from the backward recursion of the module
    docstring."""
    designs_by_arm = stage_designs(data, chain) if designs is None else designs
    T, n = data.n_stages, data.n
    out = []
    for arm in (0, 1):
        target = data.Z[:, T - 1].copy()     # Y~_t on the fitted rows of stage t
        source = np.full(n, T)               # the stage whose prediction Y~_t is (T: observed)
        influence, designs = {}, designs_by_arm[arm]   # IF of beta_j (n, p_j), design of stage j
        for k in range(T - 1, -1, -1):
            rows = (data.a == arm) & data.responders(k)
            Hd = designs[k](data.history(k, rows))
            w = np.ones(Hd.shape[0]) if weights is None else weights(k, rows)
            extra = np.zeros((n, Hd.shape[1]))
            for j in np.unique(source[rows]):
                if j == T:
                    continue
                sel = source[rows] == j
                G = designs[j](data.history(j, np.flatnonzero(rows)[sel]))
                extra += influence[j] @ (Hd[sel].T @ (G * w[sel, None]) / n).T
            residual = target[rows] - chain.predict(k, data, rows, arm)
            influence[k] = ols_influence(Hd, residual, w, rows, extra)
            if k:
                prev = (data.a == arm) & data.responders(k - 1)
                imputed = np.ones(prev.sum(), dtype=bool) if mode == "replace_all" \
                    else data.R[prev, k] == 0
                idx = np.flatnonzero(prev)[imputed]
                target[idx] = chain.predict(k, data, idx, arm)
                source[idx] = k
        out.append((influence, designs))
    return out


def chain_influence(data: MonotoneData, chain, mode: str, weights=None) -> np.ndarray:
    """Influence functions ``(IF_mu_0, IF_mu_1)`` (n, 2) of the arm means of a fitted
    least-squares outcome chain (module docstring).

    ``chain`` is a fitted :class:`~causalkit.longterm._models.OutcomeChain` whose stages are
    least squares per arm (:func:`least_squares_kind` of its model not None);
    ``weights(k, rows)`` the stage weights it was fitted with (or None).
    """
    n = data.n
    out = np.empty((n, 2))
    everyone = np.ones(n, dtype=bool)
    for arm, (influence, designs) in enumerate(_stage_influences(data, chain, mode, weights)):
        m_first = chain.predict(0, data, everyone, arm)
        g = designs[0](data.X).mean(axis=0)
        out[:, arm] = m_first - m_first.mean() + influence[0] @ g
    return out


def chain_estimation_term(data: MonotoneData, chain, mode: str, W: np.ndarray,
                          shrink: bool = True, designs: list | None = None) -> np.ndarray:
    """The influence (n,) that estimating a least-squares outcome chain adds to the AIPW
    difference ``psi_1 - psi_0`` of :mod:`causalkit.longterm._scores` with stage weights ``W``
    (n, T, 2), with its gradient shrunk toward zero by its own noise.

    The AIPW estimate depends on the coefficients ``beta_k`` of stage ``k`` of arm ``a``
    through ``m_k``, which enters the score of every unit at risk at stage ``k`` with the
    factor ``c_k = W_{a,k-1} - W_{ak} R_k`` (``c_0 = 1 - W_{a0}``: ``m_1(X, a)`` itself and
    the first residual), so its linearisation adds ``sum_k g_k' IF(beta_k)`` with
    ``g_k = P_n[c_k H~_k]`` and ``IF(beta_k)`` from the stacked least-squares equations
    (:func:`chain_influence`'s recursion, the M-estimation sandwich of Stefanski & Boos 2002).
    When the weights are right, ``E[c_k | H_k] = 0`` and ``g_k`` vanishes in the limit: the
    efficient influence function is then the whole story, which is why it is left out of
    :func:`~causalkit.longterm._scores.substitution_variance`. When they are wrong, ``g_k`` is
    the weights' imbalance on the history and the term is first order (with flat weights the
    estimate equals :class:`~causalkit.longterm.SequentialRegression`'s and the corrected
    influence function its stacked sandwich). The sample gradient is of order ``n^{-1/2}`` even
    when the weights are right, and with heavy weights adding it untouched inflates the
    variance, so the stacked gradient ``g`` (all stages and both arms, dimension ``d``) is shrunk
    by the positive-part James-Stein factor ``max(0, 1 - d / chi2)``, ``chi2 = g' V^{-1} g``
    with ``V`` the sample covariance of ``g`` (James & Stein 1961, *Proc. Fourth Berkeley
    Symp.* 1; Baranchik 1964): about 0 when the imbalance is within its noise, about 1 when
    it is many times its noise. ``shrink=False`` leaves the gradient as estimated; ``designs``
    are the chain's :func:`stage_designs` (fitted here when None).

    The shrinkage was chosen on draws no study uses (``simulations/longterm_chain_term_check.py``,
    the linear design at 10-40% drop-out per stage, n = 1000, seeds ``[731000, rate in %,
    rep]``), beside the unshrunk term and no term; its results are in
    ``simulations/results/longterm/longterm_chain_term_check.csv``.
    """
    T, n = data.n_stages, data.n
    designs = stage_designs(data, chain) if designs is None else designs
    contributions = []                       # per unit, c_k H~_k, for every arm and stage
    for arm in (0, 1):
        for k in range(T):
            if k == 0:
                rows = np.ones(n, dtype=bool)
                c = 1.0 - W[:, 0, arm]
            else:
                rows = (data.a == arm) & data.responders(k - 1)
                c = (W[:, k - 1, arm] - W[:, k, arm])[rows]
            contribution = np.zeros((n, designs[arm][k].keep.size))
            contribution[rows] = designs[arm][k](data.history(k, rows)) * c[:, None]
            contributions.append(contribution)
    contribution = np.hstack(contributions)
    gradient = contribution.mean(axis=0)
    noise = np.atleast_2d(np.cov(contribution, rowvar=False)) / n
    chi2 = float(gradient @ np.linalg.lstsq(noise, gradient, rcond=None)[0])
    dim = np.linalg.matrix_rank(noise)
    factor = (max(0.0, 1.0 - dim / chi2) if chi2 > 0 else 0.0) if shrink else 1.0
    if factor == 0.0:                        # nothing to add: skip the influence recursion
        return np.zeros(n)
    influence = np.hstack([influence[k] if arm else -influence[k]
                           for arm, (influence, _) in enumerate(
                               _stage_influences(data, chain, mode, designs=designs))
                           for k in range(T)])
    return influence @ (factor * gradient)


def chain_leverage(data: MonotoneData, chain, designs: list | None = None) -> np.ndarray:
    """``(n, T, 2)`` leverage of each unit in the stage-``t``, arm-``a`` least squares of a
    least-squares outcome chain (NaN where the unit was not fitted): the stage regressions of
    :func:`chain_influence`, each fitted on the arm's responders at that stage (``designs``:
    the chain's :func:`stage_designs`, fitted here when None)."""
    designs = stage_designs(data, chain) if designs is None else designs
    out = np.full((data.n, data.n_stages, 2), np.nan)
    for arm in (0, 1):
        for k in range(data.n_stages):
            rows = (data.a == arm) & data.responders(k)
            out[rows, k, arm] = leverage(designs[arm][k](data.history(k, rows)))
    return out


def least_squares_kind(model) -> str | None:
    """``"linear"`` for least squares with an intercept on the raw history (``None``, the
    default; ``LinearRegression``; a Pipeline of ``StandardScaler`` steps ending in one),
    ``"mean"`` for a mean-only ``DummyRegressor`` (least squares on the intercept), else None:
    the models :func:`chain_influence` linearises."""
    if model is None:
        return "linear"
    model = unscaled(model)
    if isinstance(model, LinearRegression) and model.fit_intercept:
        return "linear"
    if isinstance(model, DummyRegressor) and model.strategy == "mean":
        return "mean"
    return None
