"""BalanceNet: balanced-representation networks for the sequential outcome regressions (torch)."""

from __future__ import annotations

import numbers

import numpy as np
import torch
from sklearn.base import clone
from torch import nn

from causalkit._validation import (
    as_seed_sequence,
    check_fraction,
    check_positive_int,
    child_seed,
    seed_int,
)
from causalkit.longterm._base import MonotoneEstimator
from causalkit.longterm._data import MonotoneData
from causalkit.longterm.regression import SequentialRegression

__all__ = ["BalanceNet", "ipm"]

_IPMS = ("mmd_linear", "mmd_rbf", "wasserstein")


def ipm(a: torch.Tensor, b: torch.Tensor, kind: str = "mmd_linear") -> torch.Tensor:
    """Integral probability metric between two sets of representations.

    * ``"mmd_linear"``: ``||mean(a) - mean(b)||^2`` (MMD with the linear kernel);
    * ``"mmd_rbf"``: biased MMD^2 with a Gaussian kernel, bandwidth = median pairwise distance
      (Gretton et al. 2012, *JMLR* 13);
    * ``"wasserstein"``: entropic optimal transport cost with Euclidean ground cost; the plan is
      computed by 50 log-domain Sinkhorn iterations on the detached costs (regularisation 0.05
      x mean cost) and the cost is differentiated through the distances only, as in
      CFR-Wass (Shalit, Johansson & Sontag 2017, ICML; Cuturi 2013).
    """
    if kind == "mmd_linear":
        return torch.sum((a.mean(0) - b.mean(0)) ** 2)
    if kind == "mmd_rbf":
        both = torch.cat([a, b])
        d2 = torch.cdist(both, both) ** 2
        sigma2 = torch.median(d2.detach()[d2.detach() > 0]).clamp_min(1e-6) / 2
        k = torch.exp(-d2 / (2 * sigma2))
        na = a.shape[0]
        return k[:na, :na].mean() + k[na:, na:].mean() - 2 * k[:na, na:].mean()
    if kind == "wasserstein":
        cost = torch.cdist(a, b)
        c = cost.detach()
        eps = 0.05 * c.mean().clamp_min(1e-6)
        log_mu = torch.full((a.shape[0],), -np.log(a.shape[0]), dtype=c.dtype, device=c.device)
        log_nu = torch.full((b.shape[0],), -np.log(b.shape[0]), dtype=c.dtype, device=c.device)
        f = torch.zeros_like(log_mu)
        g = torch.zeros_like(log_nu)
        for _ in range(50):
            f = -eps * torch.logsumexp((g[None, :] - c) / eps + log_nu[None, :], dim=1)
            g = -eps * torch.logsumexp((f[:, None] - c) / eps + log_mu[:, None], dim=0)
        plan = torch.exp((f[:, None] + g[None, :] - c) / eps + log_mu[:, None] + log_nu[None, :])
        return torch.sum(plan * cost)
    raise ValueError(f"ipm must be one of {_IPMS}; got {kind!r}")


def _mlp(sizes, final_activation: bool) -> nn.Sequential:
    layers = []
    for i, (n_in, n_out) in enumerate(zip(sizes[:-1], sizes[1:], strict=True)):
        layers.append(nn.Linear(n_in, n_out))
        if final_activation or i < len(sizes) - 2:
            layers.append(nn.ELU())
    return nn.Sequential(*layers)


class _Net(nn.Module):
    """Shared representation ``Phi`` with one outcome head per treatment arm (TARNet layout)."""

    def __init__(self, n_in, representation, head):
        super().__init__()
        self.phi = _mlp([n_in, *representation], final_activation=True)
        self.heads = nn.ModuleList([_mlp([representation[-1], *head, 1], final_activation=False)
                                    for _ in (0, 1)])

    def forward(self, x, arm):
        rep = self.phi(x)
        out = torch.where(arm == 1, self.heads[1](rep)[:, 0], self.heads[0](rep)[:, 0])
        return out, rep


def _resolve_device(device) -> torch.device:
    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if device == "cuda":
        if not torch.cuda.is_available():
            raise ValueError("device='cuda' was requested but CUDA is not available on this "
                             "machine (torch.cuda.is_available() is False); use device='cpu' "
                             "or 'auto'")
        return torch.device("cuda")
    if device == "cpu":
        return torch.device("cpu")
    raise ValueError(f"device must be 'auto', 'cpu' or 'cuda'; got {device!r}")


class _FittedStage:
    """A trained stage network with the input/target standardisation it was trained with, the
    penalty weights it was trained with and, under ``alpha="validation"``, the best validation
    loss of every grid weight."""

    def __init__(self, net, mean, scale, y_mean, y_scale, device, history, alpha, alpha_treat,
                 validation_losses=None):
        self.net, self.mean, self.scale = net, mean, scale
        self.y_mean, self.y_scale, self.device = y_mean, y_scale, device
        self.history = history
        self.alpha, self.alpha_treat = alpha, alpha_treat
        self.validation_losses = validation_losses

    def predict(self, H, arm):
        arm = np.array(np.broadcast_to(np.asarray(arm), (H.shape[0],)))
        x = torch.as_tensor((H - self.mean) / self.scale, dtype=torch.float32, device=self.device)
        t = torch.as_tensor(arm, dtype=torch.long, device=self.device)
        with torch.no_grad():
            out, _ = self.net(x, t)
        return out.cpu().numpy().astype(float) * self.y_scale + self.y_mean


class BalanceNet(MonotoneEstimator):
    """Sequential regression with balanced-representation networks at every stage.

    At stage ``t`` (``t = 1, ..., T``) a network with a shared representation ``Phi_t(H_t)``
    and one head per arm (TARNet layout) is trained on the units at risk with

    .. math::

        L_t = \\frac{\\sum_{i: R_{ti}=1} w_i \\{h_{A_i}(\\Phi_t(H_{ti})) - \\tilde Y^{(t)}_i\\}^2}
                   {\\sum_{i: R_{ti}=1} w_i}
              + \\alpha_t\\, \\mathrm{IPM}(\\Phi_t \\mid R_t = 1, \\Phi_t \\mid R_t = 0)
              + 1\\{t = 1\\}\\, \\alpha_{A}\\,
                \\mathrm{IPM}(\\Phi_1 \\mid A = 1, \\Phi_1 \\mid A = 0),

    the IPMs computed on each mini-batch over the units at risk (skipped when a group has fewer
    than two members in the batch). The first penalty balances, at every stage and on the
    observed history ``H_t``, the stayers against the drop-outs (the covariate shift between
    the units a stage regression is fitted on and those it imputes for). The second balances
    the arms (Shalit, Johansson & Sontag 2017, ICML) and acts at the first stage only, whose
    history is the pre-treatment covariates ``H_1 = X``: the later histories hold short-term
    outcomes that the treatment moves, and matching the arms on them would remove part of the
    effect from the representation. With ``alpha="validation"`` (the default) the weight is
    chosen per stage: the stage network is trained once for every value of ``alpha_grid`` (the
    same initialisation, validation split and batch order for each) and the one with the
    smallest best validation factual loss is kept, ties going to the smaller weight; the
    choices are in ``alpha_chosen_``. The stage networks are chained backwards exactly as in
    :class:`SequentialRegression`, whose estimate, effect and inference this estimator
    returns. The design is a reconstruction of Yang, Guo, Han & Wu (2025, arXiv:2504.19527),
    whose network details were not available: the stage-wise loss above, linear MMD by
    default, early stopping on the factual validation loss.

    Measured (``causalkit simulate longterm-balancenet``; results in
    ``simulations/results/longterm-balancenet/``: 100 paired replications per design,
    IHDP at 30% and JOBS at 35% drop-out per stage, the small ``STUDY_NET`` networks, the
    defaults above, linear SeqMSM and SequentialRegression; MC SEs in parentheses), balance
    does not do what the paper presents it for:

    * variance: the SD of the ATE estimate is 0.339 (0.024) for BalanceNet, 0.364 (0.026) for
      SeqMSM, 0.342 for SequentialRegression and 0.342 for the unbalanced net on IHDP; 0.254
      (0.018), 0.257, 0.243 and 0.254 on JOBS. SeqMSM's SD is within 7% of
      SequentialRegression's there, so there is little variance to remove, and the networks
      remove none;
    * RMSE: 0.340 (0.022) for BalanceNet, 0.340 for SequentialRegression, 0.363 for SeqMSM
      and 0.382 for the unbalanced net on IHDP; on JOBS 0.311 (0.020), 0.241, 0.256 and 0.268;
    * against a placebo penalty (``causalkit.longterm.network_studies.RandomGroupPenalty``:
      the same penalties and weight choice between random groups of the same sizes): on IHDP
      BalanceNet's gain over the unbalanced net (paired difference of the squared ATE error
      -0.030 (0.022), of sqrt(PEHE) -0.049 (0.015), 1.240 to 1.192) is the placebo's as well
      (BalanceNet minus placebo 0.000 (0.016) and +0.010 (0.013)), so it comes from the
      penalty constraining the representation, not from balance. On JOBS balance hurts: ATE
      bias -0.181 (0.025) against -0.090 (0.025) unbalanced and -0.116 (0.026) placebo;
      squared error +0.015 (0.006) and sqrt(PEHE) +0.033 (0.007) above the placebo.

    Why: under sequential missingness the stage regressions are unbiased without any balance,
    so a penalty can only trade fit for stability. The selection at the later stages runs
    through the latest short-term outcome, the strongest predictor of the next target, which a
    representation matched between stayers and drop-outs must blur: the validation loss picks
    small weights there (mean chosen weight at stages 2 and 3: 0.023 and 0.009 on IHDP, 0.036
    and 0.037 on JOBS, against 0.073 and 0.067, 0.058 and 0.074 for the placebo, whose random
    groups constrain nothing predictive). At the first stage the treated/control penalty pulls
    the arms together on covariates where they really differ (JOBS: the NSW treated against
    CPS controls), discarding confounder directions over which each arm's head must then
    extrapolate: the JOBS bias. An earlier paired study of penalty variants
    (``simulations/longterm_networks_paired.py``, run with the previous BalanceNet, which
    balanced the arms at every stage) found the same: no penalty lowered the PEHE through
    balance, and the one that lowered it most (Wasserstein, weight 0.1: sqrt(PEHE) 1.26 to
    1.03 at 30% drop-out) did less than the same penalty between random groups (0.98). Treat
    ``alpha`` as a tuning parameter (0 included) and compare a gain with the placebo before
    attributing it to balance.

    ``BalanceNet`` also implements the stage-learner protocol (``fit_stage``), so it can be the
    ``outcome_model`` of :class:`SequentialRegression`, :class:`SeqMSM` (the sample weights
    enter the factual loss) or :class:`MonotoneAIPW`; the outcome chain passes the stage index,
    which confines the treated/control penalty to the first stage.

    Parameters
    ----------
    representation : tuple of int
        Hidden sizes of ``Phi`` (ELU activations).
    head : tuple of int
        Hidden sizes of each outcome head.
    ipm : {"mmd_linear", "mmd_rbf", "wasserstein"}
    alpha : float or "validation"
        Weight of the stayers/drop-outs penalty (``0`` gives unbalanced networks), or
        ``"validation"``: chosen per stage from ``alpha_grid`` by the validation factual loss.
    alpha_treat : float, optional
        Weight of the treated/control penalty at the first stage; default ``alpha`` (under
        ``alpha="validation"`` the weight chosen for the first stage).
    alpha_grid : tuple of float
        Candidate weights for ``alpha="validation"``, default ``(0, 0.01, 0.03, 0.1)``.
    lr, weight_decay : float
        Adam learning rate and L2 penalty.
    batch_size, max_epochs, patience : int
        Mini-batch size; epochs; early-stopping patience on the validation factual loss (the
        best weights are restored).
    validation_fraction : float
        Share of each stage's responders held out for early stopping (and for the choice of
        the weight; ``alpha="validation"`` needs at least two held-out units).
    mode : {"impute_missing", "replace_all"}
        Chain variant (see :class:`SequentialRegression`).
    device : {"auto", "cpu", "cuda"}
        ``"auto"`` uses CUDA when present; ``"cuda"`` without CUDA is an error.
    progress : bool
        tqdm bar over epochs.
    random_state : None, int or SeedSequence
        Seeds weight initialisation, the validation split and the batch order, the probability
        models and the bootstrap: the same seed gives the same numbers. Each stage network gets
        its own seed derived from it (one child per stage; inside :class:`MonotoneAIPW`, one
        per fold and stage). ``BalanceNet(random_state=s)`` equals
        ``SequentialRegression(outcome_model=BalanceNet(), random_state=s)`` with the same
        network parameters. As a stage learner (``fit_stage``) it seeds that one network, so
        leave it unset in an ``outcome_model`` to let the chain derive one per stage and fold.

    Attributes
    ----------
    ate_, mu_, regression_ (the fitted :class:`SequentialRegression`),
    training_history_ (per stage, the validation loss of each epoch),
    alpha_chosen_ (per stage, the stayers/drop-outs weight used: the chosen one under
    ``alpha="validation"``).

    Notes
    -----
    The networks standardise their inputs and targets, so the estimate does not depend on the
    units of ``X`` or ``y``. Inference is the bootstrap only: a network plug-in has no usable
    influence function (early stopping and the penalties make it neither a smooth M-estimator
    nor orthogonal to its own errors), and the efficient influence function evaluated at the
    networks under-covered (0.74-0.86 in the IHDP study). For an influence-function interval
    use :class:`MonotoneAIPW` with ``outcome_model=BalanceNet(...)`` (cross-fitted, doubly
    robust).
    """

    _label = "BalanceNet"
    _nuisance_slots: dict = {}
    _inferences = ("bootstrap",)
    _default_inference = "bootstrap"
    _row_order_dependent = True             # through the random validation split and batches

    def __init__(self, representation=(100, 100), head=(100,), ipm="mmd_linear",
                 alpha="validation", alpha_treat=None, alpha_grid=(0.0, 0.01, 0.03, 0.1),
                 lr=1e-3, weight_decay=1e-4, batch_size=128, max_epochs=300, patience=20,
                 validation_fraction=0.2, mode="impute_missing", device="auto", progress=False,
                 random_state=None):
        self.representation = representation
        self.head = head
        self.ipm = ipm
        self.alpha = alpha
        self.alpha_treat = alpha_treat
        self.alpha_grid = alpha_grid
        self.lr = lr
        self.weight_decay = weight_decay
        self.batch_size = batch_size
        self.max_epochs = max_epochs
        self.patience = patience
        self.validation_fraction = validation_fraction
        self.mode = mode
        self.device = device
        self.progress = progress
        self.random_state = random_state

    # -- long-term estimator --------------------------------------------------------------------
    def _fit(self, data: MonotoneData):
        self._check_params()
        reg = SequentialRegression(outcome_model=clone(self).set_params(random_state=None),
                                   mode=self.mode, random_state=self._seed_root)
        reg._fit_data(data)
        self.regression_ = reg
        self.ate_, self.mu_ = reg.ate_, reg.mu_
        self.training_history_ = [stage.history for stage in reg.chain_.stages_]
        self.alpha_chosen_ = [stage.alpha for stage in reg.chain_.stages_]

    def _effect(self, X):
        return self.regression_._effect(X)

    # -- stage learner ------------------------------------------------------------------------
    def _check_params(self):
        for name in ("representation", "head"):
            sizes = getattr(self, name)
            if not isinstance(sizes, (tuple, list)) or not all(
                    isinstance(s, numbers.Integral) and s > 0 for s in sizes):
                raise ValueError(f"{name} must be a tuple of positive ints; got {sizes!r}")
        if len(self.representation) == 0:
            raise ValueError("representation needs at least one layer")
        if self.ipm not in _IPMS:
            raise ValueError(f"ipm must be one of {_IPMS}; got {self.ipm!r}")
        if not (self.alpha == "validation" if isinstance(self.alpha, str)
                else _is_weight(self.alpha)):
            raise ValueError(f"alpha must be a number >= 0 or 'validation'; got {self.alpha!r}")
        if self.alpha_treat is not None and not _is_weight(self.alpha_treat):
            raise ValueError(f"alpha_treat must be None or a number >= 0; "
                             f"got {self.alpha_treat!r}")
        grid = self.alpha_grid
        if not isinstance(grid, (tuple, list)) or len(grid) == 0 \
                or not all(_is_weight(w) for w in grid):
            raise ValueError(f"alpha_grid must be a non-empty tuple of numbers >= 0; "
                             f"got {grid!r}")
        for name in ("lr", "weight_decay"):
            if not _is_weight(getattr(self, name)):
                raise ValueError(f"{name} must be a number >= 0; got {getattr(self, name)!r}")
        for name in ("batch_size", "max_epochs", "patience"):
            check_positive_int(getattr(self, name), name)
        check_fraction(self.validation_fraction, "validation_fraction")
        if self.validation_fraction >= 1:
            raise ValueError("validation_fraction must be below 1")
        return _resolve_device(self.device)

    def fit_stage(self, H, treatment, y, labeled, sample_weight=None, stage=0,
                  groups=None) -> _FittedStage:
        """Train one stage network (the stage-learner protocol of the outcome chain).

        Parameters
        ----------
        H : ndarray (m, q)
            Histories of the units at risk (treatment excluded).
        treatment : ndarray (m,)
        y : ndarray (m,)
            Targets; NaN where ``labeled`` is False.
        labeled : ndarray of bool (m,)
            Responders of the stage (the others enter only the stayers/drop-outs penalty).
        sample_weight : ndarray (m,), optional
            Weights of the factual loss.
        stage : int
            Index of the stage (0 = the first, whose history is the covariates): the
            treated/control penalty acts at stage 0 only.
        groups : ndarray (m,), optional
            The unit each row copies (a bootstrap resample): the validation split takes whole
            units, so no unit is both trained on and validated on.
        """
        device = self._check_params()
        if not isinstance(stage, numbers.Integral) or isinstance(stage, bool) or stage < 0:
            raise ValueError(f"stage must be an int >= 0; got {stage!r}")
        treatment = np.asarray(treatment).astype(int)
        labeled = np.asarray(labeled, dtype=bool)
        for arm in (0, 1):
            if not np.any(labeled & (treatment == arm)):
                raise ValueError(f"no observed unit with treatment={arm} to fit a stage network")
        if self.alpha != "validation":
            return self._train(H, treatment, y, labeled, sample_weight, stage, self.alpha, device,
                               groups)
        fits = [self._train(H, treatment, y, labeled, sample_weight, stage, weight, device,
                            groups)
                for weight in sorted(float(w) for w in self.alpha_grid)]
        losses = tuple(float(np.nanmin(f.history)) if np.isfinite(f.history).any() else np.nan
                       for f in fits)
        if np.isnan(losses).any():
            raise ValueError("alpha='validation' needs a validation set: raise "
                             f"validation_fraction (got {self.validation_fraction}) so that at "
                             "least two responders of every stage are held out")
        chosen = fits[int(np.argmin(losses))]          # argmin: ties go to the smaller weight
        chosen.validation_losses = losses
        return chosen

    def _train(self, H, treatment, y, labeled, sample_weight, stage, alpha, device, groups):
        """One network with stayers/drop-outs weight ``alpha``; the initialisation, split and
        batch order depend on ``random_state`` only (identical across weights)."""
        root = as_seed_sequence(self.random_state)
        seed = seed_int(child_seed(root, 0))
        rng = np.random.default_rng(child_seed(root, 1))
        alpha_treat = 0.0 if stage > 0 else alpha if self.alpha_treat is None \
            else float(self.alpha_treat)
        mean = H.mean(axis=0)
        scale = H.std(axis=0)
        scale[scale == 0] = 1.0
        y_mean = float(np.mean(y[labeled]))
        y_scale = float(np.std(y[labeled])) or 1.0
        val = self._validation_rows(rng, labeled, groups)
        train = np.setdiff1d(np.arange(H.shape[0]), val)
        w = np.ones(H.shape[0]) if sample_weight is None else np.asarray(sample_weight, float)
        w = w / w[labeled].mean()

        def tensor(v, dtype=torch.float32):
            return torch.as_tensor(np.ascontiguousarray(v), dtype=dtype, device=device)

        x_all = tensor((H - mean) / scale)
        y_all = tensor(np.where(labeled, (np.nan_to_num(y) - y_mean) / y_scale, 0.0))
        a_all = tensor(treatment, torch.long)
        l_all = tensor(labeled, torch.bool)
        w_all = tensor(w)
        with torch.random.fork_rng(devices=[] if device.type == "cpu" else [device]):
            torch.manual_seed(seed)
            net = _Net(H.shape[1], tuple(self.representation), tuple(self.head)).to(device)
        opt = torch.optim.Adam(net.parameters(), lr=self.lr, weight_decay=self.weight_decay)
        best, best_state, wait, history = np.inf, None, 0, []
        epochs = range(self.max_epochs)
        if self.progress:
            from tqdm.auto import tqdm
            epochs = tqdm(epochs, desc=f"BalanceNet stage {stage + 1}", leave=False)
        for _ in epochs:
            net.train()
            order = train[rng.permutation(train.size)]
            for start in range(0, order.size, self.batch_size):
                idx = tensor(order[start:start + self.batch_size], torch.long)
                pred, rep = net(x_all[idx], a_all[idx])
                lab = l_all[idx]
                if not lab.any():
                    continue
                wl = w_all[idx][lab]
                loss = torch.sum(wl * (pred[lab] - y_all[idx][lab]) ** 2) / wl.sum()
                loss = loss + self._penalty(rep, lab, alpha)
                loss = loss + self._penalty(rep, a_all[idx] == 1, alpha_treat)
                opt.zero_grad()
                loss.backward()
                opt.step()
            if val.size == 0:
                history.append(np.nan)
                continue
            net.eval()
            with torch.no_grad():
                vi = tensor(val, torch.long)
                pred, _ = net(x_all[vi], a_all[vi])
                vloss = float(torch.sum(w_all[vi] * (pred - y_all[vi]) ** 2) / w_all[vi].sum())
            history.append(vloss)
            if vloss < best - 1e-6:
                best, wait = vloss, 0
                best_state = {k: v.detach().clone() for k, v in net.state_dict().items()}
            else:
                wait += 1
                if wait >= self.patience:
                    break
        if best_state is not None:
            net.load_state_dict(best_state)
        net.eval()
        return _FittedStage(net, mean, scale, y_mean, y_scale, device, np.asarray(history),
                            float(alpha), alpha_treat)

    def _validation_rows(self, rng, labeled, groups) -> np.ndarray:
        """A random ``validation_fraction`` of the responders (none when that is under two);
        with repeated ``groups`` (copies of units in a bootstrap resample) whole units are drawn
        until the fraction is reached."""
        lab_idx = np.flatnonzero(labeled)
        n_val = int(round(self.validation_fraction * lab_idx.size))
        if n_val < 2:
            return np.array([], dtype=int)
        units, unit_of_row = (np.unique(np.asarray(groups)[lab_idx], return_inverse=True)
                              if groups is not None else (lab_idx, None))
        if units.size == lab_idx.size:                     # no copies: a split of the rows
            return rng.permutation(lab_idx)[:n_val]
        order = rng.permutation(units.size)
        rows_so_far = np.cumsum(np.bincount(unit_of_row, minlength=units.size)[order])
        chosen = order[: np.searchsorted(rows_so_far, n_val) + 1]
        return lab_idx[np.isin(unit_of_row, chosen)]

    def _penalty(self, rep, group, weight):
        if weight == 0:
            return 0.0
        n1 = int(group.sum())
        if n1 < 2 or group.numel() - n1 < 2:
            return 0.0
        return weight * ipm(rep[group], rep[~group], self.ipm)


def _is_weight(value) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, bool) and value >= 0
