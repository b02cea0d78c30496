"""Check the closed-form truth of the linear-Gaussian long-term design.

1. The ATE by hand from the structural equations: ``tau = d_3 + kappa (d_2 + rho d_1)``
   (``E[X] = 0``), independently of ``LinearGaussianDesign.ate``.
2. A Monte Carlo mean of ``Y(1) - Y(0)`` over 10^7 draws of the potential outcomes made by the
   design's own sampling code (``X ~ N(0, I)``).
3. An oracle IPW check of the observed-data mechanism over 10^7 sampled units: with the true
   propensity ``expit(X psi)`` and the true continuation probabilities
   ``expit(alpha_t + X eta + zeta A + xi S_{t-1})``, the Horvitz-Thompson mean of
   ``A R_T Y / (e r_T) - (1 - A) R_T Y / ((1 - e) r_T)`` is unbiased for the ATE only if the
   drop-out the sampler draws is the sequentially-missing-at-random one it claims.

Writes ``simulations/results/longterm/longterm-linear_truth.csv``.
"""

from pathlib import Path

import numpy as np
import pandas as pd
from scipy.special import expit

from causalkit.longterm import LinearGaussianDesign

N_DRAWS, CHUNK = 10_000_000, 500_000
OUT = Path(__file__).parent / "results" / "longterm" / "longterm-linear_truth.csv"


def _oracle_terms(design, sample):
    X, A, S, R = sample["X"], sample["treatment"], sample["short"], sample["observed"]
    alpha = design.intercepts()
    e = expit(X @ design.psi)
    log_r = np.zeros(X.shape[0])
    for t in range(design.T):
        prev = np.nan_to_num(S[:, t - 1]) if t else 0.0
        lam = expit(alpha[t] + X @ design.eta + design.zeta * A + design.xi * prev)
        log_r += np.where(R[:, t - 1] == 1, np.log(lam), 0.0) if t else np.log(lam)
    y = np.nan_to_num(sample["outcome"]) * R[:, -1] / np.exp(log_r)
    return np.where(A == 1, y / e, -y / (1 - e)), R.mean(axis=0)


def main():
    rows = []
    for rate in (0.1, 0.2, 0.3, 0.4):
        design = LinearGaussianDesign(dropout=(rate,) * 3, xi=1.0)
        d1, d2, d3 = design.delta
        by_hand = d3 + design.kappa * (d2 + design.rho * d1)
        rng = np.random.default_rng([20261202, int(100 * rate)])
        diff, ipw, observed = [], [], []
        for _ in range(N_DRAWS // CHUNK):
            X = rng.normal(size=(CHUNK, design.p))
            _, Y = design._potential(X, rng)
            diff.append(Y[1] - Y[0])
            s = design.sample(rng, n=CHUNK)
            terms, obs = _oracle_terms(design, s)
            ipw.append(terms)
            observed.append(obs)
        diff, ipw = np.concatenate(diff), np.concatenate(ipw)
        obs = np.mean(observed, axis=0)
        rows.append({"dropout": rate, "closed_form_by_hand": by_hand,
                     "design_ate": design.ate(), "mc_potential_mean": diff.mean(),
                     "mc_potential_se": diff.std() / np.sqrt(diff.size),
                     "oracle_ipw_mean": ipw.mean(), "oracle_ipw_se": ipw.std() / np.sqrt(ipw.size),
                     "observed_stage1": obs[0], "observed_stage2": obs[1],
                     "observed_stage3": obs[2], "n_draws": diff.size})
    table = pd.DataFrame(rows)
    table["potential_z"] = (table["mc_potential_mean"] - table["design_ate"]) / table[
        "mc_potential_se"]
    table["oracle_ipw_z"] = (table["oracle_ipw_mean"] - table["design_ate"]) / table[
        "oracle_ipw_se"]
    OUT.parent.mkdir(parents=True, exist_ok=True)
    table.to_csv(OUT, index=False)
    with pd.option_context("display.width", 200, "display.max_columns", 20):
        print(table.to_string())


if __name__ == "__main__":
    main()
