"""Threshold calibration on healthy runs: simulated stores with a known persistent asymmetry."""

import pytest

from causalkit.exceptions import CausalkitWarning
from causalkit.systems.tracing import (
    SyntheticCluster,
    TrainingExperiment,
    calibrate_phase_rel,
    diagnose,
)


def _asymmetric(seeds, severity=1.3):
    """Healthy-by-construction runs in which the last rank's MLP is ``severity`` times slower
    all along (a host asymmetry, not a fault the job should be paged for)."""
    return [SyntheticCluster(8, steps=24, fault="compute_straggler", severity=severity,
                             fault_step=0, seed=s).generate() for s in seeds]


def test_calibration_clears_a_persistent_asymmetry_and_keeps_real_stragglers():
    calibration = _asymmetric(range(5))
    phase_rel, table = calibrate_phase_rel(calibration, max_false_alarm=0.1)
    # the reference default reads the +30 % asymmetry as a straggler in every run
    assert table.loc[table["phase_rel"] == 0.15, "false_alarm_rate"].item() == 1.0
    assert phase_rel > 0.3
    assert table.loc[table["phase_rel"] == phase_rel, "false_alarm_rate"].item() <= 0.1
    assert (table.loc[table["phase_rel"] < phase_rel, "false_alarm_rate"] > 0.1).all()
    # on fresh runs: the asymmetry stays quiet, a 3x straggler is still named
    fresh = _asymmetric(range(100, 105))
    assert sum(bool(diagnose(s, phase_rel=phase_rel).culprits) for s in fresh) <= 1
    strong = SyntheticCluster(8, steps=24, fault="compute_straggler", severity=3.0, seed=7)
    found = {(f.kind, f.rank) for f in diagnose(strong.generate(), phase_rel=phase_rel).culprits}
    assert found == {("compute_straggler", strong.faulty_rank)}


def test_calibration_input_checks():
    stores = _asymmetric([0])
    with pytest.raises(ValueError, match="stores"):
        calibrate_phase_rel([])
    with pytest.raises(ValueError, match="grid"):
        calibrate_phase_rel(stores, grid=(0.0, 0.2))
    with pytest.raises(ValueError, match="max_false_alarm"):
        calibrate_phase_rel(stores, max_false_alarm=1.0)
    with pytest.raises(TypeError, match="phase_rel"):
        calibrate_phase_rel(stores, phase_rel=0.2)
    with pytest.warns(CausalkitWarning, match="largest"):
        value, _ = calibrate_phase_rel(_asymmetric([0], severity=3.0), grid=(0.15, 0.2))
    assert value == 0.2
    with pytest.raises(ValueError, match="diagnose_options"):
        TrainingExperiment(diagnose_options={"phase_rell": 0.3})
