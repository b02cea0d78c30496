"""BalanceNet: balancing penalties, determinism, devices and use as a stage learner."""

import numpy as np
import pytest
import torch

from causalkit.longterm import LinearGaussianDesign, MonotoneAIPW, SeqMSM, SequentialRegression
from causalkit.longterm.balancenet import BalanceNet, ipm

torch.set_num_threads(1)

SMALL = dict(representation=(16, 16), head=(16,), max_epochs=30, patience=5, batch_size=128,
             lr=3e-3, device="cpu")


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
    est = first.estimate()
    assert est.std_error > 0 and np.isfinite(est.value)
    assert len(first.training_history_) == 3


def _stage_representation(sample, k, **params):
    """Fit the stage-``k`` network on ``sample`` and return its representation of the units at
    risk and the responder mask."""
    from causalkit.longterm._data import check_monotone_data
    data = check_monotone_data(**_roles(sample))
    rows = data.at_risk(k)
    H, a = data.history(k, rows), data.a[rows]
    labeled = data.responders(k)[rows]
    y = np.where(labeled, data.Z[rows, k], np.nan)
    fitted = BalanceNet(random_state=0, **{**SMALL, "max_epochs": 60, **params}).fit_stage(
        H, a, y, labeled)
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
