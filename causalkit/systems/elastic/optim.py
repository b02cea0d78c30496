"""ZeRO-1 Adam: moments sharded over the data-parallel group, parameters replicated.

Each parameter's TP shard is split along its first dimension across the DP ranks (per-parameter
dim-0 sharding, as in FSDP2; Rajbhandari et al., "ZeRO", SC 2020, stage 1). A step: all-reduce
(sum) of the flat gradient over DP, Adam on the rank's rows only,

    m <- b1 m + (1 - b1) g,   v <- b2 v + (1 - b2) g^2,
    p <- p - lr (m / (1 - b1^t)) / (sqrt(v / (1 - b2^t)) + eps)        (Kingma & Ba, 2015)

then an all-gather of the updated rows so every replica holds the full parameters again.
"""

from __future__ import annotations

import torch

from .layout import even_split
from .plan import Box

__all__ = ["ZeroAdam"]


class ZeroAdam:
    """Sharded Adam over ``stage.params`` for DP rank ``dp_comm.rank`` of ``dp``."""

    def __init__(self, stage, dp_comm, dp: int, dp_rank: int, lr: float,
                 betas=(0.9, 0.999), eps: float = 1e-8):
        self.stage, self.dp_comm, self.dp, self.dp_rank = stage, dp_comm, dp, dp_rank
        self.lr, self.betas, self.eps = lr, betas, eps
        self.rows: dict[str, list[tuple[int, int]]] = {}
        self.state: dict[tuple[str, str], torch.Tensor] = {}
        self.boxes: dict[tuple[str, str], Box] = {}
        for name, p in stage.params.items():
            self.rows[name] = [even_split(p.shape[0], dp, r) for r in range(dp)]
            r0, r1 = self.rows[name][dp_rank]
            if r1 > r0:
                box = stage.boxes[name]
                shard = ((box[0][0] + r0, box[0][0] + r1),) + box[1:]
                for kind in ("exp_avg", "exp_avg_sq"):
                    self.state[(kind, name)] = torch.zeros((r1 - r0,) + tuple(p.shape[1:]),
                                                           dtype=p.dtype)
                    self.boxes[(kind, name)] = shard

    def step(self, t: int) -> None:
        """Optimizer step number ``t`` (1-based); gradients must be in ``param.grad``."""
        params = list(self.stage.params.items())
        flat = torch.cat([p.grad.reshape(-1) for _, p in params])
        self.dp_comm.all_reduce(flat)
        b1, b2 = self.betas
        bc1, bc2 = 1 - b1 ** t, 1 - b2 ** t
        offset = 0
        with torch.no_grad():
            for name, p in params:
                g = flat[offset: offset + p.numel()].view_as(p)
                offset += p.numel()
                r0, r1 = self.rows[name][self.dp_rank]
                if r1 == r0:
                    continue
                m, v = self.state[("exp_avg", name)], self.state[("exp_avg_sq", name)]
                m.mul_(b1).add_(g[r0:r1], alpha=1 - b1)
                v.mul_(b2).addcmul_(g[r0:r1], g[r0:r1], value=1 - b2)
                p[r0:r1].addcdiv_(m / bc1, (v / bc2).sqrt_().add_(self.eps), value=-self.lr)
            if self.dp > 1:
                self._gather(params)
            for _, p in params:
                p.grad = None

    def _gather(self, params) -> None:
        sizes = [sum((rows[r][1] - rows[r][0]) * (p[0].numel() if p.dim() else 1)
                     for rows, p in ((self.rows[n], p) for n, p in params))
                 for r in range(self.dp)]
        mine = [p[slice(*self.rows[n][self.dp_rank])].reshape(-1) for n, p in params]
        buf = torch.zeros(max(sizes), dtype=params[0][1].dtype)
        packed = torch.cat(mine)
        buf[: packed.numel()] = packed
        parts = self.dp_comm.all_gather(buf)
        for r, part in enumerate(parts):
            if r == self.dp_rank:
                continue
            offset = 0
            for n, p in params:
                r0, r1 = self.rows[n][r]
                k = (r1 - r0) * (p[0].numel() if p.dim() else 1)
                p[r0:r1] = part[offset: offset + k].view((r1 - r0,) + tuple(p.shape[1:]))
                offset += k
