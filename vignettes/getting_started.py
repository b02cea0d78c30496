# %% [markdown]
# # Getting started with causalkit
#
# This vignette walks through the basic workflow on real data: the National Supported Work
# (NSW) job-training experiment, with respondents of the Current Population Survey (CPS) as a
# large pool of *external controls*.
#
# The NSW trial randomised 445 men (185 treated, 260 controls); the effect of training on 1978
# earnings estimated from the trial alone is the *experimental benchmark*, about $1,794. The CPS
# adds 15,992 untreated men who were never part of the trial. Borrowing them could make the
# control arm far larger, but they differ from trial participants, so naive pooling can be badly
# biased. causalkit's borrowing estimators decide which external controls to trust.

# %%
import os

import matplotlib.pyplot as plt
import numpy as np

import causalkit
from causalkit.datasets import load_nsw_cps
from causalkit.inference import bootstrap, difference_in_means

QUICK = os.environ.get("CAUSALKIT_QUICK") == "1"
print("causalkit", causalkit.__version__)

# %% [markdown]
# ## The data
#
# `load_nsw_cps()` returns one DataFrame: covariates, the treatment indicator `treat`, the
# outcome `re78` (1978 earnings in dollars) and `trial` (1 = NSW experiment, 0 = CPS).

# %%
data = load_nsw_cps()
data.groupby(["trial", "treat"])[["age", "educ", "re75", "re78"]].mean().round(1)

# %% [markdown]
# The CPS men are older, more educated and earned about three times as much in 1975 as the
# trial participants: this is why borrowing needs care.

# %%
fig, ax = plt.subplots(figsize=(6, 3.2))
for label, part in [("NSW controls", data[(data.trial == 1) & (data.treat == 0)]),
                    ("CPS", data[data.trial == 0])]:
    ax.hist(np.log1p(part["re75"]), bins=30, density=True, alpha=0.5, label=label)
ax.set_xlabel("log(1 + 1975 earnings)")
ax.set_ylabel("density")
ax.legend(frameon=False)
plt.show()

# %% [markdown]
# ## Estimates come with inference
#
# Every estimator in causalkit returns a `causalkit.Estimate`: a value, a standard error, a
# confidence interval, a p-value, the per-unit influence values and a printable summary.
# The simplest is the trial's difference in means, with the Neyman standard error
# sqrt(s1²/n1 + s0²/n0).

# %%
trial = data[data.trial == 1]
est = difference_in_means(trial["re78"], trial["treat"])
print(est.summary())
est.conf_int(0.05)

# %% [markdown]
# The bootstrap refits a whole pipeline on resampled data; here it reproduces the analytic
# standard error. (`strata` keeps the number of treated and control units fixed in every
# resample, as in the trial's design.)

# %%
boot = bootstrap(lambda d: difference_in_means(d["re78"], d["treat"]).value,
                 trial[["re78", "treat"]].reset_index(drop=True),
                 n_boot=200 if QUICK else 2000, random_state=0, strata=trial["treat"].to_numpy())
print(f"analytic SE {est.std_error:.1f}, bootstrap SE {boot.std_error:.1f}")
boot

# %% [markdown]
# ## Comparing estimators on the same data
#
# `causalkit demo` (or `causalkit.demo.run_demo()`) fits every borrowing estimator on NSW/CPS
# (and on Paper A's NSW/PSID construction) and compares it with the experimental benchmark. Full pooling — treating every CPS man as a
# control — is far off, which is the motivation for adaptive borrowing.

# %%
import tempfile

from IPython.display import Image

from causalkit.demo import run_demo

out_dir = tempfile.mkdtemp()
table = run_demo(out_dir=out_dir, verbose=False)
table.loc["nsw_cps", ["estimate", "std_error", "ci_lower", "ci_upper", "n_borrowed"]].round(0)

# %%
Image(filename=os.path.join(out_dir, "nsw_cps_comparison.png"))

# %%
Image(filename=os.path.join(out_dir, "nsw_psid_comparison.png"))

# %% [markdown]
# ## Where to go next
#
# * `vignettes/borrowing` — adaptive borrowing of external controls (AIB, ACIB and baselines).
# * `vignettes/longterm` — long-term effects when outcomes drop out stage by stage.
# * `vignettes/policy` — moving a treatment policy to a shifted target population.
# * `causalkit simulate --help` — the simulation studies, resumable and parallel.
