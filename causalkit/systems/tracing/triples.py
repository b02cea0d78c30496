"""The paper's fixed-size cluster summary, next to ours, on the same clusters.

ARGUS uploads, per (kernel, stream, rank) and window, one fixed-size record per KDE cluster:
the triple (count, p50, p99), counted as 24 bytes per cluster (Zhou et al., 2026, arXiv
2606.20374, section 5; the byte count follows the public reimplementation). The paper's wire
layout was not available, so this module uses the plain reading of "a 24-byte triple": three
8-byte fields, count as uint64 and p50, p99 as float64 (``<Qdd``). The group header (rank, kernel
and stream names), window header and CRC-32 are those of our own format
(:meth:`KernelSummary.to_bytes`), so the two sizes differ only in the per-cluster payload:
24 B here against 12 + 2 (k - 2) B for our k-knot quantile sketch.

Reconstruction follows the paper's reading: each cluster is a log-normal with
mu = ln p50 and sigma = (ln p99 - ln p50) / z_0.99, weighted by count / total, and the
kernel's CDF is the mixture F(x) = sum_k w_k Phi((ln x - mu_k) / sigma_k); its quantiles invert F
numerically. :func:`format_errors` scores both formats against the raw durations on the
quantities both can answer: the kernel's p50 and p99 and its whole distribution (Wasserstein-1
distance to the empirical distribution, relative to the empirical mean).
"""

from __future__ import annotations

import struct
import zlib

import numpy as np
import pandas as pd
from scipy.special import ndtr

from causalkit.systems.tracing.compression import (
    _GROUP,
    _HEADER,
    KernelGroupSummary,
    KernelSummary,
    events_frame,
    quantile,
)

__all__ = ["TRIPLE_BYTES", "triple_bytes", "triple_cdf", "triple_quantile", "format_errors"]

_TRIPLE = struct.Struct("<Qdd")          # count, p50, p99
#: Bytes of one cluster record in the paper's format.
TRIPLE_BYTES = _TRIPLE.size
_MAGIC = b"AKT1"
_SIGMA_MIN = 1e-6                        # a cluster with p99 == p50 is (almost) a point mass
_U = (np.arange(2000) + 0.5) / 2000      # midpoints for the W1 integral over u in (0, 1)


def triple_bytes(summary: KernelSummary) -> bytes:
    """The summary in the paper's format: our window and group headers, one 24-byte
    (count, p50, p99) record per cluster, CRC-32."""
    if not isinstance(summary, KernelSummary):
        raise TypeError(f"summary must be a KernelSummary; got {type(summary).__name__}")
    parts = [_HEADER.pack(_MAGIC, summary.window_id, summary.step, summary.raw_bytes,
                          len(summary.groups))]
    for g in summary.groups:
        name, stream = g.kernel.encode(), g.stream.encode()
        parts.append(_GROUP.pack(g.rank, len(name), len(stream), len(g.clusters)))
        parts.append(name + stream)
        parts.extend(_TRIPLE.pack(c.count, c.p50, c.p99) for c in g.clusters)
    body = b"".join(parts)
    return body + struct.pack("<I", zlib.crc32(body))


def _mixture(group: KernelGroupSummary):
    if not isinstance(group, KernelGroupSummary) or not group.clusters:
        raise TypeError("group must be a KernelGroupSummary with clusters")
    counts = np.array([c.count for c in group.clusters], dtype=float)
    mu = np.log([c.p50 for c in group.clusters])
    sigma = np.maximum([c.sigma for c in group.clusters], _SIGMA_MIN)
    return counts / counts.sum(), mu, sigma


def triple_cdf(group: KernelGroupSummary, t) -> np.ndarray:
    """Mixture-of-log-normals CDF of a kernel rebuilt from its (count, p50, p99) triples."""
    w, mu, sigma = _mixture(group)
    t = np.atleast_1d(np.asarray(t, dtype=float))
    with np.errstate(divide="ignore"):
        z = (np.log(t)[:, None] - mu[None, :]) / sigma[None, :]
    return ndtr(z) @ w


def triple_quantile(group: KernelGroupSummary, q) -> np.ndarray:
    """Quantiles of the rebuilt mixture (its CDF inverted on a fine log grid)."""
    q = np.atleast_1d(np.asarray(q, dtype=float))
    if ((q < 0) | (q > 1)).any() or not np.isfinite(q).all():
        raise ValueError("q must lie in [0, 1]")
    _, mu, sigma = _mixture(group)
    grid = np.exp(np.linspace((mu - 8 * sigma).min(), (mu + 8 * sigma).max(), 20001))
    F = triple_cdf(group, grid)
    return np.interp(q, F, grid)


def _w1(raw_sorted: np.ndarray, q_hat: np.ndarray) -> float:
    """W1 = integral over u of |Q(u) - Q_hat(u)|, Q the empirical quantile function."""
    return float(np.mean(np.abs(np.quantile(raw_sorted, _U) - q_hat)))


def format_errors(events, summary: KernelSummary, min_samples: int = 20) -> pd.DataFrame:
    """Errors of our sketch and of the paper's triples, per kernel group of a window.

    For each (kernel, stream, rank) with at least ``min_samples`` executions: the clusters,
    and for each format f in (sketch, triple) ``p50_err_f = |q_hat(0.5) / q(0.5) - 1|``,
    ``p99_err_f`` likewise and ``w1_f = W1(empirical, rebuilt) / mean`` (W1 on a 2,000-point
    midpoint grid of u), with ``q`` numpy's linear-interpolation quantile of the raw durations.

    Returns
    -------
    DataFrame with columns kernel, stream, rank, n, clusters, p50_err_sketch, p99_err_sketch,
    w1_sketch, p50_err_triple, p99_err_triple, w1_triple.
    """
    frame = events_frame(events)
    rows = []
    for (kernel, stream, rank), sub in frame.groupby(["name", "stream", "rank"], sort=True):
        raw = np.sort(np.maximum(sub["duration_ns"].to_numpy(dtype=float), 1.0))
        if raw.size < min_samples:
            continue
        group = summary.group(kernel, rank=int(rank), stream=stream)
        ref = np.quantile(raw, [0.5, 0.99])
        row = {"kernel": kernel, "stream": stream, "rank": int(rank), "n": raw.size,
               "clusters": len(group.clusters)}
        for label, fn in (("sketch", quantile), ("triple", triple_quantile)):
            got = fn(group, [0.5, 0.99])
            row[f"p50_err_{label}"] = float(abs(got[0] / ref[0] - 1.0))
            row[f"p99_err_{label}"] = float(abs(got[1] / ref[1] - 1.0))
            row[f"w1_{label}"] = _w1(raw, fn(group, _U)) / float(raw.mean())
        rows.append(row)
    columns = ["kernel", "stream", "rank", "n", "clusters"] + [
        f"{m}_{f}" for f in ("sketch", "triple") for m in ("p50_err", "p99_err", "w1")]
    return pd.DataFrame(rows, columns=columns)
