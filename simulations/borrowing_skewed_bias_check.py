"""Is ``AdaptiveBorrowing`` biased when the outcome errors are skewed but every external control
is exchangeable? A check with more replications than the design grid, on other draws.

In the grid cell ``linear-exponential`` of ``borrowing-grid-core`` (500 replications, seed
2024) the adaptive estimate's bias was more than 2 Monte Carlo SEs from 0, and so was
trial-only's, which is unbiased by construction: the same draws moved both. Here the same design
(``paper_a_design(errors=...)``, Paper A sizes, no bias) is drawn ``REPS`` times for each
skewed law and the normal one, from ``default_rng([SEED, law, rep])`` (no study or test uses
these draws). One ``AdaptiveBorrowing()`` fit per draw gives the adaptive, trial-only and
full-borrowing estimates; the table reports each one's bias with its Monte Carlo SE, and the
paired difference adaptive minus trial-only: trial-only is unbiased, so that difference's mean
is the adaptive estimate's bias, measured with a smaller Monte Carlo SE. Two more rows per law
locate the bias: ``adaptive-trial, s_D fixed`` recomputes that difference,
:math:`\\hat D - s_D\\,\\eta(\\hat D/s_D)`, with :math:`s_D` replaced by its Monte Carlo mean
(what the rule would do if the scale of :math:`\\hat D` were known), and ``corr(D, s_D)`` (in the
``bias`` column) is the correlation of :math:`\\hat D` with its estimated SE across draws.

Writes ``simulations/results/borrowing/borrowing_skewed_bias_check.csv``.
Usage: ``python simulations/borrowing_skewed_bias_check.py [JOBS]`` (about 4 minutes on 2 cores).
"""
import sys
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
from joblib import Parallel, delayed
from threadpoolctl import threadpool_limits

from causalkit.borrowing import AdaptiveBorrowing
from causalkit.borrowing.adaptive import bias_posterior_mean
from causalkit.borrowing.designs import paper_a_design
from causalkit.exceptions import CausalkitWarning

OUT = Path(__file__).parent / "results" / "borrowing" / "borrowing_skewed_bias_check.csv"
SEED, REPS = 660000, 20000
LAWS = ("normal", "exponential", "lognormal")


def one(law, rep):
    d = paper_a_design(np.random.default_rng([SEED, LAWS.index(law), rep]), errors=law)
    with warnings.catch_warnings(), threadpool_limits(1):
        warnings.simplefilter("ignore", CausalkitWarning)
        est = AdaptiveBorrowing(random_state=0).fit(d["X"], d["y"], d["a"], trial=d["s"])
    return (est.result_.value - d["truth"], est.trial_only_.value - d["truth"],
            est.full_borrowing_.value - d["truth"], est.difference_se_)


def main(jobs=2):
    rows = []
    for law in LAWS:
        err = np.array(Parallel(n_jobs=jobs, batch_size=50)(
            delayed(one)(law, rep) for rep in range(REPS)))
        diff, s_d = err[:, 2] - err[:, 1], err[:, 3]
        fixed = s_d.mean()
        columns = {"adaptive": err[:, 0], "trial": err[:, 1], "full": err[:, 2],
                   "adaptive-trial": err[:, 0] - err[:, 1],
                   "adaptive-trial, s_D fixed": diff - fixed * bias_posterior_mean(diff / fixed)}
        for name, e in columns.items():
            mc_se = e.std(ddof=1) / np.sqrt(e.size)
            rows.append({"errors": law, "estimator": name, "n_reps": e.size, "bias": e.mean(),
                         "mc_se": mc_se, "bias_in_mc_se": e.mean() / mc_se,
                         "rmse": np.sqrt(np.mean(e ** 2))})
        rows.append({"errors": law, "estimator": "corr(D, s_D)", "n_reps": diff.size,
                     "bias": np.corrcoef(diff, s_d)[0, 1]})
    table = pd.DataFrame(rows)
    OUT.parent.mkdir(parents=True, exist_ok=True)
    table.to_csv(OUT, index=False)
    print(table.round(4).to_string(index=False))


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 2)
