"""The explicit-state model checker: counterexamples for naive replay, SHIFT's escape, and the
impossibility of keeping exactly-once, receiver-NIC opacity and zero-copy together."""

import pytest

from causalkit.systems.rdma.trilemma import TRACES, Op, check_policy, check_trilemma


@pytest.fixture(scope="module")
def report():
    return check_trilemma()


def test_state_space_is_small_and_counted(report):
    assert 1000 < report.states < 10 ** 6
    assert (report.combinations["states"] > 0).all()
    assert "states explored" in report.summary()


def test_no_policy_keeps_all_three_properties(report):
    tab = report.achievable()
    all_three = tab.loc[(True, True, True)]
    # impossible for every trace with a one-sided WRITE or an atomic ...
    assert not all_three["nccl_simple"] and not all_three["atomic_signal"]
    assert not all_three["nccl_ll"]
    # ... and the exhaustive family really was searched (every view-to-resend function)
    row = report.combinations.query("trace == 'nccl_simple' and eo and rno and zc").iloc[0]
    assert row["family_size"] > 1000 and row["correct_policies"] == 0
    assert "every choice fails" in row["witness"]


@pytest.mark.parametrize("dropped", ["eo", "rno", "zc"])
def test_dropping_any_one_property_makes_nccl_simple_achievable(report, dropped):
    kept = {"eo": True, "rno": True, "zc": True, dropped: False}
    assert report.achievable().loc[(kept["eo"], kept["rno"], kept["zc"]), "nccl_simple"]


def test_naive_replay_counterexamples_are_concrete_and_shortest():
    res = check_policy("nccl_simple", "naive_replay", eo=False, rno=True, zc=True)
    assert not res["holds"] and "duplicate_notification" in res["violations"]
    steps = res["counterexample"]
    assert any("ACKs lost" in s for s in steps) and steps[-1].startswith("receiver NIC1")
    atomic = check_policy("atomic_signal", "naive_replay", eo=False, rno=True, zc=True)
    assert atomic["violations"] == ["double_atomic"]
    sliding = check_policy("send_recv", "naive_replay", eo=False, rno=True, zc=True)
    assert "duplicate_notification" in sliding["violations"]
    assert len(sliding["counterexample"]) == 5  # post, execute, die, failover, re-execute


def test_shift_holds_on_nccl_simple_and_errors_on_atomics_never_corrupts():
    for trace in ("nccl_simple", "send_recv"):
        res = check_policy(trace, "shift", eo=False, rno=True, zc=True)
        assert res["holds"] and res["errors_surfaced"] == 0
    atomic = check_policy("atomic_signal", "shift", eo=False, rno=True, zc=True)
    assert atomic["holds"] and atomic["errors_surfaced"] > 0
    # SHIFT is not exactly-once: the data WRITE may run twice
    strict = check_policy("nccl_simple", "shift", eo=True, rno=True, zc=True)
    assert strict["violations"] == ["duplicate_execution"]
    # and it does not protect flag-in-data protocols (NCCL LL)
    ll = check_policy("nccl_ll", "shift", eo=False, rno=True, zc=True)
    assert "overwrite_after_consume" in ll["violations"]


def test_oracle_with_receiver_nic_state_is_exactly_once():
    for trace in TRACES:
        assert check_policy(trace, "oracle_nic_state", eo=True, rno=False, zc=True)["holds"]


def test_bad_traces_are_rejected():
    with pytest.raises(ValueError, match="1 to 3"):
        check_trilemma({"long": tuple(Op("write", i) for i in range(4))})
    with pytest.raises(ValueError, match="empty"):
        check_trilemma({})
