"""ARGUS studies on the experiment engine: the simulated scaling study and registration."""

import pandas as pd

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
