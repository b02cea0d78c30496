"""BalanceNet: balancing penalties, determinism, devices and use as a stage learner."""

import numpy as np
import pandas as pd
import pytest
import torch

from causalkit.longterm import LinearGaussianDesign, MonotoneAIPW, SeqMSM, SequentialRegression
from causalkit.longterm.balancenet import BalanceNet, ipm

torch.set_num_threads(1)

SMALL = dict(representation=(16, 16), head=(16,), max_epochs=30, patience=5, batch_size=128,
             lr=3e-3, device="cpu", alpha=0.1)


@pytest.fixture(scope="module")
def sample():
    torch.set_num_threads(1)
    return LinearGaussianDesign(dropout=(0.2, 0.3, 0.3)).sample(np.random.default_rng(0), n=500)


def _roles(s):
    return dict(X=s["X"], y=s["outcome"], treatment=s["treatment"], short=s["short"])


def test_ipm_closed_forms():
    gen = torch.Generator().manual_seed(0)
    a = torch.randn(200, 2, generator=gen)
    shift = torch.tensor([2.0, 0.0])
    assert float(ipm(a, a + shift, "mmd_linear")) == pytest.approx(4.0, rel=1e-6)
    assert float(ipm(a, a, "mmd_rbf")) == pytest.approx(0.0, abs=1e-7)
    assert float(ipm(a, a + shift, "mmd_rbf")) > 0.1
    # W1 between a cloud and its translate is the translation length (entropic bias is small)
    assert float(ipm(a, a + shift, "wasserstein")) == pytest.approx(2.0, rel=0.05)
    assert float(ipm(a, a, "wasserstein")) < 0.2
    with pytest.raises(ValueError, match="ipm must be"):
        ipm(a, a, "kl")


def test_ipm_gradients_flow():
    a = torch.randn(50, 3, requires_grad=True)
    b = torch.randn(40, 3) + 1.0
    for kind in ("mmd_linear", "mmd_rbf", "wasserstein"):
        a.grad = None
        ipm(a, b, kind).backward()
        assert torch.isfinite(a.grad).all() and a.grad.abs().sum() > 0


def test_deterministic_with_random_state(sample):
    first = BalanceNet(random_state=3, **SMALL).fit(**_roles(sample))
    second = BalanceNet(random_state=3, **SMALL).fit(**_roles(sample))
    assert first.ate_ == second.ate_
    np.testing.assert_array_equal(first.effect(sample["X"]), second.effect(sample["X"]))
    other = BalanceNet(random_state=4, **SMALL).fit(**_roles(sample))
    assert other.ate_ != first.ate_
    est = first.estimate(n_boot=5)           # the bootstrap (the only inference), kept short
    assert est.std_error > 0 and np.isfinite(est.value)
    assert len(first.training_history_) == 3


def _stage_inputs(sample, k):
    """``(H, treatment, y, labeled)`` of stage ``k`` (the stage's own short-term outcome as
    the target)."""
    from causalkit.longterm._data import check_monotone_data
    data = check_monotone_data(**_roles(sample))
    rows = data.at_risk(k)
    labeled = data.responders(k)[rows]
    return data.history(k, rows), data.a[rows], np.where(labeled, data.Z[rows, k], np.nan), \
        labeled


def _stage_representation(sample, k, **params):
    """Fit the stage-``k`` network on ``sample`` and return its representation of the units at
    risk and the responder mask."""
    H, a, y, labeled = _stage_inputs(sample, k)
    fitted = BalanceNet(random_state=0, **{**SMALL, "max_epochs": 60, **params}).fit_stage(
        H, a, y, labeled, stage=k)
    x = torch.as_tensor((H - fitted.mean) / fitted.scale, dtype=torch.float32)
    with torch.no_grad():
        rep = fitted.net.phi(x)
    return rep, torch.as_tensor(labeled)


@pytest.mark.parametrize("kind, power", [("mmd_linear", 2), ("mmd_rbf", 0), ("wasserstein", 1)])
def test_balancing_penalty_reduces_imbalance(sample, kind, power):
    """With a large weight the representation of drop-outs and stayers is pulled together,
    also relative to its spread (linear MMD scales with the squared spread, the Wasserstein
    cost with the spread, the RBF-MMD with its median bandwidth is scale free)."""
    gaps = []
    for alpha in (0.0, 10.0):
        rep, lab = _stage_representation(sample, 2, alpha=alpha, alpha_treat=0.0, ipm=kind)
        spread = float(rep.var(0).sum()) ** 0.5
        gaps.append(float(ipm(rep[lab], rep[~lab], kind)) / spread ** power)
    assert gaps[1] < gaps[0]


def test_wasserstein_penalty_contracts_representation(sample):
    """The Wasserstein cost is linear in the scale of the representation, so its penalty also
    shrinks the representation as a whole: the mechanism that the random-group placebo of
    ``simulations/longterm_networks_paired.py`` isolates."""
    spreads = []
    for alpha in (0.0, 1.0):
        rep, _ = _stage_representation(sample, 0, alpha=alpha, alpha_treat=0.0,
                                       ipm="wasserstein")
        spreads.append(float(rep.var(0).sum()))
    assert spreads[1] < 0.5 * spreads[0]


def test_devices(sample):
    if not torch.cuda.is_available():
        with pytest.raises(ValueError, match="CUDA is not available"):
            BalanceNet(device="cuda").fit(**_roles(sample))
    with pytest.raises(ValueError, match="device"):
        BalanceNet(device="tpu").fit(**_roles(sample))
    est = BalanceNet(random_state=0, **{**SMALL, "device": "auto", "max_epochs": 2})
    est.fit(**_roles(sample))
    expected = "cuda" if torch.cuda.is_available() else "cpu"
    assert next(est.regression_.chain_.stages_[0].net.parameters()).device.type == expected


def test_bad_parameters(sample):
    for bad in (dict(alpha=-1), dict(representation=()), dict(head=(0,)), dict(ipm="kl"),
                dict(validation_fraction=1.0), dict(max_epochs=0)):
        with pytest.raises(ValueError):
            BalanceNet(**bad).fit(**_roles(sample))
    for bad, match in ((dict(alpha="cv"), "alpha must be"),
                       (dict(alpha_treat=-1), "alpha_treat"),
                       (dict(alpha_grid=()), "alpha_grid"),
                       (dict(alpha_grid=(0, -1)), "alpha_grid"),
                       (dict(alpha="validation", validation_fraction=0.0), "validation_fraction")):
        with pytest.raises(ValueError, match=match):
            BalanceNet(**{**SMALL, "max_epochs": 1, **bad}).fit(**_roles(sample))
    H, a, y, labeled = _stage_inputs(sample, 0)
    with pytest.raises(ValueError, match="stage must be"):
        BalanceNet(**SMALL).fit_stage(H, a, y, labeled, stage=-1)


def test_plugs_into_other_estimators(sample):
    net = BalanceNet(random_state=1, **SMALL)
    for est in (SequentialRegression(outcome_model=net), SeqMSM(outcome_model=net)):
        # a network plug-in has no influence-function SE: bootstrap only
        assert est._inferences == ("bootstrap",) == (est._default_inference,)
        assert np.isfinite(est.fit(**_roles(sample)).ate_)
    res = MonotoneAIPW(outcome_model=net, cv=2, random_state=0).fit(**_roles(sample)).estimate(
        inference="influence")
    assert np.isfinite(res.value) and res.std_error > 0
    assert BalanceNet._inferences == ("bootstrap",)
    # the chain of SequentialRegression with BalanceNet stages is BalanceNet itself
    alone = BalanceNet(random_state=1, **SMALL).fit(**_roles(sample))
    chained = SequentialRegression(outcome_model=BalanceNet(**SMALL),
                                   random_state=1).fit(**_roles(sample))
    assert alone.ate_ == pytest.approx(chained.ate_, abs=1e-9)


def test_lazy_import():
    import subprocess
    import sys
    code = ("import sys, causalkit.longterm as lt; assert 'torch' not in sys.modules; "
            "lt.BalanceNet; assert 'torch' in sys.modules")
    subprocess.run([sys.executable, "-c", code], check=True)


def test_each_stage_network_gets_its_own_seed(sample):
    """The seed of every stage network is derived from the estimator's ``random_state`` (one
    child per stage), not the same seed reused at every stage."""
    est = BalanceNet(random_state=3, **{**SMALL, "max_epochs": 2}).fit(**_roles(sample))
    chain = est.regression_.chain_
    seeds = [chain._learner(k).random_state for k in range(3)]
    assert len(set(seeds)) == 3 and all(isinstance(s, int) for s in seeds)
    again = BalanceNet(random_state=3, **{**SMALL, "max_epochs": 2}).fit(**_roles(sample))
    assert [again.regression_.chain_._learner(k).random_state for k in range(3)] == seeds


def test_treatment_penalty_at_first_stage_only(sample):
    """A later stage trains identically whatever the treated/control weight (its history holds
    post-treatment outcomes); the first stage does not."""
    def predictions(k, alpha_treat):
        H, a, y, labeled = _stage_inputs(sample, k)
        net = BalanceNet(random_state=0, **{**SMALL, "max_epochs": 10, "alpha": 0.0,
                                            "alpha_treat": alpha_treat})
        fitted = net.fit_stage(H, a, y, labeled, stage=k)
        assert fitted.alpha_treat == (alpha_treat if k == 0 else 0.0)
        return fitted.predict(H, 1) - fitted.predict(H, 0)

    np.testing.assert_array_equal(predictions(1, 1.0), predictions(1, 0.0))
    assert not np.allclose(predictions(0, 1.0), predictions(0, 0.0))


def test_validation_picks_smallest_validation_loss(sample):
    """Each grid weight is trained with the same initialisation and split as a fixed-weight
    network, and the one with the smallest best validation loss is kept."""
    H, a, y, labeled = _stage_inputs(sample, 2)
    params = {**SMALL, "max_epochs": 8, "alpha_grid": (1.0, 0.0, 10.0)}
    chosen = BalanceNet(random_state=0, **{**params, "alpha": "validation"}).fit_stage(
        H, a, y, labeled, stage=2)
    grid = (0.0, 1.0, 10.0)
    assert len(chosen.validation_losses) == 3
    assert chosen.alpha == grid[int(np.argmin(chosen.validation_losses))]
    for weight, loss in zip(grid, chosen.validation_losses, strict=True):
        fixed = BalanceNet(random_state=0, **{**params, "alpha": weight}).fit_stage(
            H, a, y, labeled, stage=2)
        assert np.nanmin(fixed.history) == pytest.approx(loss, rel=1e-6)
        if weight == chosen.alpha:
            np.testing.assert_allclose(fixed.predict(H, 1), chosen.predict(H, 1))
    # nobody drops out and the stage is not the first: no penalty can act, every weight
    # trains the same network and the tie goes to the smallest weight
    tied = BalanceNet(random_state=0, **{**params, "alpha": "validation"}).fit_stage(
        H[labeled], a[labeled], y[labeled], labeled[labeled], stage=2)
    assert len(set(tied.validation_losses)) == 1 and tied.alpha == 0.0


def test_alpha_chosen_per_stage(sample):
    est = BalanceNet(random_state=0, **{**SMALL, "max_epochs": 3, "alpha": "validation",
                                        "alpha_grid": (0.0, 0.1)}).fit(**_roles(sample))
    assert len(est.alpha_chosen_) == 3 and set(est.alpha_chosen_) <= {0.0, 0.1}
    assert est.alpha_chosen_ == [s.alpha for s in est.regression_.chain_.stages_]


def test_seeds_differ_per_stage_and_fold(sample):
    """Inside cross-fitted MonotoneAIPW an unseeded BalanceNet gets one seed per fold and stage;
    the fitted stage networks differ accordingly."""
    est = MonotoneAIPW(outcome_model=BalanceNet(**{**SMALL, "max_epochs": 2}), cv=2,
                       random_state=0).fit(**_roles(sample))
    chains = [fold["outcome"] for fold in est.fold_models_]
    seeds = [chain._learner(k).random_state for chain in chains for k in range(3)]
    assert len(set(seeds)) == 6 and all(isinstance(s, int) for s in seeds)
    first = [next(chain.stages_[0].net.parameters()).detach() for chain in chains]
    assert not torch.equal(first[0], first[1])


def test_balancenet_study_quick(tmp_path, monkeypatch):
    from causalkit.longterm import network_studies, studies
    monkeypatch.setattr(studies, "STUDY_NET", {**studies.STUDY_NET, "max_epochs": 2})
    table = network_studies.balancenet_comparison(quick=True, out=tmp_path / "bn.jsonl")
    names = {"BalanceNet", "Unbalanced net", "Placebo penalty", "SeqMSM",
             "SequentialRegression"}
    assert set(table.index.get_level_values("estimator")) == names
    assert table["n_errors"].sum() == 0 and (table["n_reps"] == 2).all()
    for column in ("rmse", "mc_se_rmse", "mc_se_sd", "mean_pehe", "mc_se_pehe"):
        assert table[column].notna().all()
    paired = pd.read_csv(tmp_path / "bn_paired.csv")
    assert set(paired["reference"]) == {"Unbalanced net", "Placebo penalty"}
    assert (tmp_path / "bn_summary.csv").exists() and (tmp_path / "bn.png").exists()


def test_validation_split_of_a_resample_takes_whole_units():
    """On a bootstrap resample the validation rows are whole units (no copy of a validation
    unit is trained on); without repeated units the split is the row split."""
    net = BalanceNet(validation_fraction=0.2)
    labeled = np.r_[np.ones(90, bool), np.zeros(10, bool)]
    groups = np.sort(np.random.default_rng(4).choice(60, 100))
    val = net._validation_rows(np.random.default_rng(1), labeled, groups)
    train = np.setdiff1d(np.arange(100), val)
    assert labeled[val].all() and 18 <= val.size <= 18 + np.bincount(groups).max()
    assert np.intersect1d(groups[val], groups[train]).size == 0
    rows = net._validation_rows(np.random.default_rng(1), labeled, None)
    np.testing.assert_array_equal(
        net._validation_rows(np.random.default_rng(1), labeled, np.arange(100)), rows)
    assert rows.size == 18


def test_resample_passes_units_to_the_stage_networks(sample, monkeypatch):
    seen = []
    split = BalanceNet._validation_rows

    def spy(self, rng, labeled, groups):
        seen.append(groups)
        return split(self, rng, labeled, groups)

    monkeypatch.setattr(BalanceNet, "_validation_rows", spy)
    est = BalanceNet(**{**SMALL, "max_epochs": 2}, random_state=0).fit(**_roles(sample))
    assert seen and all(g is None for g in seen)
    seen.clear()
    idx = np.sort(np.random.default_rng(2).choice(est.data_.n_rows, est.data_.n_rows))
    BalanceNet(**{**SMALL, "max_epochs": 2}, random_state=0)._fit_data(est.data_.take(idx))
    assert len(seen) == 3 and all(g is not None and np.unique(g).size < g.size for g in seen)
