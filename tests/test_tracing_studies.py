"""ARGUS studies on the experiment engine: the simulated scaling study and registration."""

import pandas as pd
import pytest

from causalkit.studies import STUDIES
from causalkit.systems.tracing import studies


def test_argus_studies_are_registered():
    for name in ("cases", "calibration", "overhead", "scaling"):
        assert STUDIES[f"argus-{name}"] == ("causalkit.systems.tracing.studies", name)


def test_scaling_study_finds_the_planted_fault_and_resumes(tmp_path):
    out = tmp_path / "scaling.jsonl"
    runs = studies.scaling_runs(out=out, quick=True)
    assert len(runs) == 4 and runs["simulated"].all()
    # the simulated job has one straggler or one degraded expert group, and finds it exactly
    assert (runs["precision"] == 1).all() and (runs["recall"] == 1).all()
    assert set(runs["n_ranks"]) == {64, 256}
    again = studies.scaling_runs(out=out, quick=True)      # read back, not rerun
    pd.testing.assert_frame_equal(again, runs)


def test_choose_phase_rel_takes_the_smallest_value_within_the_false_alarm_target():
    import numpy as np
    import pytest

    from causalkit.exceptions import CausalkitWarning
    from causalkit.systems.tracing.calibration import PHASE_REL_GRID, choose_phase_rel

    grid = np.sort(PHASE_REL_GRID)
    # run k alarms at every grid value below grid[k]: rates 1, 3/4, 2/4, 1/4, 0, 0, ...
    alarms = np.array([[value < grid[k] for value in grid] for k in (1, 2, 3, 4)])
    phase_rel, table = choose_phase_rel(alarms, max_false_alarm=0.1)
    assert phase_rel == grid[4] and table["runs"].eq(4).all()
    np.testing.assert_allclose(table["false_alarm_rate"][:5], [1, 0.75, 0.5, 0.25, 0])
    assert choose_phase_rel(alarms, max_false_alarm=0.25)[0] == grid[3]
    with pytest.warns(CausalkitWarning, match="returning the largest"):
        assert choose_phase_rel(np.ones_like(alarms))[0] == grid[-1]
    with pytest.raises(ValueError, match="alarms"):
        choose_phase_rel(alarms[:, :3])


def _lognormal_window(rng, n=400):
    import numpy as np

    d = np.concatenate([rng.lognormal(np.log(2e4), 0.1, n // 2),
                        rng.lognormal(np.log(4e5), 0.2, n // 2)]).astype(np.int64)
    return pd.DataFrame({"name": "k", "stream": "compute", "rank": 0, "step": 0,
                         "start_ns": np.cumsum(d) - d, "duration_ns": d})


def test_format_rows_and_their_summary():
    import numpy as np
    from scipy.stats import lognorm

    from causalkit.systems.tracing import compress
    from causalkit.systems.tracing.triples import TRIPLE_BYTES, triple_bytes, triple_cdf

    rng = np.random.default_rng(3)
    windows, kernels = [], []
    for w in range(3):
        events = _lognormal_window(rng)
        summary = compress(events, window_id=w)
        row, rows = studies.format_rows("synthetic", events, summary)
        # two clusters: the triple format is the sketch's headers plus 24 bytes per cluster
        assert summary.n_clusters == 2
        assert row["triple_bytes"] == len(triple_bytes(summary))
        head = len(triple_bytes(summary)) - 2 * TRIPLE_BYTES
        assert row["sketch_bytes"] - head == sum(12 + 2 * (len(c.levels) - 2)
                                                 for c in summary.groups[0].clusters)
        windows.append(row)
        kernels += rows
        # the triple's reconstruction is the count-weighted mixture of log-normals fitted to
        # (p50, p99) of each cluster (an independent scipy reference)
        c = summary.groups[0].clusters
        t = np.array([1.5e4, 2e4, 3e5, 5e5])
        ref = sum(k.count / 400 * lognorm.cdf(t, s=k.sigma, scale=k.p50) for k in c)
        np.testing.assert_allclose(triple_cdf(summary.groups[0], t), ref, rtol=1e-9)
    table = studies.summarize_formats(pd.DataFrame(windows), pd.DataFrame(kernels))
    assert list(table["format"]) == ["sketch", "triple"]
    raw = sum(w["raw_bytes"] for w in windows)
    for f in ("sketch", "triple"):
        got = table.set_index("format").loc[f]
        assert got["ratio"] == pytest.approx(raw / sum(w[f"{f}_bytes"] for w in windows))
        assert got["kernel_groups"] == 3
    # two well-separated log-normal modes: both formats get the median within a few percent;
    # the sketch keeps the quantiles themselves and is tighter on the whole distribution
    sk, tr = table.set_index("format").loc["sketch"], table.set_index("format").loc["triple"]
    assert sk["p50_err_max"] < 1e-3 and sk["w1_max"] < tr["w1_max"]


@pytest.mark.slow
def test_compression_formats_study_on_real_windows(tmp_path):
    table = studies.compression_formats(out=tmp_path / "formats.jsonl", quick=True)
    assert set(table["source"]) == {"tracer windows (2-rank gloo run)",
                                    "torch.profiler export (CPU)"}
    assert (table["ratio"] > 1).all() and not table["simulated"].any()
