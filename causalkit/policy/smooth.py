"""Smoothed parametric policies fitted by maximising a linear-in-policy welfare objective.

For a reward matrix :math:`\\Gamma` (n, K) the welfare of a stochastic policy is
:math:`W(\\pi) = n^{-1}\\sum_r\\sum_a \\pi(a|X_r)\\Gamma_{r,a}`. Maximising it over deterministic
rules is a non-smooth problem; here the rule is relaxed to a softmax policy

.. math:: \\pi_\\theta(a|x) = \\operatorname{softmax}_a\\{f_\\theta(x)_a/\\tau\\},

with :math:`f_\\theta` linear in standardised covariates (``fit_linear_policy``, L-BFGS with the
analytic gradient) or a one-hidden-layer network (``fit_mlp_policy``, torch, Adam). An L2 penalty
:math:`\\lambda\\|\\theta\\|^2` fixes the scale of :math:`\\theta`, which the relaxation would
otherwise push towards a hard threshold. :math:`\\Gamma` is divided by its standard deviation
first, so ``l2`` and ``temperature`` do not depend on the outcome's units (the maximiser over
policies is unchanged). The deployed rule is the argmax arm, whose welfare is what should be
reported.

Reference: the surrogate is the standard smooth relaxation of empirical welfare maximisation
(Kitagawa & Tetenov 2018, Econometrica 86(2); Athey & Wager 2021, Econometrica 89(1)); the
objective is the target score matrix of Liu et al. (2025), IJCAI, arXiv:2501.08067.
"""

from __future__ import annotations

import numpy as np
from scipy.optimize import minimize
from scipy.special import softmax

__all__ = ["LinearPolicy", "MLPPolicy", "fit_linear_policy", "fit_mlp_policy"]


def _standardiser(X):
    mean = X.mean(axis=0)
    scale = X.std(axis=0)
    scale[scale == 0] = 1.0
    return mean, scale


def _scaled_rewards(gamma):
    sd = gamma.std()
    return gamma / sd if sd > 0 else gamma


class LinearPolicy:
    """Softmax policy :math:`\\operatorname{softmax}([1, z]\\,\\theta/\\tau)`, z standardised."""

    def __init__(self, mean, scale, theta, temperature):
        self.mean, self.scale, self.theta, self.temperature = mean, scale, theta, temperature

    def proba(self, X):
        Z = (np.asarray(X, dtype=float) - self.mean) / self.scale
        return softmax(np.column_stack([np.ones(len(Z)), Z]) @ self.theta / self.temperature,
                       axis=1)


def fit_linear_policy(X, gamma, *, l2=1e-3, temperature=1.0, max_iter=500):
    """Maximise :math:`W(\\pi_\\theta) - \\lambda\\|\\theta\\|^2` over a linear softmax policy.

    The first arm's coefficients are fixed at zero (identifiability); optimisation starts at
    :math:`\\theta = 0` (the uniform policy). Gradient:
    :math:`\\partial W/\\partial \\text{logit}_{ra} = \\pi_{ra}(\\Gamma_{ra} - \\sum_b
    \\pi_{rb}\\Gamma_{rb})/(n\\tau)`.
    """
    X = np.asarray(X, dtype=float)
    G = _scaled_rewards(np.asarray(gamma, dtype=float))
    mean, scale = _standardiser(X)
    Z = np.column_stack([np.ones(len(X)), (X - mean) / scale])
    n, K = G.shape
    d = Z.shape[1]

    def unpack(flat):
        return np.column_stack([np.zeros(d), flat.reshape(d, K - 1)])

    def objective(flat):
        P = softmax(Z @ unpack(flat) / temperature, axis=1)
        welfare = np.sum(P * G) / n
        d_logit = P * (G - np.sum(P * G, axis=1, keepdims=True)) / (n * temperature)
        grad = (Z.T @ d_logit)[:, 1:].ravel()
        return -welfare + l2 * flat @ flat, -grad + 2 * l2 * flat

    res = minimize(objective, np.zeros(d * (K - 1)), jac=True, method="L-BFGS-B",
                   options={"maxiter": max_iter})
    return LinearPolicy(mean, scale, unpack(res.x), temperature)


class MLPPolicy:
    """Softmax policy on a one-hidden-layer tanh network; weights held as numpy arrays."""

    def __init__(self, mean, scale, weights, temperature):
        self.mean, self.scale, self.weights, self.temperature = mean, scale, weights, temperature

    def proba(self, X):
        Z = (np.asarray(X, dtype=float) - self.mean) / self.scale
        W1, b1, W2, b2 = self.weights
        return softmax((np.tanh(Z @ W1 + b1) @ W2 + b2) / self.temperature, axis=1)


def fit_mlp_policy(X, gamma, *, hidden_units=16, l2=1e-3, temperature=1.0, learning_rate=0.05,
                   max_iter=500, random_state=0):
    """Maximise :math:`W(\\pi_\\theta) - \\lambda\\|\\theta\\|^2` for a small softmax network.

    Full-batch Adam (``max_iter`` steps) in float64, on one torch thread (restored afterwards);
    the global torch random state is left untouched (initialisation uses a forked generator
    seeded by ``random_state``).
    """
    import torch

    X = np.asarray(X, dtype=float)
    G = torch.as_tensor(_scaled_rewards(np.asarray(gamma, dtype=float)))
    mean, scale = _standardiser(X)
    Z = torch.as_tensor((X - mean) / scale)
    K = G.shape[1]
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(int(random_state))
        net = torch.nn.Sequential(torch.nn.Linear(Z.shape[1], hidden_units), torch.nn.Tanh(),
                                  torch.nn.Linear(hidden_units, K)).double()
    opt = torch.optim.Adam(net.parameters(), lr=learning_rate)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # small dense problems: one thread is fastest and avoids contention
    try:
        for _ in range(max_iter):
            opt.zero_grad()
            P = torch.softmax(net(Z) / temperature, dim=1)
            penalty = sum((p ** 2).sum() for p in net.parameters())
            loss = -(P * G).sum(dim=1).mean() + l2 * penalty
            loss.backward()
            opt.step()
    finally:
        torch.set_num_threads(threads)
    lin1, lin2 = net[0], net[2]
    weights = tuple(t.detach().numpy().copy() for t in
                    (lin1.weight.T, lin1.bias, lin2.weight.T, lin2.bias))
    return MLPPolicy(mean, scale, weights, temperature)
