"""The default prior of ``AdaptiveBorrowing`` (``causalkit.borrowing.adaptive.BIAS_PRIOR``).

Two steps, neither of which uses a design or seed of the borrowing studies or tests:

1. *Normal-means frontier.* For :math:`Z \\sim N(\\theta, 1)` and the posterior-mean rule
   :math:`\\eta` of a prior made of a flat density plus masses on the atoms
   :math:`\\{0, 0.5, \\dots, 8\\}`, the risk is :math:`R(\\theta) = E\\{\\eta(Z) - \\theta\\}^2`
   (Gauss-Hermite quadrature, 120 nodes, :math:`\\theta \\in [0, 20]`). For each bound
   :math:`M` in ``MAX_RISKS`` the masses minimise :math:`R(0)` subject to
   :math:`R(\\theta) \\le M` for every :math:`\\theta > 0` and :math:`R(20) \\le 1.005` (back to
   trial-only's risk), by SLSQP on the log-masses: a smaller :math:`M` costs more at 0 (Bickel
   1983).
2. *Choice of M in finite samples.* A tuning design that no study uses (``paper_a_design`` with
   300 trial units, 200 treated, 600 external controls, 6 covariates, covariate shift 0.2,
   draws ``default_rng([880000, rep])``, 400 per cell): exchangeable, a systematic bias of
   0.05 to 1 on every external control, and biases of 0.25 to 2 on 40% of them. Trial-only and
   full borrowing are fitted once per draw and every rule is applied to the same fits. Each
   rule's measured risk in a cell is :math:`R = (\\mathrm{MSE} - V_E)/(\\mathrm{MSE}_0 - V_E)`
   (:math:`V_E`: full borrowing's MSE in the exchangeable cell, :math:`\\mathrm{MSE}_0`
   trial-only's), its regret :math:`R - \\min(1, R_{\\text{full}})`; the default is the bound
   :math:`M` whose prior has the smallest worst regret over the cells. The limited-translation
   rule :math:`(c, b) = (0.7, 4)` (the earlier default) is measured beside them.

Writes ``simulations/results/borrowing/borrowing_bias_prior.csv`` (per rule: the normal-means
risk at 0 and largest risk, the measured worst regret and its cell, which bound was chosen, and
the row of ``BIAS_PRIOR`` itself, the chosen prior as committed) and prints the chosen prior,
masses rounded to three significant digits and those below 0.1 dropped.

Usage: ``python simulations/borrowing_bias_prior.py [JOBS]`` (about 8 minutes on 2 cores).
"""
import sys
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
from joblib import Parallel, delayed
from scipy.optimize import minimize
from scipy.stats import norm
from threadpoolctl import threadpool_limits

from causalkit.borrowing import AdaptiveBorrowing
from causalkit.borrowing.adaptive import BIAS_PRIOR, bias_posterior_mean
from causalkit.borrowing.designs import paper_a_design

OUT = Path(__file__).parent / "results" / "borrowing" / "borrowing_bias_prior.csv"
MAX_RISKS = (1.24, 1.255, 1.27, 1.285, 1.30, 1.33)
ATOMS = np.arange(0.0, 8.01, 0.5)
NODES, WEIGHTS = np.polynomial.hermite_e.hermegauss(120)
WEIGHTS = WEIGHTS / WEIGHTS.sum()
THETA = np.r_[np.linspace(0, 8, 161), np.linspace(8.1, 20, 120)]
SEED, REPS = 880000, 400
SIZES = dict(n_trial=300, n_treated=200, n_external=600, n_features=6, shift=0.2)
CELLS = {"exchangeable": {},
         **{f"systematic{b:g}": {"bias": b, "frac_biased": 1.0}
            for b in (0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.4, 0.5, 0.7, 1.0)},
         **{f"bias{b:g}x40": {"bias": b, "frac_biased": 0.4} for b in (0.25, 0.5, 1.0, 2.0)}}


def risk(rule):
    z = THETA[:, None] + NODES
    return ((rule(z) - THETA[:, None]) ** 2 * WEIGHTS).sum(axis=1)


def frontier_prior(max_risk):
    """Masses on ``ATOMS`` minimising R(0) subject to R <= max_risk and R(20) <= 1.005."""
    z = THETA[:, None] + NODES
    plus, minus = norm.pdf(z[..., None] - ATOMS), norm.pdf(z[..., None] + ATOMS)
    minus[..., ATOMS == 0] = 0.0                      # the atom at 0 is counted once

    def r(log_masses):                               # bias_posterior_mean on the fixed nodes
        masses = np.exp(log_masses)
        eta = (z + (plus - minus) @ (masses * ATOMS)) / (1.0 + (plus + minus) @ masses)
        return ((eta - THETA[:, None]) ** 2 * WEIGHTS).sum(axis=1)

    start = np.full(ATOMS.size, -2.0)
    start[0] = 3.0
    constraints = [{"type": "ineq", "fun": lambda q: max_risk - r(q)[1:]},
                   {"type": "ineq", "fun": lambda q: 1.005 - r(q)[THETA >= 20]}]
    with np.errstate(over="ignore", invalid="ignore"), threadpool_limits(1):   # reproducible
        res = minimize(lambda q: r(q)[0], start, constraints=constraints, method="SLSQP",
                       options={"maxiter": 300, "ftol": 1e-10})
    masses = np.exp(res.x)
    keep = masses >= 0.1                              # smaller ones change no risk by 0.001
    return ATOMS[keep], np.array([float(f"{m:.3g}") for m in masses[keep]])


def fit(cell, rep):
    warnings.simplefilter("ignore")
    d = paper_a_design(np.random.default_rng([SEED, rep]), **SIZES, **CELLS[cell])
    est = AdaptiveBorrowing(random_state=0).fit(d["X"], d["y"], d["a"], trial=d["s"])
    return (cell, est.trial_only_.value, est.full_borrowing_.value, est.difference_se_,
            d["truth"])


def limited_translation(z, c=0.7, b=4.0):
    a = np.abs(z)
    return np.sign(z) * (a - np.minimum(a, c * np.exp(-np.maximum(a - c, 0) / b)))


def measured_regret(fits, rule):
    """Worst measured regret over the cells and the cell where it is reached."""
    z = (fits["full"] - fits["trial"]) / fits["se_difference"]
    lam = np.clip(1 - rule(z) / np.where(z == 0, 1, z), 0, 1)
    lam[z == 0] = 1.0
    errors = fits.assign(rule=fits["trial"] + lam * (fits["full"] - fits["trial"]))
    for name in ("trial", "full", "rule"):
        errors[name] = (errors[name] - errors["truth"]) ** 2
    mse = errors.groupby("cell", sort=False)[["trial", "full", "rule"]].mean()
    v_e = mse.loc["exchangeable", "full"]
    scale = mse["trial"] - v_e
    regret = (mse["rule"] - v_e) / scale - np.minimum(1.0, (mse["full"] - v_e) / scale)
    return float(regret.max()), str(regret.idxmax())


def main(jobs=2):
    priors = Parallel(n_jobs=jobs)(delayed(frontier_prior)(m) for m in MAX_RISKS)
    fits = pd.DataFrame(Parallel(n_jobs=jobs)(delayed(fit)(c, r) for c in CELLS
                                              for r in range(REPS)),
                        columns=["cell", "trial", "full", "se_difference", "truth"])

    def row(name, rule, **extra):
        r = risk(rule)
        worst, where = measured_regret(fits, rule)
        return {"rule": name, "risk_at_0": r[0], "max_risk": r.max(), "risk_at_20": r[-1],
                "measured_worst_regret": worst, "worst_cell": where, **extra}

    rows = [row(f"posterior mean, max risk {m}",
                (lambda p: lambda z: bias_posterior_mean(z, p))(prior),
                atoms=" ".join(f"{a:g}" for a in prior[0]),
                masses=" ".join(f"{w:g}" for w in prior[1]))
            for m, prior in zip(MAX_RISKS, priors, strict=True)]
    best = int(np.argmin([r["measured_worst_regret"] for r in rows]))
    rows.append(row("posterior mean, BIAS_PRIOR", lambda z: bias_posterior_mean(z, BIAS_PRIOR),
                    atoms=" ".join(f"{a:g}" for a in BIAS_PRIOR[0]),
                    masses=" ".join(f"{w:g}" for w in BIAS_PRIOR[1])))
    rows.append(row("limited translation, c = 0.7, b = 4", limited_translation))
    table = pd.DataFrame(rows)
    table["chosen"] = table.index == best
    chosen = priors[best]
    print(table.drop(columns=["atoms", "masses"]).to_string(index=False, float_format="%.4f"))
    print("chosen prior:", (tuple(float(a) for a in chosen[0]), tuple(float(m) for m in chosen[1])))
    print("BIAS_PRIOR:  ", BIAS_PRIOR)
    OUT.parent.mkdir(parents=True, exist_ok=True)
    table.to_csv(OUT, index=False)


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 2)
