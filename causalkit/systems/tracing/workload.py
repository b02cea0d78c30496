"""The traced training workloads run by each rank process (torch.distributed, gloo, CPU).

Two workloads:

* data parallel (``train_data_parallel``): a small transformer block stack, phases
  ``forward`` > (``self_attention``, ``mlp``) per layer, ``backward``, two expert-parallel
  ``alltoall`` calls per layer (dispatch, combine) within pairs of ranks (world size >= 4), a
  flat gradient ``allreduce`` over all ranks, ``optimizer``;
* pipeline (``train_pipeline``): one stage per rank, GPipe schedule over ``send``/``recv``
  (phases ``stage_forward``, ``stage_backward``; activations ``pp_send`` / ``pp_recv``,
  gradients ``pp_send_grad`` / ``pp_recv_grad``).

Injected faults (``fault`` in the rank configuration):

* ``compute_straggler`` / ``masked_straggler`` (real): from ``fault_step`` the faulty rank's MLP
  runs on weights padded with ``severity - 1`` times extra zero hidden units, so the same
  kernels do ``severity`` times the work with identical outputs (a slower device);
* ``pipeline_bubble`` (real): the last stage's backward runs on padded weights likewise;
* ``jit_stall`` (real): at ``fault_step`` the faulty rank calls a freshly ``torch.compile``-d
  function (backend ``aot_eager``) inside ``backward``, a genuine first-call compilation;
* ``link_degradation``, emulated (default): from ``fault_step`` the ranks of the degraded
  expert group hold each ``alltoall`` after the transfer (a slow link), since loopback has no
  separate links to degrade, for ``max(link_delay_ms, (severity - 1) * m)`` with ``m`` the
  rank's median ``alltoall`` time over the healthy steps before (from step 2): a link with
  ``1 / severity`` of its bandwidth. The relative term keeps the fault as strong on a host whose
  cores the ranks share with other work (there every collective waits for its peers to be
  scheduled, and a held rank hands its core to the others) as on an idle one;
* ``link_degradation``, real (``cfg["link"]`` set, see
  :class:`~causalkit.systems.tracing.netns.ShapedLink`): the faulty rank runs in its own network
  namespace behind a veth pair, gloo on the veth addresses, and at ``fault_step`` the two ranks
  of its expert group put a tbf rate limit on their end of the pair, so every byte the faulty
  rank sends or receives (its ``alltoall`` and its share of the ``allreduce``) crosses a slow
  link.
"""

from __future__ import annotations

import os
import socket
import time
from datetime import timedelta

import numpy as np

__all__ = ["run_rank"]


def _padded_linear(x, weight, bias, pad_out: int, pad_in: int):
    """``F.linear`` with ``pad_out`` zero output rows and ``pad_in`` zero input columns added
    to the weight (``x`` then carries ``pad_in`` extra features): identical values on the
    original units, proportionally more work in the same kernels."""
    import torch
    import torch.nn.functional as F

    w = weight
    if pad_in:
        w = torch.cat([w, w.new_zeros(w.shape[0], pad_in)], dim=1)
    if pad_out:
        w = torch.cat([w, w.new_zeros(pad_out, w.shape[1])], dim=0)
        bias = torch.cat([bias, bias.new_zeros(pad_out)])
    return F.linear(x, w, bias)


def _build(cfg):
    import torch
    from torch import nn

    class Block(nn.Module):
        def __init__(self, d, heads, hidden):
            super().__init__()
            self.attn = nn.MultiheadAttention(d, heads, batch_first=True)
            self.fc1, self.fc2 = nn.Linear(d, hidden), nn.Linear(hidden, d)
            self.norm = nn.LayerNorm(d)
            self.pad = 0

        def attention(self, x):
            return x + self.attn(x, x, x, need_weights=False)[0]

        def mlp(self, x):
            h = torch.relu(_padded_linear(x, self.fc1.weight, self.fc1.bias, self.pad, 0))
            return self.norm(x + _padded_linear(h, self.fc2.weight, self.fc2.bias, 0, self.pad))

    torch.manual_seed(cfg["seed"])
    return nn.ModuleList([Block(cfg["d_model"], 4, cfg["hidden"]) for _ in range(cfg["layers"])])


def _init(rank: int, cfg):
    import torch
    import torch.distributed as dist

    os.environ.setdefault("OMP_NUM_THREADS", "1")
    torch.set_num_threads(1)
    host = "127.0.0.1"
    os.environ["GLOO_SOCKET_IFNAME"] = "lo"   # gloo's pair sockets on loopback only
    link = cfg.get("link")
    if link:   # a real link: the faulty rank behind the veth pair, everyone on its addresses
        from causalkit.systems.tracing.netns import enter_namespace

        inner = rank == link["inner_rank"]
        if inner:
            enter_namespace(link["netns"])
        os.environ["GLOO_SOCKET_IFNAME"] = link["inner_dev"] if inner else link["outer_dev"]
        host = link["outer_addr"]
    timeout = timedelta(seconds=cfg["timeout_s"])
    listen_fd = None
    if rank == 0:   # the store server listens on ``host`` only (TCPStore alone binds to all)
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, cfg["port"]))
        sock.listen(64)
        listen_fd = sock.detach()
    store = dist.TCPStore(host, cfg["port"], cfg["world_size"], rank == 0,
                          timeout=timeout, master_listen_fd=listen_fd)
    dist.init_process_group("gloo", store=store, rank=rank, world_size=cfg["world_size"],
                            timeout=timeout)


def _tracer(rank: int, cfg, groups):
    from causalkit.systems.tracing.tracer import Tracer

    return Tracer(cfg["store"], rank=rank, world_size=cfg["world_size"], groups=groups,
                  channels=cfg["channels"], profile_every=cfg["profile_every"],
                  stack_interval_s=cfg["stack_interval_s"], queue_size=cfg["queue_size"],
                  raw_trace_dir=cfg.get("raw_trace_dir"), job_id=cfg["job_id"],
                  device="cpu")               # the rank trains on the CPU (gloo)


def _compile_stall(x):
    """A first call of a fresh ``torch.compile`` function: real graph capture + compilation."""
    import torch

    def fn(t):
        return torch.tanh(t) * torch.sigmoid(t) + t.sin()

    return torch.compile(fn, backend="aot_eager", dynamic=False)(x)


def _degrade_link(rank: int, link: dict) -> None:
    """Put the tbf rate limit on this rank's end of the veth pair (ranks of the faulty group)."""
    from causalkit.systems.tracing.netns import limit_rate

    limit_rate(link["inner_dev"] if rank == link["inner_rank"] else link["outer_dev"],
               link["rate_mbit"])


def _alltoall(out, inp, group, delay: float):
    """``all_to_all_single`` over ``group``; ``delay`` > 0 emulates a degraded link by holding
    the collective that much longer after the transfer."""
    import time

    import torch.distributed as dist

    work = dist.all_to_all_single(out, inp, group=group)
    if delay:
        time.sleep(delay)
    return work


def _warm_padded(layers, x, pad: int) -> None:
    """Run the padded (slow) path once before training, so that the fault's onset is not
    confounded with first-use costs of new kernel shapes."""
    for block in layers:
        block.pad = pad
    h = x
    for block in layers:
        h = block.mlp(block.attention(h))
    h.sum().backward()
    for block in layers:
        block.pad = 0
    layers.zero_grad()


def train_data_parallel(rank: int, cfg) -> None:

    import torch
    import torch.distributed as dist

    ws, fault, faulty = cfg["world_size"], cfg["fault"], cfg["faulty_rank"]
    ep_size = 2 if ws >= 4 else 0
    ep_groups = [dist.new_group(list(range(g, g + 2))) for g in range(0, ws, 2)] \
        if ep_size else []
    ep_index = rank // 2
    groups = {"dp": "dp0", "ep": f"ep{ep_index}" if ep_size else "dp0"}
    layers = _build(cfg)
    params = [p for p in layers.parameters()]
    opt = torch.optim.SGD(params, lr=1e-3)
    gen = torch.Generator().manual_seed(cfg["seed"] * 1000 + rank)
    x = torch.randn(cfg["batch"], cfg["seq"], cfg["d_model"], generator=gen)
    target = torch.randn(cfg["batch"], cfg["seq"], cfg["d_model"], generator=gen)
    token = torch.randn(ws * cfg["ep_tokens"], cfg["d_model"], generator=gen)
    routed = torch.empty_like(token)
    degraded = fault == "link_degradation" and ep_size and ep_index == cfg["degraded_group"]
    link = cfg.get("link") if degraded else None
    if fault in ("compute_straggler", "masked_straggler") and rank == faulty:
        _warm_padded(layers, x, int(round(cfg["hidden"] * (cfg["severity"] - 1))))
    healthy, delay = [], 0.0     # alltoall seconds before the fault; the emulated link's hold
    with _tracer(rank, cfg, groups) as tr:
        for step in range(cfg["steps"]):
            active = step >= cfg["fault_step"]
            slow = fault in ("compute_straggler", "masked_straggler") and rank == faulty and active
            for block in layers:
                block.pad = int(round(cfg["hidden"] * (cfg["severity"] - 1))) if slow else 0
            if link and step == cfg["fault_step"]:
                _degrade_link(rank, link)
            with tr.step():
                with tr.phase("forward"):
                    h = x
                    for block in layers:
                        with tr.phase("self_attention"):
                            h = block.attention(h)
                        with tr.phase("mlp"):
                            h = block.mlp(h)
                    loss = torch.nn.functional.mse_loss(h, target)
                with tr.phase("backward"):
                    loss.backward()
                    if fault == "jit_stall" and rank == faulty and step == cfg["fault_step"]:
                        _compile_stall(x)
                if ep_size:   # expert dispatch + combine per layer, within the expert group
                    if degraded and not link and step == cfg["fault_step"]:
                        delay = max(cfg["link_delay_ms"] / 1e3,
                                    (cfg["severity"] - 1) * float(np.median(healthy or [0.0])))
                    for _ in range(2 * len(layers)):
                        t0 = time.perf_counter()
                        tr.collective("alltoall", _alltoall, routed, token, ep_groups[ep_index],
                                      delay if degraded and active and not link else 0.0,
                                      nbytes=token.numel() * 4)
                        if 2 <= step < cfg["fault_step"]:
                            healthy.append(time.perf_counter() - t0)
                flat = torch.cat([p.grad.reshape(-1) for p in params])
                tr.collective("allreduce", dist.all_reduce, flat, async_op=True,
                              nbytes=flat.numel() * 4)
                with tr.phase("optimizer"):
                    flat /= ws
                    offset = 0
                    for p in params:
                        n = p.numel()
                        p.grad.copy_(flat[offset:offset + n].view_as(p))
                        offset += n
                    opt.step()
                    opt.zero_grad(set_to_none=False)


def train_pipeline(rank: int, cfg) -> None:
    import torch
    import torch.distributed as dist
    from torch import nn

    ws, micro = cfg["world_size"], cfg["microbatches"]
    last = ws - 1
    d, hidden = cfg["d_model"], cfg["hidden"]
    torch.manual_seed(cfg["seed"] + rank)
    fc1, fc2 = nn.Linear(d, hidden), nn.Linear(hidden, d)
    opt = torch.optim.SGD(list(fc1.parameters()) + list(fc2.parameters()), lr=1e-3)
    gen = torch.Generator().manual_seed(cfg["seed"] * 1000 + rank)
    mb = cfg["batch"] * cfg["seq"] // micro
    inputs = [torch.randn(mb, d, generator=gen) for _ in range(micro)]
    target = torch.randn(mb, d, generator=gen)
    with _tracer(rank, cfg, {"dp": f"stage{rank}", "pp": "pp0"}) as tr:
        for step in range(cfg["steps"]):
            slow = cfg["fault"] == "pipeline_bubble" and rank == last \
                and step >= cfg["fault_step"]
            pad = int(round(hidden * (cfg["severity"] - 1))) if slow else 0
            with tr.step():
                acts, outs = [], []
                for m in range(micro):
                    if rank == 0:
                        a = inputs[m].clone()
                    else:
                        a = torch.empty(mb, d)
                        tr.collective("pp_recv", dist.recv, a, rank - 1, nbytes=a.numel() * 4)
                    a.requires_grad_(rank > 0)
                    with tr.phase("stage_forward"):
                        o = fc2(torch.relu(fc1(a)))
                    acts.append(a)
                    outs.append(o)
                    if rank < last:
                        tr.collective("pp_send", dist.send, o.detach(), rank + 1,
                                      nbytes=o.numel() * 4)
                for m in reversed(range(micro)):
                    if rank == last:
                        with tr.phase("stage_backward"):
                            o = outs[m]
                            if pad:  # the slow stage: same values, padded (slower) kernels
                                h = torch.relu(_padded_linear(acts[m], fc1.weight, fc1.bias,
                                                              pad, 0))
                                o = _padded_linear(h, fc2.weight, fc2.bias, 0, pad)
                            torch.nn.functional.mse_loss(o, target).backward()
                    else:
                        g = torch.empty(mb, d)
                        tr.collective("pp_recv_grad", dist.recv, g, rank + 1,
                                      nbytes=g.numel() * 4)
                        with tr.phase("stage_backward"):
                            outs[m].backward(g)
                    if rank > 0:
                        tr.collective("pp_send_grad", dist.send, acts[m].grad, rank - 1,
                                      nbytes=acts[m].grad.numel() * 4)
                with tr.phase("optimizer"):
                    opt.step()
                    opt.zero_grad()


def run_rank(rank: int, cfg: dict) -> None:
    """Run one rank of the configured workload (then a final barrier)."""
    import torch.distributed as dist

    _init(rank, cfg)
    try:
        (train_pipeline if cfg["mode"] == "pipeline" else train_data_parallel)(rank, cfg)
        dist.barrier()
    finally:
        dist.destroy_process_group()


def run_logged(rank: int, cfg: dict, log_path: str) -> None:
    """Forked-process entry: stdout/stderr (Python and native) go to ``log_path``; exit code 1
    with the traceback in the log on failure."""
    import sys
    import traceback

    fd = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    sys.stdout.flush()
    sys.stderr.flush()
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    try:
        run_rank(rank, cfg)
    except BaseException:  # noqa: BLE001 - reported through the log and the exit code
        traceback.print_exc()
        sys.stderr.flush()
        os._exit(1)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


if __name__ == "__main__":
    import json
    import sys

    with open(sys.argv[1]) as fh:
        run_rank(int(sys.argv[2]), json.load(fh))
