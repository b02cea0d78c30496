"""LiveR studies on the experiment engine: registration, the per-mode summary, and (slow) a
quick real run that resumes from its store."""

import numpy as np
import pandas as pd
import pytest

from causalkit.studies import STUDIES
from causalkit.systems.elastic import studies


def test_studies_are_registered():
    assert STUDIES["liver-downtime"] == ("causalkit.systems.elastic.studies", "downtime")
    assert STUDIES["liver-scaling"] == ("causalkit.systems.elastic.studies", "scaling")


def test_summarize_modes_matches_direct_computation():
    rng = np.random.default_rng(0)
    events = pd.DataFrame({"part": "downtime", "mode": np.repeat(["live", "restart"], 6),
                           "rep": np.tile([0, 0, 0, 1, 1, 1], 2),
                           "downtime_s": rng.exponential(size=12), "pause_s": rng.random(12),
                           "goodput": rng.random(12), "load_average_1min": rng.random(12)})
    table = studies.summarize_modes(events).set_index("mode")
    for mode, sub in events.groupby("mode"):
        assert table.loc[mode, "runs"] == 2 and table.loc[mode, "events"] == 6
        assert table.loc[mode, "downtime_mean_s"] == pytest.approx(sub.downtime_s.mean())
        assert table.loc[mode, "downtime_sd_s"] == pytest.approx(sub.downtime_s.std(ddof=1))
        assert table.loc[mode, "downtime_median_s"] == pytest.approx(sub.downtime_s.median())


@pytest.mark.slow
def test_quick_downtime_study_live_beats_restart_and_resumes(tmp_path):
    out = tmp_path / "liver-downtime.jsonl"
    table = studies.downtime(out=out, quick=True).set_index("mode")
    # a live resize pauses training for a step boundary; a restart relaunches every process
    assert table.loc["live", "downtime_mean_s"] < table.loc["restart", "downtime_mean_s"]
    assert (table["events"] == 1).all() and not table["simulated"].any()
    again = studies.downtime(out=out, quick=True).set_index("mode")   # read back, not rerun
    pd.testing.assert_frame_equal(again, table)
