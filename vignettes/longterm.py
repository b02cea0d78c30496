# %% [markdown]
# # Long-term effects when participants drop out
#
# A long-term outcome Y (say, earnings five years after a programme) takes years to collect.
# Along the way we record short-term outcomes S_1, S_2, ... at intermediate stages, and some
# participants are lost at every stage. Drop-out is **monotone**: once lost, a unit never comes
# back. `causalkit.longterm` estimates the long-term average treatment effect
# E[Y(1) - Y(0)] from such data.
#
# ## Why drop-out biases the long-term effect
#
# People rarely drop out at random. If those whose short-term outcomes look poor are more
# likely to leave, the units who remain to the end are a selected group: a complete-case
# analysis compares treated and control "survivors", not the populations randomised or
# sampled. Modelling drop-out on baseline covariates X and treatment A alone does not fix it,
# because the drop-out also depends on the short-term outcomes S.
#
# ## The assumptions, in words
#
# 1. **Consistency**: each unit's observed outcomes are its potential outcomes under the
#    treatment it received.
# 2. **No unmeasured confounding of treatment**: given X, treatment is as good as random, and
#    every covariate profile has a chance of either arm (overlap).
# 3. **Sequential missingness**: the decision to stay for stage t may depend on everything
#    observed so far (X, A, S_1, ..., S_{t-1}) but not on outcomes not yet seen.
# 4. **Positivity of staying**: at every stage, every history has a non-zero chance of
#    staying.
#
# Under these, the probability of being observed at the end factorises into stage-wise
# continuation probabilities, r_T = lambda_1 x lambda_2 x ... x lambda_T, and the long-term
# mean under arm a can be written three ways: by inverse weighting with 1 / (e_a(X) r_T), by
# backward nested regressions (impute Y from (X, S_1, S_2), then that imputation from
# (X, S_1), then from X), or by combining both (the doubly robust AIPW score).

# %%
import os
import warnings

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from IPython.display import display

from causalkit.datasets import IHDP_COVARIATES, load_ihdp
from causalkit.exceptions import CausalkitWarning
from causalkit.longterm import (
    CompleteCase,
    LinearGaussianDesign,
    MonotoneAIPW,
    NaiveIPW,
    SeqMSM,
    SequentialIPW,
    SequentialRegression,
    SequentialTMLE,
)
from causalkit.longterm.plots import plot_ess, plot_weights
from causalkit.plotting import plot_estimates
from causalkit.studies import committed_results

QUICK = os.environ.get("CAUSALKIT_QUICK") == "1"
warnings.simplefilter("ignore", CausalkitWarning)

# %% [markdown]
# ## IHDP with simulated short-term outcomes and drop-out
#
# We take the covariates and treatment of the 747 children of the Infant Health and
# Development Program (Hill 2011) and simulate a three-stage outcome chain with a known effect:
#
#     S_1(a) = X g_1 + d_1 a + e_1
#     S_2(a) = rho S_1(a) + X g_2 + d_2 a + e_2
#     Y(a)   = kappa S_2(a) + X b + (d_3 + X theta) a + e_3
#
# so tau(x) = d_3 + x theta + kappa (d_2 + rho d_1). At each stage 30% of the units still
# present drop out, and the chance of staying rises with the latest short-term outcome.

# %%
ihdp = load_ihdp(standardize=True)
X, A = ihdp[IHDP_COVARIATES], ihdp["treat"].to_numpy()
design = LinearGaussianDesign(n_features=X.shape[1], dropout=(0.3, 0.3, 0.3), xi=1.0, seed=21)
data = design.sample(np.random.default_rng(2024), X=X.to_numpy(), treatment=A)
short = pd.DataFrame(data["short"], columns=["S1", "S2"])
outcome = data["outcome"]
truth = data["truth"]
observed = pd.DataFrame(data["observed"], columns=["S1", "S2", "Y"])
frame = X.assign(treat=A, S1=data["short"][:, 0], S2=data["short"][:, 1], Y=outcome)
print(f"true ATE (mean of tau(x) over the 747 children): {truth:.3f}")
observed.groupby(A).mean().round(3).rename(index={0: "control", 1: "treated"})

# %% [markdown]
# About a third of the children reach the final stage; among the 139 treated, fewer than 50.

# %% [markdown]
# ## Estimators
#
# Every estimator takes `fit(X, y, treatment, short=...)` with NaN after drop-out, here through
# the DataFrame front end (`y`, `treatment` and `short` name columns; the covariates are the
# other columns), and returns a `causalkit.Estimate` from `estimate()`.

# %%
models = {
    "Complete case": CompleteCase(random_state=0),
    "Naive IPW (X, A only)": NaiveIPW(),
    "Sequential IPW": SequentialIPW(normalize=True),
    "Sequential regression": SequentialRegression(),
    "Sequential MSM": SeqMSM(),
    "Monotone AIPW": MonotoneAIPW(random_state=0),
    "Sequential TMLE": SequentialTMLE(),
}
estimates = {name: m.fit(frame, y="Y", treatment="treat", short=["S1", "S2"]).estimate()
             for name, m in models.items()}
pd.concat([e.to_frame() for e in estimates.values()])[
    ["estimate", "std_error", "ci_lower", "ci_upper"]].round(3)

# %%
plot_estimates(estimates, reference=truth, reference_label="truth", xlabel="long-term ATE")
plt.show()

# %% [markdown]
# ## Weights and effective sample size per stage
#
# The weights 1 / (e_A(X) r_t) grow stage by stage: each continuation probability multiplies
# in. The effective sample size (sum w)^2 / sum w^2 tells how many equally weighted units the
# weighted responders are worth; when it falls far below the number of responders the
# estimators warn (`OverlapWarning`). The sequential regression avoids the weights altogether,
# and the AIPW estimator uses them only to correct the regression's residuals.

# %%
ipw = models["Sequential IPW"]
fig, axes = plt.subplots(1, 2, figsize=(12, 3.6))
plot_weights(ipw, ax=axes[0])
plot_ess(ipw, ax=axes[1])
plt.show()
ipw.ess_.round(2)

# %% [markdown]
# ## Effects for individuals
#
# `effect(X)` returns the conditional effect tau(x). For the sequential regression it is
# m_1(x, 1) - m_1(x, 0); for AIPW it is the regression of the doubly robust scores on X.

# %%
pehe = {name: np.sqrt(np.mean((m.effect(X) - data["tau"]) ** 2))
        for name, m in models.items()}
pd.Series(pehe, name="sqrt PEHE").round(3)

# %% [markdown]
# ## Do the intervals cover? The simulation studies
#
# One data set cannot tell whether an interval is honest. The study
# `causalkit simulate longterm-linear` repeats a linear design with a closed-form effect (n =
# 1000, three stages, drop-out driven by the latest short-term outcome) 400 times at 10-40%
# drop-out per stage; `longterm-ihdp` does the same 200 times on the IHDP covariates (15% and
# 30% per stage). Each estimator is fitted with its defaults; the tables read the committed
# results: bias in Monte Carlo SEs, the SD relative to the sequential regression's, mean SE
# over SD, and the coverage of the 95% interval. SeqMSM's default interval is the bootstrap,
# checked on half of the linear and of the IHDP replications (rows
# "(bootstrap)").

# %%
def study_table(name, shown, reference="SequentialRegression"):
    """The committed summary of study ``name``: one column block per setting."""
    folder = committed_results(name)
    if folder is None or not (folder / f"{name}_summary.csv").exists():
        return (f"No committed results of {name} with the current defaults: run "
                f"`causalkit simulate {name} --out simulations/results/{name}`")
    study = pd.read_csv(folder / f"{name}_summary.csv")
    study["setting"] = study["setting"].str.replace("_bootstrap", "")
    spread = study[study["estimator"] == reference].set_index("setting")["sd"]
    study = study[study["estimator"].isin(shown)].assign(
        bias_in_mc_se=lambda t: t["bias"] / t["mc_se_bias"],
        sd_ratio=lambda t: t["sd"] / t["setting"].map(spread),
        se_over_sd=lambda t: t["mean_se"] / t["sd"])
    return study.pivot_table(index="estimator", columns="setting", values=[
        "bias_in_mc_se", "sd_ratio", "se_over_sd", "coverage"]).round(2)


shown = ["SequentialRegression", "SeqMSM (bootstrap)", "MonotoneAIPW", "SequentialTMLE",
         "SequentialIPW", "SequentialIPW (Hajek)", "SequentialIPW (estimated weights)",
         "MonotoneAIPW (wrong outcome chain)", "MonotoneAIPW (wrong weights)", "CompleteCase"]
display(study_table("longterm-linear", shown))
study_table("longterm-ihdp", shown)

# %% [markdown]
# Read the linear table column by column. The doubly robust rows stay unbiased when either
# side is wrong; the complete-case analysis does not. Heavier drop-out widens every
# weighting estimator more than the sequential regression (`sd_ratio`), and the intervals
# are judged by `coverage` against 0.95, whose Monte Carlo SE is sqrt(0.95 x 0.05 / R) for
# R replications. `SequentialIPW (estimated weights)` is the inverse-weighting estimator with
# the asymptotically exact SE (`variance="estimated_weights"`, which accounts for fitting the
# weight models): right at light drop-out, too small once the weights get heavy, which is why
# the default treats the weights as known.
#
# The row `MonotoneAIPW (wrong weights)` gives the AIPW flat propensity and selection models
# with the right least-squares chain; its estimate is then the sequential regression's. Its
# default SE adds the variance of estimating the chain, which the efficient influence function
# leaves out when the weights do not balance the history; the gradient of that term is shrunk
# toward zero by its own noise (positive-part James-Stein), so that it adds almost nothing when
# the weights are right. `simulations/longterm_chain_term_check.py` compares, on draws no study
# uses, the SE without the term, with the unshrunk term and with the shrunk one (the default),
# beside SequentialTMLE's default and the sequential regression's sandwich: coverage, then mean
# SE over SD.

# %%
term_dir = committed_results("longterm")
if term_dir is not None and (term_dir / "longterm_chain_term_check.csv").exists():
    term = pd.read_csv(term_dir / "longterm_chain_term_check.csv")
    for column in ("coverage", "mean_se_over_sd"):
        display(term.pivot_table(index=["weights", "se"], columns="setting",
                                 values=column, sort=False).round(3))

# %% [markdown]
# With wrong weights the SE without the term is short, more so as drop-out grows; the term
# closes the gap to the sandwich. With right weights the unshrunk term widens an interval that
# already covers; shrunk, it stays close to the SE without it.
#
# ## How small can a doubly robust spread be?
#
# `sd_ratio` grows with the drop-out for every weighting estimator, and no choice of weights
# removes that. An estimator that stays right with a wrong outcome chain whenever the weights
# are right cannot, for large n, beat the semiparametric efficiency bound of the model in
# which only the drop-out and treatment mechanisms are modelled
# (`LinearGaussianDesign.efficient_variance`, Tsiatis 2006, ch. 10); the sequential
# regression can, because it also assumes the chain is linear.
# `simulations/longterm_efficiency_bound.py` computes the bound for each design of the study
# and, at 40% drop-out, follows both estimators' spread as n grows.

# %%
bound_dir = committed_results("longterm")
if bound_dir is not None and (bound_dir / "longterm_efficiency_bound.csv").exists():
    display(pd.read_csv(bound_dir / "longterm_efficiency_bound.csv").set_index("setting")[
        ["bound_sd", "sequential_regression_sd", "monotone_aipw_sd", "monotone_aipw_mean_se",
         "bound_over_sequential_regression", "monotone_aipw_over_sequential_regression"]
    ].round(3))
    display(pd.read_csv(bound_dir / "longterm_efficiency_bound_by_n.csv").set_index(
        ["estimator", "n"])[["sd", "sd_times_sqrt_n_over_1000", "sd_over_sequential_regression",
                             "sd_over_sequential_regression_lo",
                             "sd_over_sequential_regression_hi"]].round(3))

# %% [markdown]
# At n = 1000 the AIPW's spread sits below the bound because a sample that size seldom holds
# the rare units with very heavy weights that dominate the asymptotic variance; the second
# table shows its SD, scaled to n = 1000, staying near that level as n grows while the bound
# is higher still. The default's substitution SE estimates the asymptotic variance: its mean
# (`monotone_aipw_mean_se`) follows the bound, so at 30-40% drop-out the interval is wider than
# the spread of a sample of 1000 needs (the `se_over_sd` row above).
#
# ## With a wrong outcome chain, as n grows
#
# Double robustness is a statement about large samples. `simulations/longterm_dr_by_n.py` fits
# both doubly robust estimators with the right chain and with a constant (wrong) one, at 30%
# and 40% drop-out and n = 1000, 4000 and 16,000, and records three standard errors for each
# fit: the default substitution SE, the empirical SE of the estimated influence function
# (`variance="empirical"`), and the larger of the two.

# %%
if bound_dir is not None and (bound_dir / "longterm_dr_by_n.csv").exists():
    by_n = pd.read_csv(bound_dir / "longterm_dr_by_n.csv")
    display(by_n.set_index(["chain", "estimator", "setting", "n"]).sort_index()[
        ["bias", "bias_over_mc_se", "sd_times_sqrt_n_over_1000", "coverage_substitution",
         "coverage_empirical", "coverage_max"]].round(3))
    # the range of each standard error's coverage over the 12 rows of each chain
    display(by_n.groupby("chain")[["coverage_substitution", "coverage_empirical",
                                   "coverage_max"]].agg(["min", "max"]))

# %% [markdown]
# With the right chain both estimators are unbiased at every size and the default interval
# covers, conservatively at n = 1000 and 4000 (the second table gives the range). With a
# constant chain the AIPW stays unbiased, as its weights are right; the TMLE, which then
# equals the ratio (Hajek) form of the inverse weighting, carries that form's finite-sample
# bias, which shrinks as n grows faster than the spread (`bias_over_mc_se`). The default (substitution) SE models each stage
# residual's mean as well as its spread, so with a wrong chain it estimates the variance of the
# influence function at that chain, an upper bound for the estimator's, and its interval covers
# with either chain (the ranges in the second table); the empirical SE is short at heavy
# drop-out, and the larger of the two over-covers.
#
# ## Which weights?
#
# The inverse weights can come from the default maximum-likelihood logistic models fitted
# on the whole sample, from the same models cross-fitted (`cv=5`), or from stage-wise
# balancing weights (`selection_model=BalancingLogit()`, Tan's calibration loss: the
# responders reweighted match everyone at risk on the observed history, exactly). The study
# `causalkit simulate longterm-weights` compares them on draws the other studies do not use
# (linear design at 40% drop-out, IHDP at 15% and 30%), with the AIPW also given a wrong
# outcome chain so that only its weights protect it.

# %%
study_table("longterm-weights", [
    "SequentialRegression", "MonotoneAIPW", "MonotoneAIPW (balancing weights)",
    "MonotoneAIPW (cv=5)", "MonotoneAIPW (wrong outcome chain)",
    "MonotoneAIPW (balancing weights, wrong outcome chain)", "SequentialTMLE",
    "SequentialTMLE (balancing weights)", "SequentialIPW (Hajek)",
    "SequentialIPW (Hajek, balancing weights)"])

# %% [markdown]
# ## Balanced networks
#
# `BalanceNet` replaces each stage regression by a network whose representation is shared by
# both arms. Its penalties are the paper's idea (Yang et al. 2025), reconstructed: the
# treated and control representations are balanced on the pre-treatment covariates (the first
# stage only), the stayers and drop-outs at every stage, and the penalty weight is chosen per
# stage on the validation loss. Here the truth is linear, so OLS is hard to beat; the
# networks are small so the vignette runs quickly.

# %%
from causalkit.longterm import BalanceNet  # noqa: E402  (torch is imported only here)

size = dict(representation=(16, 16), head=(16,), max_epochs=10 if QUICK else 100,
            patience=10, lr=3e-3, device="cpu")
nets = {"BalanceNet": BalanceNet(random_state=0, **size),
        "Unbalanced net": BalanceNet(alpha=0.0, random_state=0, **size)}
# A network plug-in has no influence-function SE; its interval (`net.estimate()`) is the
# bootstrap, which refits the networks 200 times, so only the point values are shown here.
rows = {}
for name, net in nets.items():
    net.fit(X, outcome, A, short=short)
    rows[name] = {"estimate": net.ate_,
                  "sqrt PEHE": np.sqrt(np.mean((net.effect(X) - data["tau"]) ** 2))}
print("penalty weight chosen per stage:", nets["BalanceNet"].alpha_chosen_)
pd.DataFrame(rows).T.round(3)

# %% [markdown]
# The study `causalkit simulate longterm-balancenet` compares, on the same draws, BalanceNet
# with the same network unbalanced, with a **placebo** penalty (the same penalties between
# random groups of the same sizes, which balance nothing), and with the linear SeqMSM and
# sequential regression, on IHDP (30% drop-out per stage) and JOBS (35%). The first table is
# its summary; the second gives paired differences (estimator minus reference; negative is
# better) with their Monte Carlo SEs.

# %%
net_dir = committed_results("longterm-balancenet")
if net_dir is not None:
    nets_summary = pd.read_csv(net_dir / "longterm-balancenet_summary.csv")
    paired = pd.read_csv(net_dir / "longterm-balancenet_paired.csv")
    display(nets_summary.set_index(["setting", "estimator"])[
        ["bias", "mc_se_bias", "sd", "rmse", "mean_pehe"]].round(3))
    display(paired[paired["estimator"] == "BalanceNet"].set_index(
        ["setting", "metric", "reference"])[["mean_difference", "mc_se_difference"]].round(3))

# %% [markdown]
# Read the paired rows against the placebo: a gain that the placebo penalty shares is the
# penalty acting as a regulariser, not balance. Under sequential missingness the stage
# regressions are unbiased without any balance; the drop-out runs through the latest
# short-term outcome, the strongest predictor of the next stage, which a representation
# matched between stayers and drop-outs must blur; and pulling the arms together where they
# really differ (the NSW treated against CPS controls in JOBS) discards confounder
# information. The `BalanceNet` docstring discusses the numbers.
