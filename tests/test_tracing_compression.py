"""Kernel-event compression: clustering, round trip, wire format, W1 against scipy."""

import numpy as np
import pandas as pd
import pytest
from scipy.stats import wasserstein_distance

from causalkit.systems.tracing import (
    KernelEvent,
    KernelGroupSummary,
    KernelSummary,
    TraceFileError,
    cdf,
    cluster_durations,
    compress,
    compression_ratio,
    cupti_scale_window,
    decompress,
    levels,
    quantile,
    round_trip_errors,
)
from causalkit.systems.tracing.compression import LEVELS
from causalkit.systems.tracing.tracefile import encode_events, encoded_size


def _mixture(rng, modes):
    return np.concatenate([m * np.exp(s * rng.standard_normal(n)) for n, m, s in modes])


def _frame(rng, kernels, rank=0):
    rows = []
    for name, modes in kernels.items():
        d = _mixture(rng, modes)
        rows.append(pd.DataFrame({"name": name, "stream": "compute", "rank": rank, "step": 0,
                                  "start_ns": np.arange(d.size) * 1000,
                                  "duration_ns": d.astype(np.int64)}))
    return pd.concat(rows, ignore_index=True)


def test_separated_modes_become_clusters():
    rng = np.random.default_rng(0)
    d = _mixture(rng, [(700, 5e3, 0.1), (300, 80e3, 0.15)])
    clusters = cluster_durations(d)
    assert [c.count for c in clusters] == [700, 300]
    # p50 is one of the sketch's 16-bit log-quantiles: ~1e-5 relative rounding
    assert clusters[0].p50 == pytest.approx(np.median(d[:700]), rel=1e-4)
    assert cluster_durations(_mixture(rng, [(500, 1e4, 0.2)]))[0].count == 500
    assert len(cluster_durations(_mixture(rng, [(500, 1e4, 0.2)]))) == 1


@pytest.mark.parametrize("seed", range(5))
def test_round_trip_keeps_p50_p99_within_5_percent(seed):
    rng = np.random.default_rng(seed)
    kernels = {"single": [(400, 2e4, 0.2)],
               "two_modes": [(300, 3e3, 0.1), (900, 6e4, 0.2)],
               "three_modes": [(500, 1e3, 0.15), (200, 2e4, 0.1), (60, 5e5, 0.3)],
               "heavy_tail": [(1000, 1e4, 0.6)]}
    frame = _frame(rng, kernels)
    summary = KernelSummary.from_bytes(compress(frame).to_bytes())
    for name in kernels:
        raw = frame.loc[frame["name"] == name, "duration_ns"].to_numpy(float)
        g = summary.group(name)
        got = quantile(g, [0.5, 0.99])
        ref = np.quantile(raw, [0.5, 0.99])
        np.testing.assert_allclose(got, ref, rtol=0.05, err_msg=name)
        # decompression has the original size and the same quantiles
        back = decompress(g)
        assert back.size == raw.size
        np.testing.assert_allclose(np.quantile(back, [0.5, 0.99]), ref, rtol=0.05)


def _clock_steps(rng, n_main, n_tail):
    """CPU-op durations as the profiler records them: 40-100 ns ops in 10 ns clock steps, plus
    a few slow calls (first call of a step, GIL taken away) that form a second cluster."""
    main = 10 * np.round(7 * np.exp(0.45 * rng.standard_normal(n_main)))
    tail = np.round(1000 * np.exp(0.3 * rng.standard_normal(n_tail)))
    return np.concatenate([main, tail])


@pytest.mark.parametrize(("seed", "n_main", "n_tail"),
                         [(0, 148, 8), (3, 148, 8), (10, 148, 8), (5, 5000, 300)])
def test_round_trip_of_durations_in_clock_steps(seed, n_main, n_tail):
    # the kernel's p50 lies inside the main cluster but not at its own p50 (the tail cluster
    # shifts it); between two knots at 70 and 80 ns an interpolated value lands between the
    # clock steps, up to 7 % off, so the kernel's levels must be knots themselves
    d = _clock_steps(np.random.default_rng(seed), n_main, n_tail)
    clusters = cluster_durations(d)
    assert len(clusters) == 2 and clusters[0].count > len(LEVELS)
    summary = KernelSummary((KernelGroupSummary("aten::resolve_conj", "compute", 0, clusters),))
    g = KernelSummary.from_bytes(summary.to_bytes()).groups[0]
    assert g.clusters == clusters and g.samples == d.size
    np.testing.assert_allclose(quantile(g, [0.5, 0.99]), np.quantile(d, [0.5, 0.99]), rtol=0.05)
    # every kernel level is a stored value (16-bit log-quantile rounding only)
    np.testing.assert_allclose(quantile(g, LEVELS), np.quantile(d, LEVELS), rtol=1e-4)
    # the clusters' own p50 and p99 stay stored values too
    main = np.sort(d)[:clusters[0].count]
    assert clusters[0].p50 == pytest.approx(np.median(main), rel=1e-4)
    assert clusters[0].p99 == pytest.approx(np.quantile(main, 0.99), rel=1e-4)


def test_round_trip_errors_match_the_quantiles():
    rng = np.random.default_rng(7)
    kernels = {"a": [(400, 2e4, 0.2)], "b": [(300, 3e3, 0.1), (900, 6e4, 0.2)],
               "rare": [(5, 1e4, 0.1)]}
    frame = _frame(rng, kernels)
    summary = compress(frame)
    errors = round_trip_errors(frame, summary).set_index("kernel")
    assert list(errors.index) == ["a", "b"] and errors.loc["b", "n"] == 1200   # rare: < 20
    raw = frame.loc[frame["name"] == "b", "duration_ns"].to_numpy(float)
    ref, got = np.quantile(raw, 0.99), quantile(summary.group("b"), 0.99)[0]
    assert errors.loc["b", "p99_err"] == pytest.approx(abs(got / ref - 1))
    assert (errors[["p50_err", "p99_err"]] < 0.05).all().all()
    window = cupti_scale_window(10_000, seed=1)
    assert window["p50_err_max"] < 0.05 and window["p99_err_max"] < 0.05


def test_cdf_and_quantile_are_inverse():
    rng = np.random.default_rng(1)
    g = KernelGroupSummary("k", "compute", 0,
                           cluster_durations(_mixture(rng, [(300, 3e3, 0.1), (200, 6e4, 0.2)])))
    q = np.linspace(0.01, 0.99, 25)
    np.testing.assert_allclose(cdf(g, quantile(g, q)), q, atol=1e-6)
    assert cdf(g, 1.0)[0] == 0.0 and cdf(g, 1e12)[0] == 1.0


def test_w1_matches_scipy_on_raw_samples():
    rng = np.random.default_rng(2)
    a = _mixture(rng, [(2000, 1e4, 0.2)])
    b = _mixture(rng, [(1500, 1e4, 0.2), (500, 5e4, 0.2)])
    ga = KernelGroupSummary("k", "compute", 0, cluster_durations(a))
    gb = KernelGroupSummary("k", "compute", 1, cluster_durations(b))
    grid = np.exp(np.linspace(np.log(min(a.min(), b.min())) - 0.05,
                              np.log(max(a.max(), b.max())) + 0.05, 4000))
    F = np.vstack([cdf(ga, grid), cdf(gb, grid)])
    w1 = levels.w1_matrix(F, grid)[0, 1]
    assert w1 == pytest.approx(wasserstein_distance(a, b), rel=0.05)


def test_mean_w1_scores_equal_matrix_row_means():
    rng = np.random.default_rng(3)
    F = np.sort(rng.uniform(size=(7, 60)), axis=1)
    grid = np.linspace(0, 5, 60)
    full = levels.w1_matrix(F, grid)
    np.testing.assert_allclose(levels.mean_w1_scores(F, grid), full.sum(1) / 6, rtol=1e-10)


def test_wire_format_round_trip_and_corruption():
    rng = np.random.default_rng(4)
    events = [KernelEvent("aten::mm", "compute", i, int(d), 0, 3)
              for i, d in enumerate(_mixture(rng, [(50, 1e4, 0.2)]))]
    s = compress(events, window_id=7)
    blob = s.to_bytes()
    back = KernelSummary.from_bytes(blob)
    assert back.window_id == 7 and back.step == 3 and back.raw_bytes == s.raw_bytes
    assert back.groups[0].clusters[0].count == 50
    with pytest.raises(TraceFileError, match="truncated|checksum"):
        KernelSummary.from_bytes(blob[: len(blob) // 2])
    flipped = bytearray(blob)
    flipped[20] ^= 0xFF
    with pytest.raises(TraceFileError, match="checksum"):
        KernelSummary.from_bytes(bytes(flipped))
    with pytest.raises(TraceFileError):
        KernelSummary.from_bytes(b"")


def test_raw_size_is_exact_and_ratio_grows_with_volume():
    rng = np.random.default_rng(5)
    frame = _frame(rng, {'gloo:"all"': [(30, 1e5, 0.1)], "aten::é": [(40, 1e3, 0.3)]}, rank=12)
    assert encoded_size(frame) == len(encode_events(frame))
    summary = compress(frame)
    assert summary.raw_bytes == len(encode_events(frame))
    assert compression_ratio(frame, summary) == pytest.approx(compression_ratio(summary))
    big = cupti_scale_window(50_000, seed=0)
    assert big["simulated"] and big["ratio"] > 1000


def test_bad_input():
    with pytest.raises(ValueError, match="empty"):
        compress([])
    with pytest.raises(ValueError, match="empty"):
        cluster_durations([])
    with pytest.raises(ValueError, match="non-negative"):
        cluster_durations([1.0, -2.0])
    with pytest.raises(TypeError, match="KernelEvent"):
        compress([{"name": "x"}])
    with pytest.raises(ValueError, match="missing columns"):
        compress(pd.DataFrame({"name": ["x"]}))
    with pytest.raises(ValueError, match=r"q must lie"):
        quantile(KernelGroupSummary("k", "c", 0, cluster_durations([1.0, 2.0])), 1.5)
