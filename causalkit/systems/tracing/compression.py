"""Kernel-event compression: log-duration clustering at density valleys, a quantile sketch each.

For every (rank, kernel, stream) in a window the durations d are log-transformed, x = ln d, and a
Gaussian kernel density with Scott's bandwidth

    h = 1.06 * sd(x) * n^(-1/5)

is evaluated on a 256-point grid over [min x - pad, max x + pad], pad = max(0.05 (max - min), 0.05).
The sorted sample is split at local minima ("valleys") of the density, keeping a valley only if at
least ``min_samples_per_side`` samples lie on each side and it is at least ``min_log_gap`` (log
units) from the previous boundary. Each cluster keeps its count and a small quantile sketch:
ln Q(u) at the fixed levels :data:`LEVELS` (min, p50, p99 and max among them), or all its order
statistics when it has no more samples than levels. One log-normal per cluster fitted to
(p50, p99) does not reproduce the tail of heavy-tailed CPU op times; the sketch does.

A sketched cluster of a kernel with several clusters also keeps the kernel's own quantiles at
:data:`LEVELS` that fall inside it (:func:`_knot_levels`). Without them the kernel's p50 sits at a
within-cluster position between two knots and is interpolated, and interpolation is wrong for
durations measured in clock steps: CPU ops of 40-100 ns come in 10 ns steps, so the quantile
function is a staircase and a value interpolated between knots at 70 and 80 ns lands between
the steps, up to a whole step (14 % of 70 ns) off the true quantile. With those knots every
kernel quantile at :data:`LEVELS` is a stored value (or exact anyway: between two clusters, or
in a cluster that keeps every order statistic), whatever the ties and however the clusters
split the sample. The knots' levels follow from the cluster counts, so the wire format does
not carry them.

Decompression answers a cluster's quantile at within-cluster position u by monotone (PCHIP)
interpolation of ln Q(u) between the stored levels (exact linear interpolation for clusters that
kept every order statistic). The clusters are disjoint, ordered intervals holding count_k samples
each, so the kernel's quantile function is their concatenation: position h = (n - 1) q of the
sorted sample falls in one cluster (answered at u = (h - offset_k) / (count_k - 1)) or between
two (linear interpolation across the gap, exact). The CDF used for distances is the inverse of
that quantile function.

Reference: Zhou et al. (2026), "ARGUS: Production-Scale Tracing and Performance Diagnosis for over
10,000-GPU Clusters", arXiv 2606.20374, section 5 (KDE compression); constants follow the public
reimplementation's defaults (256-point grid, 3 samples per side, 0.15 log gap).
"""

from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy.special import ndtri

from causalkit._validation import check_positive_int
from causalkit.systems.tracing.events import KernelEvent, TraceFileError

__all__ = [
    "ClusterStats",
    "KernelGroupSummary",
    "KernelSummary",
    "cluster_durations",
    "compress",
    "decompress",
    "cdf",
    "quantile",
    "compression_ratio",
    "round_trip_errors",
    "events_frame",
]

_Z99 = float(ndtri(0.99))
_HIST_BINS = 2048
_MAGIC = b"AKS3"
_HEADER = struct.Struct("<4sqqQI")      # magic, window_id, step, raw_bytes, n_groups
_GROUP = struct.Struct("<IHBH")         # rank, len(kernel), len(stream), n_clusters
_CLUSTER = struct.Struct("<Iff")        # count, ln min, ln max (12 bytes); uint16 knots follow
_CODE_MAX = 65535
_EVENT_COLUMNS = ("name", "stream", "rank", "step", "start_ns", "duration_ns")
#: Quantile levels of the sketch: within each cluster with more samples than levels, and the
#: kernel's own levels (:func:`_knot_levels`).
LEVELS = (0.0, 0.005, 0.01, 0.02, 0.03, 0.05, 0.075, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.45,
          0.5, 0.55, 0.6, 0.65, 0.7, 0.75, 0.8, 0.85, 0.9, 0.925, 0.95, 0.96, 0.97, 0.98, 0.985,
          0.99, 0.995, 1.0)
_LEVELS = np.asarray(LEVELS)
_ANCHORS = np.array([0.0, 0.5, 0.99, 1.0])     # a cluster's own min, p50, p99, max


def _levels(count: int) -> np.ndarray:
    """Quantile levels a cluster of ``count`` samples keeps on its own: :data:`LEVELS`, or every
    order statistic (positions i / (count - 1)) when there are no more samples than levels."""
    if count > _LEVELS.size:
        return _LEVELS
    return np.linspace(0.0, 1.0, count) if count > 1 else np.zeros(1)


def _knot_levels(counts) -> tuple[np.ndarray, ...]:
    """Within-cluster quantile levels kept by each cluster of a kernel.

    Parameters
    ----------
    counts : sequence of int
        Sample counts of the kernel's clusters, in duration order.

    Returns
    -------
    tuple of ndarray
        Per cluster, the increasing levels u in [0, 1] of its sketch. A cluster with at most
        ``len(LEVELS)`` samples keeps every order statistic. A larger one keeps :data:`LEVELS`
        and, when the kernel has several clusters, the within-cluster positions
        u = ((n - 1) q - offset) / (count - 1) of the kernel's levels q in :data:`LEVELS` that
        fall strictly inside it (n: the kernel's sample count, offset: the samples in shorter
        clusters), so that :func:`quantile` answers every such q from a stored value. A kernel
        level closer to one of the cluster's own levels than half the gap to that level's
        neighbours replaces it (the own min, p50, p99 and max always stay), so a cluster
        holding most of its kernel keeps about ``len(LEVELS)`` knots.
        Encoder and decoder both derive the levels from the counts, so they are not stored.
    """
    counts = np.asarray(counts, dtype=np.int64)
    offsets = np.cumsum(counts) - counts
    positions = (counts.sum() - 1) * _LEVELS
    half_gap = np.minimum(np.diff(_LEVELS, prepend=-np.inf), np.diff(_LEVELS, append=np.inf)) / 2
    out = []
    for count, offset in zip(counts, offsets, strict=True):
        own = _levels(int(count))
        if count > _LEVELS.size and counts.size > 1:
            pos = positions - offset
            extra = pos[(pos > 0) & (pos < count - 1)] / (count - 1)
            dist = np.abs(own[:, None] - extra[None, :]).min(axis=1, initial=np.inf)
            own = own[(dist >= half_gap) | np.isin(own, _ANCHORS)]
            extra = extra[np.abs(extra[:, None] - own[None, :]).min(axis=1) > 1e-9]
            own = np.union1d(own, extra)
        out.append(own)
    return tuple(out)


def _to_codes(log_lo: float, log_hi: float, inner) -> np.ndarray:
    """Inner log-quantiles as uint16 fractions of [log_lo, log_hi] (rounding is monotone)."""
    span = log_hi - log_lo
    if span <= 0:
        return np.zeros(len(inner), dtype=np.uint16)
    frac = np.clip((np.asarray(inner, dtype=float) - log_lo) / span, 0.0, 1.0)
    return np.rint(frac * _CODE_MAX).astype(np.uint16)


def _from_codes(log_lo: float, log_hi: float, codes) -> tuple[float, ...]:
    return tuple(float(log_lo + (log_hi - log_lo) * c / _CODE_MAX) for c in codes)


@dataclass(frozen=True, slots=True)
class ClusterStats:
    """One duration mode of a kernel: its sample count and a quantile sketch.

    ``log_q`` holds ln of the cluster's quantiles (numpy's linear-interpolation convention, on
    the durations) at ``levels`` (``_knot_levels``): the fixed
    ``causalkit.systems.tracing.compression.LEVELS`` (33 levels from min to max, denser in both
    tails) plus the positions of the kernel's own levels inside the cluster, or every order
    statistic of a cluster with at most ``len(LEVELS)`` samples.
    On the wire the min and max are float32 and the inner values uint16 fractions of
    [min, max] in log space (at most ``(ln max - ln min) / 131070`` off), 12 + 2 (k - 2) bytes
    for k levels.
    """

    count: int
    log_q: tuple[float, ...]
    levels: tuple[float, ...]

    @property
    def log_lo(self) -> float:
        """ln of the cluster's shortest duration."""
        return self.log_q[0]

    @property
    def log_hi(self) -> float:
        """ln of the cluster's longest duration."""
        return self.log_q[-1]

    @property
    def p50(self) -> float:
        """Median duration of the cluster."""
        return float(_within(self, np.array([0.5]))[0])

    @property
    def p99(self) -> float:
        """99th percentile of the cluster's durations."""
        return float(_within(self, np.array([0.99]))[0])

    @property
    def mu(self) -> float:
        """Log-normal location of the cluster, ln p50 (used to calibrate simulated streams)."""
        return float(np.log(self.p50))

    @property
    def sigma(self) -> float:
        """Log-normal scale of the cluster, (ln p99 - ln p50) / z_0.99."""
        return float(max(np.log(self.p99) - np.log(self.p50), 0.0) / _Z99)


@dataclass(frozen=True, slots=True)
class KernelGroupSummary:
    """Compressed durations (nanoseconds) of one kernel on one stream of one rank."""

    kernel: str
    stream: str
    rank: int
    clusters: tuple[ClusterStats, ...]

    @property
    def samples(self) -> int:
        """Number of kernel executions summarised."""
        return int(sum(c.count for c in self.clusters))

    @property
    def primary(self) -> ClusterStats:
        """The cluster with the most samples."""
        return max(self.clusters, key=lambda c: c.count)


@dataclass(frozen=True)
class KernelSummary:
    """All kernel groups of one window, with the raw (Chrome-trace JSON) size they replace."""

    groups: tuple[KernelGroupSummary, ...]
    raw_bytes: int = 0
    window_id: int = 0
    step: int = 0

    def to_bytes(self) -> bytes:
        """Binary wire format: header, groups, CRC-32. A group is its header, name, stream,
        the (count, ln min, ln max) of each cluster, then each cluster's uint16 inner knots (as
        many as ``_knot_levels`` gives for the counts, less the two ends)."""
        parts = [_HEADER.pack(_MAGIC, self.window_id, self.step, self.raw_bytes, len(self.groups))]
        for g in self.groups:
            name, stream = g.kernel.encode(), g.stream.encode()
            parts.append(_GROUP.pack(g.rank, len(name), len(stream), len(g.clusters)))
            parts.append(name + stream)
            parts.extend(_CLUSTER.pack(c.count, c.log_lo, c.log_hi) for c in g.clusters)
            parts.extend(_to_codes(c.log_lo, c.log_hi, c.log_q[1:-1]).astype("<u2").tobytes()
                         for c in g.clusters)
        body = b"".join(parts)
        return body + struct.pack("<I", zlib.crc32(body))

    @classmethod
    def from_bytes(cls, blob: bytes) -> KernelSummary:
        """Parse :meth:`to_bytes` output; raises :class:`TraceFileError` if corrupt or truncated."""
        if not isinstance(blob, (bytes, bytearray, memoryview)):
            raise TypeError(f"blob must be bytes; got {type(blob).__name__}")
        blob = bytes(blob)
        if len(blob) < _HEADER.size + 4:
            raise TraceFileError(f"kernel summary truncated: {len(blob)} bytes")
        body, (crc,) = blob[:-4], struct.unpack("<I", blob[-4:])
        if zlib.crc32(body) != crc:
            raise TraceFileError("kernel summary corrupt: checksum mismatch")
        magic, window_id, step, raw_bytes, n_groups = _HEADER.unpack_from(body, 0)
        if magic != _MAGIC:
            raise TraceFileError(f"not a kernel summary (magic {magic!r})")
        pos, groups = _HEADER.size, []
        try:
            for _ in range(n_groups):
                rank, n_name, n_stream, n_clusters = _GROUP.unpack_from(body, pos)
                pos += _GROUP.size
                name = body[pos:pos + n_name].decode()
                stream = body[pos + n_name:pos + n_name + n_stream].decode()
                pos += n_name + n_stream
                heads = []
                for _ in range(n_clusters):
                    heads.append(_CLUSTER.unpack_from(body, pos))
                    pos += _CLUSTER.size
                    if heads[-1][0] == 0 or heads[-1][2] < heads[-1][1]:
                        raise struct.error("bad cluster record")
                clusters = []
                for (count, log_lo, log_hi), levels in zip(
                        heads, _knot_levels([h[0] for h in heads]), strict=True):
                    n_inner = max(levels.size - 2, 0)
                    if pos + 2 * n_inner > len(body):
                        raise struct.error("bad cluster record")
                    codes = np.frombuffer(body, dtype="<u2", count=n_inner, offset=pos)
                    pos += 2 * n_inner
                    log_q = (log_lo,) if count == 1 else \
                        (log_lo, *_from_codes(log_lo, log_hi, codes), log_hi)
                    clusters.append(ClusterStats(count, log_q, tuple(levels.tolist())))
                groups.append(KernelGroupSummary(name, stream, rank, tuple(clusters)))
        except (struct.error, UnicodeDecodeError, ValueError) as exc:
            raise TraceFileError(f"kernel summary corrupt: {exc}") from exc
        if pos != len(body):
            raise TraceFileError("kernel summary corrupt: trailing bytes")
        return cls(tuple(groups), raw_bytes=raw_bytes, window_id=window_id, step=step)

    @property
    def summary_bytes(self) -> int:
        """Size of the binary summary (what is uploaded to the metrics store)."""
        return len(self.to_bytes())

    @property
    def n_clusters(self) -> int:
        return sum(len(g.clusters) for g in self.groups)

    def group(self, kernel: str, *, rank: int | None = None,
              stream: str | None = None) -> KernelGroupSummary:
        """The summary of ``kernel`` (on ``rank`` / ``stream`` when several match)."""
        found = [g for g in self.groups if g.kernel == kernel
                 and (rank is None or g.rank == rank) and (stream is None or g.stream == stream)]
        if len(found) != 1:
            raise KeyError(f"{len(found)} kernel groups match kernel={kernel!r}, rank={rank}, "
                           f"stream={stream!r}")
        return found[0]


def cluster_durations(durations, *, grid_size: int = 256, min_samples_per_side: int = 3,
                      min_log_gap: float = 0.15) -> tuple[ClusterStats, ...]:
    """Split positive durations into log-duration modes at KDE density valleys.

    Parameters
    ----------
    durations : array-like of float
        Positive durations (any unit; the summary keeps that unit). Values below 1 are raised
        to 1 (the profiler's resolution is 1 ns).
    grid_size : int
        Points of the density grid.
    min_samples_per_side : int
        A valley splits only if each side keeps at least this many samples.
    min_log_gap : float
        Minimum distance, in log units, between consecutive boundaries.

    Returns
    -------
    tuple of ClusterStats, ordered by duration.
    """
    d = np.asarray(durations, dtype=float).ravel()
    if d.size == 0:
        raise ValueError("durations is empty: nothing to compress")
    if not np.isfinite(d).all() or (d < 0).any():
        raise ValueError("durations must be finite and non-negative")
    grid_size = check_positive_int(grid_size, "grid_size", minimum=3)
    m = check_positive_int(min_samples_per_side, "min_samples_per_side")
    x = np.sort(np.log(np.maximum(d, 1.0)))
    n, lo, hi = x.size, x[0], x[-1]
    cuts: list[int] = []
    if n >= 2 * m and hi - lo >= min_log_gap:
        h = 1.06 * x.std(ddof=1) * n ** -0.2
        pad = max(0.05 * (hi - lo), 0.05)
        grid = lo - pad + (hi - lo + 2 * pad) * (np.arange(grid_size) / (grid_size - 1))
        if n <= _HIST_BINS:             # exact KDE
            centres, weights = x, np.ones(n)
        else:                           # linear binning, bin width (max - min) / 2048
            idx = np.minimum(((x - lo) / (hi - lo) * _HIST_BINS).astype(int), _HIST_BINS - 1)
            weights = np.bincount(idx, minlength=_HIST_BINS).astype(float)
            centres = lo + (np.arange(_HIST_BINS) + 0.5) * (hi - lo) / _HIST_BINS
            keep = weights > 0
            centres, weights = centres[keep], weights[keep]
        dens = np.exp(-0.5 * ((grid[:, None] - centres[None, :]) / h) ** 2) @ weights
        inner = np.flatnonzero((dens[1:-1] < dens[:-2]) & (dens[1:-1] <= dens[2:])) + 1
        previous, prev_pos = lo, 0
        for v in grid[inner]:
            pos = int(np.searchsorted(x, v))
            if pos - prev_pos >= m and n - pos >= m and v - previous >= min_log_gap:
                cuts.append(pos)
                previous, prev_pos = v, pos
    segments = np.split(x, cuts)
    return tuple(_sketch(seg, levels) for seg, levels in
                 zip(segments, _knot_levels([seg.size for seg in segments]), strict=True))


def _sketch(seg: np.ndarray, levels: np.ndarray) -> ClusterStats:
    """Cluster of sorted log-durations ``seg`` -> count and ln quantiles at ``levels``, already
    rounded as the wire format stores them (so a serialised summary reads back identically)."""
    lo, hi = float(np.float32(seg[0])), float(np.float32(seg[-1]))
    kept = tuple(levels.tolist())
    if seg.size == 1:
        return ClusterStats(1, (lo,), kept)
    inner = np.log(_sorted_quantiles(np.exp(seg), levels[1:-1]))
    return ClusterStats(int(seg.size), (lo, *_from_codes(lo, hi, _to_codes(lo, hi, inner)), hi),
                        kept)


def _sorted_quantiles(s: np.ndarray, qs) -> np.ndarray:
    """Linear-interpolation quantiles (numpy's default) of an already sorted array (the
    durations themselves, not their logs, so a cluster's p50/p99 are the usual ones)."""
    h = (s.size - 1) * np.asarray(qs, dtype=float)
    lo = np.floor(h).astype(int)
    hi = np.minimum(lo + 1, s.size - 1)
    return s[lo] + (h - lo) * (s[hi] - s[lo])


def events_frame(events) -> pd.DataFrame:
    """Kernel events as a DataFrame with columns name, stream, rank, step, start_ns, duration_ns.

    Accepts a sequence of :class:`KernelEvent` or a DataFrame that already has those columns.
    """
    if isinstance(events, pd.DataFrame):
        missing = [c for c in _EVENT_COLUMNS if c not in events.columns]
        if missing:
            raise ValueError(f"events is missing columns {missing}")
        frame = events.loc[:, list(_EVENT_COLUMNS)]
    else:
        events = list(events)
        bad = [type(e).__name__ for e in events if not isinstance(e, KernelEvent)]
        if bad:
            raise TypeError(f"events must be KernelEvent records; got {sorted(set(bad))}")
        frame = pd.DataFrame([(e.name, e.stream, e.rank, e.step, e.start_ns, e.duration_ns)
                              for e in events], columns=list(_EVENT_COLUMNS))
    if (pd.to_numeric(frame["duration_ns"], errors="coerce").fillna(-1) < 0).any():
        raise ValueError("events has negative or missing duration_ns")
    return frame


def compress(events, *, window_id: int = 0, raw_bytes: int | None = None,
             **cluster_kwargs) -> KernelSummary:
    """Compress a window of kernel events into per-(rank, kernel, stream) cluster summaries.

    Parameters
    ----------
    events : sequence of KernelEvent or DataFrame
        The window's events (see ``causalkit.systems.tracing.compression.events_frame``).
    window_id : int
        Identifier stored in the summary.
    raw_bytes : int, optional
        Size of the raw trace the summary replaces; by default the size of the events encoded as
        Chrome-trace JSON (``causalkit.systems.tracing.tracefile.encoded_size``).
    **cluster_kwargs
        Passed to :func:`cluster_durations`.

    Returns
    -------
    KernelSummary
    """
    from causalkit.systems.tracing.tracefile import encoded_size

    frame = events_frame(events)
    if frame.empty:
        raise ValueError("events is empty: an empty window has nothing to compress")
    if raw_bytes is None:
        raw_bytes = encoded_size(frame)
    keys = pd.MultiIndex.from_frame(frame[["rank", "name", "stream"]])
    codes, uniques = pd.factorize(keys, sort=True)
    order = np.argsort(codes, kind="stable")
    bounds = np.flatnonzero(np.diff(codes[order])) + 1
    durations = frame["duration_ns"].to_numpy(dtype=float)[order]
    groups = tuple(KernelGroupSummary(str(name), str(stream), int(rank),
                                      cluster_durations(chunk, **cluster_kwargs))
                   for (rank, name, stream), chunk in zip(uniques, np.split(durations, bounds),
                                                          strict=True))
    return KernelSummary(groups, raw_bytes=int(raw_bytes), window_id=int(window_id),
                         step=int(frame["step"].min()))


_U_GRID = np.linspace(0.0, 1.0, 4097)


def _within(c: ClusterStats, u: np.ndarray) -> np.ndarray:
    """Quantile of one cluster at within-cluster position u in [0, 1] (0: min, 1: max).

    A cluster that kept every order statistic is answered exactly: linear interpolation of the
    durations between consecutive order statistics (numpy's convention). A sketched cluster
    interpolates ln Q(u) between its levels with a monotone piecewise-cubic Hermite
    interpolant (PCHIP, Fritsch and Carlson 1980), so the reconstruction is non-decreasing, hits
    every stored quantile exactly and stays inside [min, max].
    """
    if c.count == 1:
        return np.full(np.shape(u), np.exp(c.log_lo))
    levels, log_q = np.asarray(c.levels), np.asarray(c.log_q)
    if c.count <= _LEVELS.size:
        return np.interp(u, levels, np.exp(log_q))
    return np.exp(_pchip(levels, log_q, u))


def _pchip(x: np.ndarray, y: np.ndarray, t: np.ndarray) -> np.ndarray:
    """Monotone cubic interpolation of the knots (x, y) at t (``scipy``'s PCHIP)."""
    from scipy.interpolate import PchipInterpolator

    return np.clip(PchipInterpolator(x, y)(np.clip(t, x[0], x[-1])), y[0], y[-1])


def quantile(group: KernelGroupSummary, q) -> np.ndarray:
    """Reconstructed quantiles of a kernel's durations, for q in [0, 1].

    With the linear-interpolation convention of :func:`numpy.quantile`, q sits at position
    h = (n - 1) q of the sorted sample; the cluster holding that position answers with its
    within-cluster quantile, and a position between two clusters interpolates linearly between
    the lower cluster's max and the upper cluster's min.
    """
    _check_group(group)
    q = np.atleast_1d(np.asarray(q, dtype=float))
    if ((q < 0) | (q > 1)).any() or not np.isfinite(q).all():
        raise ValueError("q must lie in [0, 1]")
    counts = np.array([c.count for c in group.clusters])
    offsets = np.cumsum(counts) - counts
    h = (counts.sum() - 1) * q
    k = np.searchsorted(offsets, h, side="right") - 1
    out = np.empty(q.size)
    for j, c in enumerate(group.clusters):
        sel = k == j
        if not sel.any():
            continue
        pos = h[sel] - offsets[j]
        inside = pos <= c.count - 1
        u = np.where(inside, pos / max(c.count - 1, 1), 1.0)
        value = _within(c, u)
        if j + 1 < len(group.clusters):
            frac = np.clip(pos - (c.count - 1), 0.0, 1.0)
            gap = np.exp(c.log_hi) + frac * (np.exp(group.clusters[j + 1].log_lo)
                                             - np.exp(c.log_hi))
            value = np.where(inside, value, gap)
        out[sel] = value
    return out


def cdf(group: KernelGroupSummary, t) -> np.ndarray:
    """Reconstructed CDF of a kernel's durations at ``t``: the inverse of :func:`quantile`."""
    t = np.atleast_1d(np.asarray(t, dtype=float))
    return np.interp(t, quantile(group, _U_GRID), _U_GRID, left=0.0, right=1.0)


def decompress(group: KernelGroupSummary) -> np.ndarray:
    """A reconstructed sample of the original size: the quantiles at the order-statistic
    positions i / (n - 1)."""
    n = group.samples if isinstance(group, KernelGroupSummary) else 0
    return quantile(group, np.arange(n) / max(n - 1, 1))


def compression_ratio(raw, summary: KernelSummary | None = None) -> float:
    """Raw trace bytes / summary bytes.

    ``compression_ratio(summary)`` uses the raw size stored in the summary;
    ``compression_ratio(events, summary)`` re-encodes ``events`` as Chrome-trace JSON.
    """
    if isinstance(raw, KernelSummary) and summary is None:
        summary, raw_bytes = raw, raw.raw_bytes
    elif isinstance(summary, KernelSummary):
        from causalkit.systems.tracing.tracefile import encoded_size
        raw_bytes = encoded_size(events_frame(raw))
    else:
        raise TypeError("compression_ratio needs a KernelSummary")
    return float(raw_bytes) / summary.summary_bytes


def round_trip_errors(events, summary: KernelSummary, min_samples: int = 20) -> pd.DataFrame:
    """Relative errors of the reconstructed median and 99th percentile, per kernel group.

    For each (kernel, stream, rank) of ``events`` with at least ``min_samples`` executions:
    ``p50_err = |q_hat(0.5) / q(0.5) - 1|`` and likewise ``p99_err``, with ``q`` the empirical
    quantile of the raw durations (``numpy.quantile``, linear interpolation) and ``q_hat``
    :func:`quantile` of the group's summary.

    Returns
    -------
    DataFrame with columns kernel, stream, rank, n, p50_err, p99_err.
    """
    frame = events_frame(events)
    rows = []
    for (kernel, stream, rank), sub in frame.groupby(["name", "stream", "rank"], sort=True):
        raw = sub["duration_ns"].to_numpy(dtype=float)
        if raw.size < min_samples:
            continue
        ref = np.quantile(raw, [0.5, 0.99])
        got = quantile(summary.group(kernel, rank=int(rank), stream=stream), [0.5, 0.99])
        with np.errstate(divide="ignore", invalid="ignore"):
            err = np.abs(got / ref - 1.0)
        rows.append({"kernel": kernel, "stream": stream, "rank": int(rank), "n": raw.size,
                     "p50_err": float(err[0]), "p99_err": float(err[1])})
    return pd.DataFrame(rows, columns=["kernel", "stream", "rank", "n", "p50_err", "p99_err"])


def _check_group(group) -> None:
    if not isinstance(group, KernelGroupSummary):
        raise TypeError(f"expected a KernelGroupSummary; got {type(group).__name__}")
    if not group.clusters:
        raise ValueError(f"kernel group {group.kernel!r} has no clusters")
