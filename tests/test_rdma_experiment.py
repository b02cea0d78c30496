"""Experiment drivers, overhead measurement and the command line (small sizes)."""

import numpy as np
import pytest

from causalkit.systems.rdma import (
    FailoverExperiment,
    FailoverTrainingExperiment,
    measure_datapath_overhead,
)


def test_failover_experiment_rows_and_series():
    exp = FailoverExperiment(fault="nic_down", iterations=6, n_elems=3000, n_hosts=3,
                             timeout=11, retry_cnt=4, op_timeout=3, sample_interval=0.02)
    df = exp.run()
    assert list(df["shift"]) == [False, True] and df["emulated"].all()
    plain, shift = df.iloc[0], df.iloc[1]
    assert not plain["completed"] and not plain["correct"] and plain["error"]
    assert shift["completed"] and shift["correct"] and shift["failovers"] >= 1
    assert 0 < shift["downtime_s"] < shift["max_gap_s"]
    assert shift["detect_s"] > 0
    assert {"t", "throughput_MBps", "shift", "rep"} <= set(exp.timeseries_.columns)
    assert (exp.events_["event"] == "failover").any()


def test_p2p_without_fault_moves_the_same_bytes_either_way():
    df = FailoverExperiment(workload="p2p", fault="none", n_msgs=30, msg_bytes=4096).run()
    assert df["completed"].all() and df["correct"].all() and (df["failovers"] == 0).all()


@pytest.mark.parametrize("kwargs, match", [
    ({"workload": "alltoall"}, "workload"), ({"fault": "meteor"}, "fault"),
    ({"transport": "ib"}, "transport"), ({"fault_at": 2.0}, "fault_at"),
    ({"fault_host": 9}, "fault_host"), ({"reps": 0}, "reps")])
def test_experiment_rejects_bad_input(kwargs, match):
    with pytest.raises(ValueError, match=match):
        FailoverExperiment(**kwargs).run()


def test_training_shift_loses_no_progress_and_matches_fault_free_weights():
    exp = FailoverTrainingExperiment(iterations=16, ckpt_every=5, fault_at=8, n_params=512,
                             restart_s=0.2, ckpt_s=0.0, op_timeout=2)
    df = exp.run().set_index("mode")
    assert df["equal_to_no_fault"].all()  # bit-equal weights in every mode
    assert df.loc["shift", "recomputed"] == 0 and df.loc["shift", "failovers"] >= 1
    assert df.loc["checkpoint_restart", "restarts"] == 1
    assert df.loc["checkpoint_restart", "recomputed"] >= 3  # iterations 5.. redone
    # the loss went down from its starting value
    assert df.loc["shift", "final_loss"] < 0.5 * np.mean(
        [np.sum(y ** 2) for y in exp._data()[1]]) / exp.rows_per_rank
    prog = exp.progress_
    cr = prog[prog["mode"] == "checkpoint_restart"]["iteration"].to_numpy()
    assert (np.diff(cr) < 0).any()  # the restart rolled progress back
    with pytest.raises(ValueError, match="fault_at"):
        FailoverTrainingExperiment(iterations=5, fault_at=7).run()


def test_overhead_table_has_ratios():
    df = measure_datapath_overhead(n_ops=128, reps=1)
    assert set(df["op"]) == {"post_send", "poll", "write_latency"}
    assert (df[~df["shift"]]["ratio_vs_plain"] == 1).all() and (df["us"] > 0).all()


def test_cli_runs(capsys, tmp_path):
    from causalkit.cli import main
    out = tmp_path / "r"
    assert main(["systems", "rdma", "--fault", "nic_down", "--hosts", "3", "--elems", "1500",
                 "--iterations", "4", "--no-baseline", "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert "emulated" in text and "nic_down" in text
    assert {"runs.jsonl", "results.csv", "MANIFEST.json"} <= {p.name for p in out.iterdir()}
    assert main(["systems", "rdma", "--check-trilemma"]) == 0
    text = capsys.readouterr().out
    assert "EO+RNO+ZC" in text and "naive_replay: VIOLATED" in text
