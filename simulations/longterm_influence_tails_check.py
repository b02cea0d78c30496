"""How heavy are the tails of the efficient influence function on the linear design, and what
does a normal interval with the right standard error cover at the studies' sample sizes?

At 40% drop-out per stage the default intervals of MonotoneAIPW and SequentialTMLE cover 0.98
and 0.988 in ``causalkit simulate longterm-linear`` (n = 1000), with mean SEs (0.51) close to the
efficiency bound's SD (0.52, ``simulations/longterm_efficiency_bound.py``) while the estimates'
SD over 400 draws is 0.33-0.39, and stays near 0.44 on the sqrt(n) scale up to n = 16,000. This
check asks whether the influence function itself explains it. For each drop-out rate of the
study (the design of ``longterm-linear``) it draws ``UNITS`` = 4,000,000 units from
``default_rng([SEED, rate in %])`` (no study uses them), evaluates the efficient influence
function at the true nuisances (:meth:`~causalkit.longterm.LinearGaussianDesign.efficient_influence`)
and reports:

- ``integrated_variance``: :math:`\\operatorname{Var}(\\varphi)` with the drop-out and noise
  integrated out (:meth:`~causalkit.longterm.LinearGaussianDesign.efficient_variance`, the
  bound's variance; 4,000,000 chains from ``default_rng([SEED, rate in %, 1])``);
- ``sample_variance``: the variance of the 4,000,000 sampled values, and
  ``top_0.1pct_share``: the share of their sum of squares from the largest 0.1%;
- for n = 1000 and 16,000 (the 4,000,000 units cut into 4000 and 250 groups):
  ``sd_of_means``, the SD of the group means times :math:`\\sqrt{n}` over the integrated SD, and
  ``coverage``, the share of group means within :math:`1.96\\sqrt{V/n}` of 0, with :math:`V`
  the integrated variance. That is what a normal interval with the exact asymptotic SE covers
  for an estimator equal to its linearisation.

Writes ``simulations/results/longterm/longterm_influence_tails_check.csv``. Usage: ``python
simulations/longterm_influence_tails_check.py`` (about 2 minutes).
"""
from pathlib import Path

import numpy as np
import pandas as pd

from causalkit.longterm import LinearGaussianDesign

OUT = Path(__file__).parent / "results" / "longterm" / "longterm_influence_tails_check.csv"
SEED, UNITS = 741000, 4_000_000
RATES = (0.1, 0.2, 0.3, 0.4)
Z = 1.959963984540054


def one_rate(rate):
    design = LinearGaussianDesign(dropout=(rate,) * 3, xi=1.0)   # as longterm-linear
    design.intercepts()
    key = round(100 * rate)
    variance = design.efficient_variance(np.random.default_rng([SEED, key, 1]), UNITS)
    phi = design.efficient_influence(design.sample(np.random.default_rng([SEED, key]), n=UNITS))
    squares = np.sort((phi - phi.mean()) ** 2)[::-1]
    row = {"setting": f"dropout{key}", "units": UNITS, "integrated_variance": variance,
           "sample_variance": float(phi.var()),
           "top_0.1pct_share": float(squares[:UNITS // 1000].sum() / squares.sum())}
    for n in (1000, 16_000):
        means = phi.reshape(-1, n).mean(axis=1)
        row[f"groups_n{n}"] = means.size
        row[f"sd_of_means_over_bound_n{n}"] = float(means.std(ddof=1) * np.sqrt(n / variance))
        row[f"coverage_n{n}"] = float(np.mean(np.abs(means) <= Z * np.sqrt(variance / n)))
    return row


def main():
    table = pd.DataFrame([one_rate(rate) for rate in RATES])
    OUT.parent.mkdir(parents=True, exist_ok=True)
    table.to_csv(OUT, index=False, float_format="%.6g")
    print(table.round(4).to_string(index=False))


if __name__ == "__main__":
    main()
