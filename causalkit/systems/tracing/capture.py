"""A real ``torch.profiler`` Chrome/Kineto export of a small training loop.

:func:`profile_training` trains a small MLP for ``steps`` steps under ``torch.profiler`` (one
warm-up step, then ``steps`` active steps, each a ``ProfilerStep#N`` span) with the phases as
``record_function`` spans (``forward``, ``backward``, ``collective:allreduce`` when a process
group is initialised, ``optimizer``) and writes ``prof.export_chrome_trace(path)``: the file a
user of ``torch.profiler`` has, read back by :func:`~causalkit.systems.tracing.read_kineto`.
On CUDA the profiler also records CUDA kernel activity.
"""

from __future__ import annotations

import warnings
from pathlib import Path

from causalkit._validation import check_positive_int

__all__ = ["profile_training"]


def profile_training(path, *, steps: int = 6, device: str = "cpu", width: int = 64,
                     layers: int = 4, batch: int = 32, seed: int = 0) -> Path:
    """Profile ``steps`` training steps of a ``layers`` x ``width`` MLP and export the trace.

    Parameters
    ----------
    path : str or Path
        Output file (``.json``, or ``.json.gz`` for gzip, as torch writes it).
    steps : int
        Profiled steps (after one warm-up step).
    device : {"cpu", "cuda"}
        Where the model runs; ``"cuda"`` adds ``ProfilerActivity.CUDA``.
    width, layers, batch : int
        Model and batch size.
    seed : int
        ``torch.manual_seed``.

    Returns
    -------
    Path of the export.
    """
    import torch
    import torch.distributed as dist
    from torch.profiler import ProfilerActivity, profile, schedule

    steps = check_positive_int(steps, "steps")
    if device not in ("cpu", "cuda"):
        raise ValueError(f"device must be 'cpu' or 'cuda'; got {device!r}")
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(seed)
    width = check_positive_int(width, "width")
    net = torch.nn.Sequential(*[torch.nn.Linear(width, width)
                                for _ in range(check_positive_int(layers, "layers"))]).to(device)
    opt = torch.optim.SGD(net.parameters(), lr=1e-3)
    x = torch.randn(check_positive_int(batch, "batch"), width, device=device)
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device == "cuda" else [])
    collective = dist.is_available() and dist.is_initialized()
    with warnings.catch_warnings():      # "Profiler clears events at the end of each cycle"
        warnings.filterwarnings("ignore", message=".*Profiler clears events", category=UserWarning)
        _run(net, opt, x, steps, device, collective,
             profile(activities=activities, schedule=schedule(wait=0, warmup=1, active=steps),
                     on_trace_ready=lambda p: p.export_chrome_trace(str(path))))
    return path


def _run(net, opt, x, steps, device, collective, profiler) -> None:
    """The training loop under ``profiler``: one warm-up step, then ``steps`` profiled ones."""
    import torch
    import torch.distributed as dist
    from torch.profiler import record_function

    with profiler as prof:
        for _ in range(steps + 1):
            with record_function("forward"):
                loss = net(x).square().mean()
            with record_function("backward"):
                loss.backward()
            if collective:
                flat = torch.cat([p.grad.reshape(-1) for p in net.parameters()])
                with record_function("collective:allreduce"):
                    dist.all_reduce(flat)
            with record_function("optimizer"):
                opt.step()
                opt.zero_grad()
            if device == "cuda":
                torch.cuda.synchronize()
            prof.step()
