"""Influence scores of external controls on an outcome model fitted to the trial controls.

For an M-estimator
:math:`\\hat\\theta = \\arg\\min n_0^{-1}\\sum_{i\\in D_0}\\ell(z_i;\\theta)` on the
trial controls :math:`D_0`, up-weighting an external control :math:`z` by :math:`\\varepsilon`
moves the parameter by :math:`I_\\theta(z) = -H^{-1}\\nabla\\ell(z;\\hat\\theta)`, with :math:`H`
the mean Hessian, and the loss of trial control :math:`z_i` by

.. math::
    I_{loss}(z, z_i) = -\\nabla\\ell(z_i;\\hat\\theta)^\\top H^{-1}\\nabla\\ell(z;\\hat\\theta).

The score aggregates these over the trial controls; **smaller means more comparable**:

* ``"absolute"`` (default): :math:`I(z) = \\sum_{i\\in D_0}|I_{loss}(z, z_i)|`;
* ``"squared"``: :math:`\\sum_{i\\in D_0} I_{loss}(z, z_i)^2`;
* ``"hnorm"``: :math:`\\nabla\\ell(z)^\\top H^{-1}\\nabla\\ell(z)`, the squared H-norm of the
  parameter shift.

The absolute value is a reconstruction forced by the first-order condition: at an unpenalised
optimum :math:`\\sum_i\\nabla\\ell(z_i;\\hat\\theta) = 0`, so the signed sum vanishes for every
:math:`z`. For least squares with intercept, :math:`\\nabla\\ell(z) = -\\tilde x e_z`, hence
:math:`I(z) = |e_z|\\sum_i|e_i||\\tilde x_i^\\top H^{-1}\\tilde x|`: the external control's residual
under the trial-control model times a leverage factor.

References: Koh & Liang (2017), "Understanding black-box predictions via influence functions",
ICML; Yang, Li & Wu (2025), arXiv:2508.03282.
"""

from __future__ import annotations

import numpy as np
from scipy.linalg import LinAlgError, cho_factor, cho_solve

__all__ = ["influence_scores", "SCORES"]

SCORES = ("absolute", "squared", "hnorm")


def influence_scores(model, X_control, y_control, X_external, y_external, *,
                     score: str = "absolute", damping: float = 0.0,
                     block_size: int = 65536) -> np.ndarray:
    """Influence score of every external control (vectorised; one Hessian factorisation).

    Parameters
    ----------
    model : fitted influence-ready outcome model
        Fitted on ``(X_control, y_control)``; see ``causalkit.borrowing.models``.
    X_control, y_control : arrays of shape (n0, p), (n0,)
        The trial controls.
    X_external, y_external : arrays of shape (nE, p), (nE,)
        The external controls.
    score : {"absolute", "squared", "hnorm"}
        Aggregation (module docstring).
    damping : float
        :math:`\\delta \\ge 0` added to the Hessian diagonal before solving.
    block_size : int
        External controls processed per matrix product, bounding memory at
        ``n0 * block_size`` floats.

    Returns
    -------
    ndarray of shape (nE,)
    """
    if score not in SCORES:
        raise ValueError(f"score must be one of {SCORES}; got {score!r}")
    if not (np.isscalar(damping) and damping >= 0):
        raise ValueError(f"damping must be a number >= 0; got {damping!r}")
    H = np.asarray(model.loss_hessian(X_control), dtype=float)
    H = H + float(damping) * np.eye(H.shape[0])
    try:
        factor = cho_factor(H)
    except LinAlgError as exc:
        raise np.linalg.LinAlgError(
            "the outcome-model Hessian on the trial controls is singular (collinear covariates "
            "or too few trial controls); set damping > 0") from exc
    G0 = model.loss_gradients(X_control, y_control)
    n_ext = X_external.shape[0]
    out = np.empty(n_ext)
    for start in range(0, n_ext, block_size):
        stop = min(start + block_size, n_ext)
        Ge = model.loss_gradients(X_external[start:stop], y_external[start:stop])
        V = cho_solve(factor, Ge.T)                      # (q, block) = H^-1 grad(z)
        if score == "hnorm":
            out[start:stop] = np.einsum("ij,ji->i", Ge, V)
            continue
        M = G0 @ V                                       # (n0, block) = -I_loss
        out[start:stop] = np.abs(M).sum(axis=0) if score == "absolute" else (M * M).sum(axis=0)
    return out
